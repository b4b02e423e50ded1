-- Bad input gets a clear ERROR with its SQLSTATE (SPEC.md 7).
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS rlock;
RESET client_min_messages;
\set SHOW_CONTEXT never

-- names: NULL, empty, too long (1024 bytes with the prefix is the limit)
SELECT rlock_acquire(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_try_acquire(NULL, '1s');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_release(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_is_locked(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_acquire('');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_xact_acquire('', '1s');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_acquire(repeat('n', 1025), '1s');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_try_acquire(repeat('n', 1024), '1s'), rlock_release(repeat('n', 1024));
SET rlock.key_prefix = 'pfx:';
SELECT rlock_try_acquire(repeat('n', 1021), '1s');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_try_acquire(repeat('n', 1020), '1s'), rlock_release(repeat('n', 1020));
RESET rlock.key_prefix;

-- leases: zero, negative, absurd
SELECT rlock_acquire('err_l', '0');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_acquire('err_l', '-5 seconds');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_try_acquire('err_l', '1 day -25 hours');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_xact_acquire('err_l', '366 days');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_acquire('err_l', '1000 years');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_is_locked('err_l');

-- waits: negative, absurd, NULL
SELECT rlock_try_acquire('err_w', '1s', '-1 second');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_xact_try_acquire('err_w', '1s', '400 days');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_try_acquire('err_w', '1s', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_is_locked('err_w');

-- owners: empty, too long, reserved, and an owner lock needs a lease
SELECT rlock_acquire('err_o', '1s', owner => '');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_acquire('err_o', '1s', owner => repeat('o', 257));
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_acquire('err_o', '1s', owner => 'mode');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_acquire('err_o', '1s', owner => '0f8fad5b-d9cb-469f-a165-70867728950e:4242');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_acquire('err_o', owner => 'job-1');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_release('err_o', owner => '');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_is_locked('err_o');

-- a name already used by a non-lock Redis key
SELECT current_setting('rlock.redis_url') AS redis_url \gset
\setenv RLOCK_REDIS_URL :redis_url
\! redis-cli -u "$RLOCK_REDIS_URL" SET err_string_key 'not a lock'
SELECT rlock_acquire('err_string_key', '1s');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_try_acquire('err_string_key', '1s', '1s');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_is_locked('err_string_key');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_hold_count('err_string_key');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_force_release('err_string_key');
\echo :LAST_ERROR_SQLSTATE
\! redis-cli -u "$RLOCK_REDIS_URL" GET err_string_key
-- the session is still fine, and holds nothing
SELECT rlock_try_acquire('err_ok', '1s'), rlock_release('err_ok');
SELECT rlock_release_all();

-- settings: only superusers see or change where locks live
CREATE ROLE rlock_err_user;
SET ROLE rlock_err_user;
-- (only the SQLSTATE: the wording changed in PostgreSQL 15)
\set VERBOSITY sqlstate
SHOW rlock.redis_url;
\set VERBOSITY default
\echo :LAST_ERROR_SQLSTATE
SET rlock.key_prefix = 'x';
\echo :LAST_ERROR_SQLSTATE
SET rlock.redis_url = 'redis://10.0.0.1:6379/0';
\echo :LAST_ERROR_SQLSTATE
-- the password file and the client key are superuser-only; TLS settings
-- server-wide (the wording of the SHOW error differs between versions)
\set VERBOSITY sqlstate
SHOW rlock.redis_password_file;
SHOW rlock.tls_key_file;
\set VERBOSITY default
SET rlock.tls_verify = 'none';
\echo :LAST_ERROR_SQLSTATE
SET rlock.tls_ca_file = '/tmp/evil-ca.pem';
\echo :LAST_ERROR_SQLSTATE
SET rlock.redis_password_file = '/tmp/x';
\echo :LAST_ERROR_SQLSTATE
-- the sentinels' password file is superuser-only, acknowledgements server-wide
\set VERBOSITY sqlstate
SHOW rlock.sentinel_password_file;
\set VERBOSITY default
SET rlock.sentinel_password_file = '/tmp/x';
\echo :LAST_ERROR_SQLSTATE
SET rlock.replica_acks = 0;
\echo :LAST_ERROR_SQLSTATE
SET rlock.replica_ack_timeout = '10ms';
\echo :LAST_ERROR_SQLSTATE
SHOW rlock.replica_acks;
SHOW rlock.replica_ack_timeout;
-- the idle timeout is the user's own
SET rlock.connection_idle_timeout = '5min';
SHOW rlock.connection_idle_timeout;
RESET rlock.connection_idle_timeout;
RESET ROLE;
DROP ROLE rlock_err_user;
SET rlock.redis_url = 'redis://10.0.0.1:6379/0';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET rlock.redis_url = 'http://example.com';
\echo :LAST_ERROR_SQLSTATE
-- unix:// and rediss:// forms
ALTER SYSTEM SET rlock.redis_url = 'unix://';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET rlock.redis_url = 'unix://relative/redis.sock';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET rlock.redis_url = 'unix:///tmp/redis.sock?database=1';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET rlock.redis_url = 'unix:///tmp/redis.sock?db=x';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET rlock.redis_url = 'rediss://:pw@[::1';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET rlock.tls_verify = 'sometimes';
\echo :LAST_ERROR_SQLSTATE
-- Sentinel forms: the master's name is required, every address valid
ALTER SYSTEM SET rlock.redis_url = 'redis-sentinel://:pw@10.0.0.1:26379,10.0.0.2/0';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET rlock.redis_url = 'redis-sentinel://10.0.0.1,,10.0.0.2#mymaster';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET rlock.redis_url = 'redis-sentinel://10.0.0.1:0#mymaster';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET rlock.redis_url = 'redis-sentinel://10.0.0.1/x#mymaster';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET rlock.redis_url = 'redis-sentinel://h1,h2,h3,h4,h5,h6,h7,h8,h9,h10,h11,h12,h13,h14,h15,h16,h17#m';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET rlock.redis_url = 'redis-elsewhere://10.0.0.1#m';
\echo :LAST_ERROR_SQLSTATE
-- Cluster forms: seed nodes only, no database, no name
ALTER SYSTEM SET rlock.redis_url = 'redis-cluster://10.0.0.1:7000,10.0.0.2:7001/1';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET rlock.redis_url = 'redis-cluster://10.0.0.1:7000#mymaster';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET rlock.redis_url = 'redis-cluster://10.0.0.1:7000,,10.0.0.2';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET rlock.redis_url = 'redis-cluster://10.0.0.1:99999';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET rlock.publish_mode = 'broadcast';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET rlock.replica_acks = -1;
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY sqlstate
ALTER SYSTEM SET rlock.replica_ack_timeout = 0;
\set VERBOSITY default
\echo :LAST_ERROR_SQLSTATE
-- valid forms are accepted (not applied: no reload)
ALTER SYSTEM SET rlock.redis_url = 'redis-sentinel://user:pw@s1.example.com,10.0.0.2:26380,[::1]:26381/2#my%20master';
ALTER SYSTEM SET rlock.redis_url = 'rediss-sentinel://10.0.0.1#mymaster';
ALTER SYSTEM SET rlock.redis_url = 'redis-cluster://user:pw@10.0.0.1:7000,node2.example.com,[::1]:7002';
ALTER SYSTEM SET rlock.redis_url = 'rediss-cluster://10.0.0.1:7000';
ALTER SYSTEM SET rlock.publish_mode = 'spublish';
ALTER SYSTEM RESET rlock.publish_mode;
ALTER SYSTEM SET rlock.redis_url = 'unix://:pw@/tmp/redis.sock?db=3';
ALTER SYSTEM SET rlock.redis_url = 'rediss://user:pw@redis.example.com:6380/2';
ALTER SYSTEM SET rlock.tls_verify = 'ca';
ALTER SYSTEM RESET rlock.redis_url;
ALTER SYSTEM RESET rlock.tls_verify;
-- (only the SQLSTATE: PostgreSQL 17 words the range with units)
\set VERBOSITY sqlstate
ALTER SYSTEM SET rlock.connect_timeout = 0;
\set VERBOSITY default
\echo :LAST_ERROR_SQLSTATE

-- a name too long is cut in the message on a character boundary (a UTF8
-- database; 'x' and 2-byte characters: 40 bytes would split one)
SELECT current_database() AS origdb \gset
SET client_min_messages = warning;
DROP DATABASE IF EXISTS rlock_err_utf8;
CREATE DATABASE rlock_err_utf8 TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C';
RESET client_min_messages;
\c rlock_err_utf8
SET client_min_messages = warning;
CREATE EXTENSION rlock;
RESET client_min_messages;
\set VERBOSITY default
SELECT rlock_try_acquire('x' || repeat(U&'\00e9', 600));
\c :origdb
DROP DATABASE rlock_err_utf8;
