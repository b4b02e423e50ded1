-- What keeps two holders from coexisting, single-session rules (the
-- multi-session and fault cases are in test/t/014_safety.pl).
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS rlock;
RESET client_min_messages;
\set SHOW_CONTEXT never
SELECT current_setting('rlock.redis_url') AS redis_url \gset
\setenv RLOCK_REDIS_URL :redis_url

-- ---- owner tokens never impersonate a holder ----
-- the write field of this session's write lock: refused, the lock stays held
-- (the messages name this session's holder id: only SQLSTATEs are shown)
SELECT rlock_write_acquire('sf_w', '1 minute');
\set VERBOSITY sqlstate
SELECT rlock_release('sf_w', owner => rlock_holder_id() || ':write');
SELECT rlock_write_release('sf_w', owner => rlock_holder_id());
SELECT rlock_release('sf_w', owner => upper(rlock_holder_id()));
\set VERBOSITY default
SELECT rlock_hold_count('sf_w');
SELECT rlock_write_release('sf_w');
-- any <uuid>:... token, and tokens naming a write side, are refused
SELECT rlock_acquire('sf_o', '1 minute', owner => '01234567-89ab-cdef-0123-456789abcdef:x');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_acquire('sf_o', '1 minute', owner => 'job-7:write');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_read_release('sf_o', owner => 'job-7:write');
\echo :LAST_ERROR_SQLSTATE

-- ---- a release never touches a lock of another kind ----
SELECT rlock_read_acquire('sf_r', '1 minute', owner => 'job-1');
SELECT rlock_release('sf_r', owner => 'job-1');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_fair_release('sf_r', owner => 'job-1');
\echo :LAST_ERROR_SQLSTATE
SELECT kind, hold_count FROM rlock_status('sf_r');
SELECT rlock_read_release('sf_r', owner => 'job-1');
SELECT rlock_acquire('sf_x', '1 minute', owner => 'job-2');
SELECT rlock_read_release('sf_x', owner => 'job-2');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_write_release('sf_x', owner => 'job-2');
\echo :LAST_ERROR_SQLSTATE
SELECT kind, hold_count FROM rlock_status('sf_x');
SELECT rlock_release('sf_x', owner => 'job-2');

-- ---- rlock.watchdog_timeout is the server's, not a session's ----
SET rlock.watchdog_timeout = '400ms';
\echo :LAST_ERROR_SQLSTATE
-- and a server's value below what a COMMIT needs (the check before COMMIT
-- renews to it and wants 1 s left) is refused when it is set
\set VERBOSITY sqlstate
ALTER SYSTEM SET rlock.watchdog_timeout = '1500ms';
\set VERBOSITY default
\echo :LAST_ERROR_SQLSTATE

-- ---- the check before COMMIT requires enough lease to cover the commit ----
CREATE TEMP TABLE guarded (v int);
BEGIN;
SELECT rlock_xact_acquire('sf_c', '1 hour');
INSERT INTO guarded VALUES (1);
\! redis-cli -u "$RLOCK_REDIS_URL" PEXPIRE sf_c 990 > /dev/null
\set VERBOSITY terse
COMMIT;
\set VERBOSITY default
SELECT count(*) AS committed_rows FROM guarded;
-- a lock renewed by the watchdog is extended by the check instead
BEGIN;
SELECT rlock_xact_acquire('sf_c2');
INSERT INTO guarded VALUES (2);
\! redis-cli -u "$RLOCK_REDIS_URL" PEXPIRE sf_c2 990 > /dev/null
COMMIT;
SELECT array_agg(v) AS committed_rows FROM guarded;
-- a lock still held whose lease is too short is not lost: the rollback gives
-- back its transaction-level holds, in Redis too, and keeps the session's
-- (the PEXPIRE plays a lease about to end; the test then gives the key its
-- hour back: it is still there, PEXPIRE says 1); no lock counts as lost
SELECT locks_lost AS lost_before FROM rlock_stats \gset
SELECT rlock_acquire('sf_cs', '1 hour');
BEGIN;
SELECT rlock_xact_acquire('sf_cs', '1 hour');
SELECT rlock_xact_acquire('sf_cs', '1 hour');
INSERT INTO guarded VALUES (3);
\! redis-cli -u "$RLOCK_REDIS_URL" PEXPIRE sf_cs 990 > /dev/null
\set VERBOSITY terse
COMMIT;
\set VERBOSITY default
\! redis-cli -u "$RLOCK_REDIS_URL" PEXPIRE sf_cs 3600000
SELECT array_agg(v) AS committed_rows FROM guarded;
SELECT locks_lost - :lost_before AS lost FROM rlock_stats;
SELECT rlock_hold_count('sf_cs'), rlock_is_held('sf_cs');
SELECT scope, hold_count, state FROM rlock_locks
  WHERE pid = pg_backend_pid() AND name = 'sf_cs';
