-- What each role may see and do (SPEC.md section 8, README "Privileges"):
-- a plain role (no grants beyond PUBLIC's), a member of pg_monitor and a
-- member of pg_read_all_stats.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS rlock;
DROP ROLE IF EXISTS rlock_priv_plain, rlock_priv_monitor, rlock_priv_stats;
RESET client_min_messages;
\set SHOW_CONTEXT never
SELECT current_setting('rlock.redis_url') AS redis_url \gset
\setenv RLOCK_REDIS_URL :redis_url
CREATE ROLE rlock_priv_plain;
CREATE ROLE rlock_priv_monitor IN ROLE pg_monitor;
CREATE ROLE rlock_priv_stats IN ROLE pg_read_all_stats;

-- ---- EXECUTE of every function, SELECT of every view ----
SELECT p.oid::regprocedure AS function,
       has_function_privilege('rlock_priv_plain', p.oid, 'EXECUTE') AS plain,
       has_function_privilege('rlock_priv_monitor', p.oid, 'EXECUTE') AS monitor,
       has_function_privilege('rlock_priv_stats', p.oid, 'EXECUTE') AS stats
  FROM pg_proc p
  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'rlock'
 ORDER BY p.proname, p.oid::regprocedure::text;
SELECT c.relname AS view,
       has_table_privilege('rlock_priv_plain', c.oid, 'SELECT') AS plain,
       has_table_privilege('rlock_priv_monitor', c.oid, 'SELECT') AS monitor,
       has_table_privilege('rlock_priv_stats', c.oid, 'SELECT') AS stats
  FROM pg_class c
  JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'rlock'
 ORDER BY 1;

-- ---- what a plain role cannot do ----
SET ROLE rlock_priv_plain;
SELECT rlock_force_release('pv_any');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_stats_reset();
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_semaphore_add_permits('pv_sem', 100);
\echo :LAST_ERROR_SQLSTATE
-- ... nor give a semaphore permits through the latch functions (with no
-- permit out, a semaphore's key looks like a latch's count): counting it
-- down and setting a count are refused, and once its key is gone (a Java
-- latch's countDown to zero, say) it is not set anew
RESET ROLE;
SELECT rlock_semaphore_set_permits('pv_sem2', 2);
SET ROLE rlock_priv_plain;
SELECT rlock_latch_count_down('pv_sem2');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_latch_set_count('pv_sem2', 100);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_semaphore_available('pv_sem2');
\! redis-cli -u "$RLOCK_REDIS_URL" DEL pv_sem2 > /dev/null
SELECT rlock_semaphore_set_permits('pv_sem2', 100);
SELECT rlock_latch_set_count('pv_sem2', 100);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_semaphore_available('pv_sem2');
\! redis-cli -u "$RLOCK_REDIS_URL" DEL pv_sem2 '{pv_sem2}:rlock_semaphore' > /dev/null
-- where locks live and their prefix are not its to see or change (the
-- wording of the SHOW error differs between versions: only the SQLSTATE)
\set VERBOSITY sqlstate
SHOW rlock.redis_url;
SHOW rlock.redlock_urls;
SHOW rlock.redis_password_file;
SHOW rlock.sentinel_password_file;
SHOW rlock.tls_key_file;
SELECT current_setting('rlock.redis_url');
\set VERBOSITY default
SELECT name FROM pg_settings
 WHERE name IN ('rlock.redis_url', 'rlock.redlock_urls', 'rlock.redis_password_file',
                'rlock.sentinel_password_file', 'rlock.tls_key_file');
SET rlock.redis_url = 'redis://10.0.0.1:6379/0';
\echo :LAST_ERROR_SQLSTATE
SET rlock.redlock_urls = 'redis://10.0.0.1:6379/0';
\echo :LAST_ERROR_SQLSTATE
SET rlock.key_prefix = 'other-tenant:';
\echo :LAST_ERROR_SQLSTATE
SELECT set_config('rlock.key_prefix', 'other-tenant:', false);
\echo :LAST_ERROR_SQLSTATE
ALTER ROLE rlock_priv_plain SET rlock.key_prefix = 'other-tenant:';
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- ---- pg_read_all_stats sees no settings; pg_monitor sees them masked ----
SET ROLE rlock_priv_stats;
\set VERBOSITY sqlstate
SHOW rlock.redis_url;
\set VERBOSITY default
SELECT count(*) FROM pg_settings WHERE name = 'rlock.redis_url';
RESET ROLE;
SET ROLE rlock_priv_monitor;
-- (this server's URL has no password; test/t/014_safety.pl and
-- test/t/029_privileges.pl show one masked)
SELECT current_setting('rlock.redis_url') ~ '^redis://127\.0\.0\.1:[0-9]+/0$' AS url_shown;
SELECT setting ~ '^redis://127\.0\.0\.1:[0-9]+/0$' AS url_in_pg_settings
  FROM pg_settings WHERE name = 'rlock.redis_url';
SET rlock.key_prefix = 'other-tenant:';
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- ---- owner tokens are secrets ----
-- a coordinator (here: the superuser) takes a lock for an owner token
SELECT rlock_acquire('pv_own', '1 minute', owner => 'pv-secret-8812');
-- Redis holds the token's digest, never the token
\! redis-cli -u "$RLOCK_REDIS_URL" HKEYS pv_own
-- nobody sees the token: superusers and pg_read_all_stats (pg_monitor)
-- members see that one is there, other roles not even that
SELECT kind, holder, hold_count FROM rlock_status('pv_own');
SET ROLE rlock_priv_plain;
SELECT kind, holder, hold_count FROM rlock_status('pv_own');
-- the digest Redis holds releases nothing
SELECT rlock_release('pv_own',
         owner => 'rlock-owner:' || encode(sha256('rlock owner token:pv-secret-8812'), 'hex'));
-- a wrong token is not named in the warning
SELECT rlock_release('pv_own', owner => 'pv-guess');
RESET ROLE;
SET ROLE rlock_priv_stats;
SELECT kind, holder, hold_count FROM rlock_status('pv_own');
RESET ROLE;
SET ROLE rlock_priv_monitor;
SELECT kind, holder, hold_count FROM rlock_status('pv_own');
RESET ROLE;
-- a lock taken for a token belongs to no session: rlock_locks has no row
SELECT count(*) FROM rlock_locks WHERE name = 'pv_own';
-- holder identities are not secrets: a plain role sees its own and others'
SET ROLE rlock_priv_plain;
SELECT rlock_acquire('pv_mine', '1 minute');
SELECT holder = rlock_holder_id() AS identity_shown FROM rlock_status('pv_mine');
SELECT holder = rlock_holder_id() AS identity_shown, scope FROM rlock_locks WHERE name = 'pv_mine';
SELECT rlock_release('pv_mine');
-- whoever knows the token releases the lock (the hand-off)
SELECT rlock_release('pv_own', owner => 'pv-secret-8812');
RESET ROLE;

-- ---- a lock function touches only locks ----
-- application hashes in the lock database: a cart, a counter, a profile
-- with a "mode" field
\! redis-cli -u "$RLOCK_REDIS_URL" HSET 'cart:99' item_sku_1 1 item_sku_2 3 > /dev/null
\! redis-cli -u "$RLOCK_REDIS_URL" HSET 'counter:7' hits 5 > /dev/null
\! redis-cli -u "$RLOCK_REDIS_URL" HSET 'profile:1' mode read theme dark > /dev/null
SET ROLE rlock_priv_plain;
-- naming an application field as the owner names nothing
SELECT rlock_release('cart:99', owner => 'item_sku_1');
SELECT rlock_release('cart:99', owner => 'item_sku_2');
SELECT rlock_fair_release('cart:99', owner => 'item_sku_1');
SELECT rlock_release('counter:7', owner => 'hits');
SELECT rlock_read_release('profile:1', owner => 'theme');
SELECT rlock_write_release('profile:1', owner => 'theme');
SELECT rlock_read_release('cart:99', owner => 'item_sku_1');
-- nor does taking them: the hash is somebody else's, left as it is
SELECT rlock_try_acquire('cart:99', '1 minute', owner => 'item_sku_1');
SELECT rlock_fenced_try_acquire('counter:7', '1 minute', owner => 'hits');
SELECT rlock_fair_try_acquire('counter:7', '1 minute', owner => 'hits');
SELECT rlock_write_try_acquire('profile:1', '1 minute', owner => 'theme');
SELECT rlock_read_try_acquire('profile:1', '1 minute');
SELECT rlock_read_try_acquire('profile:1', '1 minute', owner => 'theme');
-- an application hash with an expiry and a 'mode' field is not a lock either
\! redis-cli -u "$RLOCK_REDIS_URL" HSET 'session:9' mode read user alice > /dev/null
\! redis-cli -u "$RLOCK_REDIS_URL" PEXPIRE 'session:9' 600000 > /dev/null
SELECT rlock_read_try_acquire('session:9', '1 minute');
\! redis-cli -u "$RLOCK_REDIS_URL" HGETALL 'session:9'
\! redis-cli -u "$RLOCK_REDIS_URL" DEL 'session:9' > /dev/null
-- and introspection does not list an application's fields
SELECT kind, holder, hold_count FROM rlock_status('cart:99') ORDER BY hold_count;
RESET ROLE;
\! redis-cli -u "$RLOCK_REDIS_URL" HGETALL 'cart:99'
\! redis-cli -u "$RLOCK_REDIS_URL" HGETALL 'counter:7'
\! redis-cli -u "$RLOCK_REDIS_URL" HGETALL 'profile:1'
\! redis-cli -u "$RLOCK_REDIS_URL" PTTL 'cart:99'
\! redis-cli -u "$RLOCK_REDIS_URL" EXISTS 'redisson_lock_token:{counter:7}' 'redisson_lock_queue:{counter:7}'
-- force release (granted to superusers only) deletes locks, not hashes
-- without an expiry or whose fields are not hold counts
SELECT rlock_force_release('cart:99');
\echo :LAST_ERROR_SQLSTATE
\! redis-cli -u "$RLOCK_REDIS_URL" PEXPIRE 'profile:1' 600000 > /dev/null
SELECT rlock_force_release('profile:1');
\echo :LAST_ERROR_SQLSTATE
\! redis-cli -u "$RLOCK_REDIS_URL" HGETALL 'cart:99'
\! redis-cli -u "$RLOCK_REDIS_URL" HGETALL 'profile:1'
\! redis-cli -u "$RLOCK_REDIS_URL" DEL 'cart:99' 'counter:7' 'profile:1' > /dev/null

DROP ROLE rlock_priv_plain, rlock_priv_monitor, rlock_priv_stats;
