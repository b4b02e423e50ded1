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

-- ---- semaphores and latches change only their own kind (SPEC 5.5) ----
-- an application's integers and sorted set, and a latch and a semaphore a
-- Java client (Redisson) made: rlock's marker is on none of them
\! redis-cli -u "$RLOCK_REDIS_URL" MSET pv_app_counter 42 pv_app_one 1 pv_app_neg -7 pv_app_zero 0 pv_app_big 100 pv_app_huge 99999999999999999999 pv_java_latch 2 pv_java_sem 3 > /dev/null
\! redis-cli -u "$RLOCK_REDIS_URL" ZADD '{pv_jobs}:timeout' 1 expired 99999999999999 live > /dev/null
\! redis-cli -u "$RLOCK_REDIS_URL" HSET pv_app_hash f 1 g 2 > /dev/null
SET ROLE rlock_priv_plain;
-- a count rlock did not set is not counted down, whatever it holds
SELECT rlock_latch_count_down('pv_app_counter');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_latch_count_down('pv_app_one');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_latch_count_down('pv_java_latch');
\echo :LAST_ERROR_SQLSTATE
-- zero, a negative number, a number out of range: never a live latch
SELECT rlock_latch_count_down('pv_app_neg');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_latch_count_down('pv_app_zero');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_latch_set_count('pv_app_neg', 3);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_latch_set_count('pv_app_zero', 3);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_latch_count_down('pv_app_huge');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_latch_count('pv_app_huge');
\echo :LAST_ERROR_SQLSTATE
-- permits are not taken from a number rlock did not set
SELECT rlock_semaphore_try_acquire('pv_app_big', 100, '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_semaphore_xact_try_acquire('pv_app_counter', 1, '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_semaphore_try_acquire('pv_jobs', 1, '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_semaphore_try_acquire('pv_app_huge', 1, '1 minute');
\echo :LAST_ERROR_SQLSTATE
-- reading the permits available writes nothing (an expired one counts as
-- available), and creates nothing
SELECT rlock_semaphore_available('pv_jobs');
-- sizing a semaphore is its owner's, not PUBLIC's
SELECT rlock_semaphore_set_permits('pv_heavy', 2147483647);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_latch_adopt('pv_java_latch');
\echo :LAST_ERROR_SQLSTATE
-- an owner token names no field of an application's hash
SELECT rlock_release('pv_app_hash', owner => 'f');
SELECT rlock_fair_release('pv_app_hash', owner => 'f');
SELECT rlock_read_release('pv_app_hash', owner => 'f');
SELECT rlock_write_release('pv_app_hash', owner => 'f');
RESET ROLE;
\! redis-cli -u "$RLOCK_REDIS_URL" MGET pv_app_counter pv_app_one pv_app_neg pv_app_zero pv_app_big pv_app_huge pv_java_latch pv_java_sem pv_jobs
\! redis-cli -u "$RLOCK_REDIS_URL" ZRANGE '{pv_jobs}:timeout' 0 -1
\! redis-cli -u "$RLOCK_REDIS_URL" HGETALL pv_app_hash
\! redis-cli -u "$RLOCK_REDIS_URL" EXISTS pv_heavy '{pv_app_counter}:rlock_latch' '{pv_app_big}:rlock_semaphore'
-- the owner sizes its semaphore (a plain role could not pre-empt it) ...
SELECT rlock_semaphore_set_permits('pv_heavy', 3);
-- ... and whom it lets adopt objects a Java client made adopts them: then
-- a plain role uses them
SELECT rlock_latch_adopt('pv_java_latch');
SELECT rlock_semaphore_add_permits('pv_java_sem', 0);
SET ROLE rlock_priv_plain;
SELECT rlock_latch_count_down('pv_java_latch');
SELECT rlock_semaphore_try_acquire('pv_java_sem', 2, '1 minute'),
       rlock_semaphore_release('pv_java_sem', 2);
RESET ROLE;
\! redis-cli -u "$RLOCK_REDIS_URL" MGET pv_java_latch pv_java_sem
\! redis-cli -u "$RLOCK_REDIS_URL" DEL pv_app_counter pv_app_one pv_app_neg pv_app_zero pv_app_big pv_app_huge pv_java_latch '{pv_java_latch}:rlock_latch' pv_java_sem '{pv_java_sem}:rlock_semaphore' '{pv_java_sem}:timeout' '{pv_jobs}:timeout' pv_app_hash pv_heavy '{pv_heavy}:rlock_semaphore' > /dev/null

DROP ROLE rlock_priv_plain, rlock_priv_monitor, rlock_priv_stats;