SELECT kind, holder = rlock_holder_id() AS mine, hold_count
  FROM rlock_status('sf_cs');
SELECT rlock_try_acquire('sf_cs', '1 minute', owner => 'job-3') AS other_took_it;
SELECT rlock_release('sf_cs'), rlock_is_locked('sf_cs');
-- the same for a fair lock, and for a read hold
SELECT rlock_fair_acquire('sf_cf', '1 hour');
BEGIN;
SELECT rlock_fair_xact_acquire('sf_cf', '1 hour');
\! redis-cli -u "$RLOCK_REDIS_URL" PEXPIRE sf_cf 990 > /dev/null
\set VERBOSITY terse
COMMIT;
\set VERBOSITY default
\! redis-cli -u "$RLOCK_REDIS_URL" PEXPIRE sf_cf 3600000
SELECT rlock_hold_count('sf_cf'), rlock_is_held('sf_cf');
SELECT kind, holder = rlock_holder_id() AS mine, hold_count
  FROM rlock_status('sf_cf');
SELECT rlock_fair_try_acquire('sf_cf', '1 minute', owner => 'job-3') AS other_took_it;
SELECT rlock_fair_release('sf_cf'), rlock_is_locked('sf_cf');
SELECT rlock_read_acquire('sf_cr', '1 hour');
BEGIN;
SELECT rlock_read_xact_acquire('sf_cr', '1 hour');
\! redis-cli -u "$RLOCK_REDIS_URL" PEXPIRE sf_cr 990 > /dev/null
\set VERBOSITY terse
COMMIT;
\set VERBOSITY default
\! redis-cli -u "$RLOCK_REDIS_URL" PEXPIRE sf_cr 3600000
SELECT rlock_hold_count('sf_cr'), rlock_is_held('sf_cr');
SELECT kind, holder = rlock_holder_id() AS mine, hold_count
  FROM rlock_status('sf_cr');
SELECT rlock_write_try_acquire('sf_cr', '1 minute', owner => 'job-3') AS other_took_it;
SELECT rlock_read_release('sf_cr'), rlock_is_locked('sf_cr');
-- a lock really gone (its key deleted) is lost, session-level holds and all
SELECT rlock_acquire('sf_cg', '1 hour');
BEGIN;
SELECT rlock_xact_acquire('sf_cg', '1 hour');
\! redis-cli -u "$RLOCK_REDIS_URL" DEL sf_cg > /dev/null
\set VERBOSITY terse
COMMIT;
\set VERBOSITY default
SELECT locks_lost - :lost_before AS lost FROM rlock_stats;
SELECT rlock_hold_count('sf_cg'), rlock_is_held('sf_cg');
SELECT count(*) AS registered FROM rlock_locks
  WHERE pid = pg_backend_pid() AND name = 'sf_cg';
SELECT rlock_release('sf_cg');

-- ---- DISCARD ALL releases the session's locks, as it does advisory locks ----
SELECT rlock_acquire('sf_d1', '1 minute'), rlock_acquire('sf_d2'), rlock_read_acquire('sf_d3');
DISCARD ALL;
\set SHOW_CONTEXT never
SELECT rlock_is_locked('sf_d1') AS d1, rlock_is_locked('sf_d2') AS d2,
       rlock_is_locked('sf_d3') AS d3;
SELECT count(*) AS registered FROM rlock_locks WHERE pid = pg_backend_pid();

-- ---- a fenced acquisition that cannot get a token takes nothing ----
\! redis-cli -u "$RLOCK_REDIS_URL" SET 'redisson_lock_token:{sf_f}' not-a-number > /dev/null
SELECT rlock_fenced_acquire('sf_f', '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_is_locked('sf_f') AS left_locked;
SELECT rlock_fenced_token('sf_f');
\echo :LAST_ERROR_SQLSTATE
\! redis-cli -u "$RLOCK_REDIS_URL" SET 'redisson_lock_token:{sf_f}' 9223372036854775807 > /dev/null
SELECT rlock_fenced_try_acquire('sf_f', '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_is_locked('sf_f') AS left_locked;
\! redis-cli -u "$RLOCK_REDIS_URL" DEL 'redisson_lock_token:{sf_f}' > /dev/null
\! redis-cli -u "$RLOCK_REDIS_URL" HSET 'redisson_lock_token:{sf_f}' a 1 > /dev/null
SELECT rlock_fenced_acquire('sf_f', '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_is_locked('sf_f') AS left_locked;
\! redis-cli -u "$RLOCK_REDIS_URL" DEL 'redisson_lock_token:{sf_f}' > /dev/null
-- a transaction-level hold an earlier call found lost (and forgot, with a
-- WARNING) still fails COMMIT: a rollback to a savepoint (which sends
-- nothing: the next call settles it) ...
BEGIN;
SELECT rlock_xact_acquire('sf_lx1', '1 hour');
SAVEPOINT s1;
SELECT rlock_xact_acquire('sf_lx1', '1 hour');
\! redis-cli -u "$RLOCK_REDIS_URL" DEL sf_lx1 > /dev/null
ROLLBACK TO s1;
-- (terse: the session or the worker may be first to see the loss)
\set VERBOSITY terse
SELECT rlock_hold_count('sf_lx1') AS after_rollback_to;
\set VERBOSITY default
\set VERBOSITY terse
COMMIT;
\set VERBOSITY default
-- ... a release of a session-level hold of the same lock ...
BEGIN;
SELECT rlock_xact_acquire('sf_lx2', '1 hour');
SELECT rlock_acquire('sf_lx2', '1 hour');
\! redis-cli -u "$RLOCK_REDIS_URL" DEL sf_lx2 > /dev/null
-- (terse: the session or the worker may be first to see the loss)
\set VERBOSITY terse
SELECT rlock_release('sf_lx2');
\set VERBOSITY default
\set VERBOSITY terse
COMMIT;
\set VERBOSITY default
-- ... a new acquisition, whose hold the rollback gives back ...
BEGIN;
SELECT rlock_xact_acquire('sf_lx3', '1 hour');
\! redis-cli -u "$RLOCK_REDIS_URL" DEL sf_lx3 > /dev/null
SELECT rlock_xact_acquire('sf_lx3', '1 hour');
\set VERBOSITY terse
COMMIT;
\set VERBOSITY default
\! redis-cli -u "$RLOCK_REDIS_URL" EXISTS sf_lx3
-- ... and a loss in a subtransaction that commits; one whose
-- subtransaction rolls back goes with it, and COMMIT works
BEGIN;
SAVEPOINT s2;
SELECT rlock_xact_acquire('sf_lx4', '1 hour');
\! redis-cli -u "$RLOCK_REDIS_URL" DEL sf_lx4 > /dev/null
SELECT rlock_xact_acquire('sf_lx4', '1 hour');
RELEASE SAVEPOINT s2;
\set VERBOSITY terse
COMMIT;
\set VERBOSITY default
BEGIN;
SAVEPOINT s3;
SELECT rlock_xact_acquire('sf_lx5', '1 hour');
\! redis-cli -u "$RLOCK_REDIS_URL" DEL sf_lx5 > /dev/null
SELECT rlock_xact_acquire('sf_lx5', '1 hour');
ROLLBACK TO s3;
COMMIT;
\! redis-cli -u "$RLOCK_REDIS_URL" EXISTS sf_lx4 sf_lx5
-- ... a semaphore's too, found lost at a release of its session permits:
-- COMMIT names the semaphore's permits, as its own check would
SELECT rlock_semaphore_set_permits('sf_ls', 3);
BEGIN;
SELECT rlock_semaphore_xact_acquire('sf_ls', 1, '1 hour');
SELECT rlock_semaphore_acquire('sf_ls', 1, '1 hour');
\! redis-cli -u "$RLOCK_REDIS_URL" DEL '{sf_ls}:timeout' > /dev/null
-- (terse: the session or the worker may be first to see the loss)
\set VERBOSITY terse
SELECT rlock_semaphore_release('sf_ls', 1);
\set VERBOSITY default
\set VERBOSITY terse
COMMIT;
\set VERBOSITY default
\! redis-cli -u "$RLOCK_REDIS_URL" DEL sf_ls '{sf_ls}:timeout' > /dev/null
-- a transaction that force-released its own transaction lock cannot commit
BEGIN;
SELECT rlock_xact_acquire('sf_lx6', '1 hour');
SELECT rlock_force_release('sf_lx6');
\set VERBOSITY terse
COMMIT;
\set VERBOSITY default
SELECT count(*) AS registered FROM rlock_locks
  WHERE pid = pg_backend_pid() AND name LIKE 'sf_lx%';

\! redis-cli -u "$RLOCK_REDIS_URL" SET 'redisson_lock_token:{sf_f}' 41 > /dev/null
SELECT rlock_fenced_acquire('sf_f', '1 minute') AS token;
SELECT rlock_release('sf_f');

-- ---- names that collide with the keys rlock derives are refused ----
SELECT rlock_acquire('redisson_lock_token:{sf_v}', '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_try_acquire('redisson_lock_queue:{sf_v}', '1 minute');
\echo :LAST_ERROR_SQLSTATE
-- a name that is one hash tag derives the keys of the name inside it
SELECT rlock_read_acquire('{sf_v}', '1 minute');
SELECT rlock_semaphore_set_permits('{sf_v}', 100);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_try_acquire('{sf_v}x', '1 minute'), rlock_release('{sf_v}x');
\set VERBOSITY sqlstate
SELECT rlock_is_locked('{sf_v}:' || rlock_holder_id() || ':rwlock_timeout:1');
\set VERBOSITY default
SET rlock.key_prefix = 'redisson_rwlock:';
SELECT rlock_acquire('sf_v', '1 minute');
\echo :LAST_ERROR_SQLSTATE
RESET rlock.key_prefix;

-- ---- small ones ----
-- a lease below one millisecond
SELECT rlock_acquire('sf_l', '0.5 ms');
\echo :LAST_ERROR_SQLSTATE
-- (a 1 ms lease is taken; it may have run out before the release, which
-- then finds it gone: only the acquisition is checked)
SELECT rlock_try_acquire('sf_l', '1 ms');
SET client_min_messages = error;
SELECT rlock_release('sf_l') IS NOT NULL AS released_or_gone;
RESET client_min_messages;
-- an invalid rlock.redis_url is refused without showing it (or its password)
ALTER SYSTEM SET rlock.redis_url = 'http://user:s3cret@example.com';
\echo :LAST_ERROR_SQLSTATE
-- rlock_locks.database is a proper name
SELECT rlock_acquire('sf_n', '1 minute');
SELECT database = current_database() AS same_db, pg_typeof(database)
  FROM rlock_locks WHERE pid = pg_backend_pid() AND name = 'sf_n';
SELECT rlock_release('sf_n');
