-- Single-session semantics of the exclusive lock (SPEC.md 5.1, 5.4).
CREATE EXTENSION IF NOT EXISTS rlock;
\set VERBOSITY default
\set SHOW_CONTEXT never

-- the holder identity: <instance uuid>:<backend pid>
SELECT rlock_holder_id() ~ ('^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}:' || pg_backend_pid() || '$') AS holder_id_ok;

-- reentrancy: counts go up and down; free at zero
SELECT rlock_is_locked('reg_a'), rlock_is_held('reg_a'), rlock_hold_count('reg_a');
SELECT rlock_acquire('reg_a', '1 minute');
SELECT rlock_try_acquire('reg_a', '1 minute');
SELECT rlock_acquire('reg_a');
SELECT rlock_is_locked('reg_a'), rlock_is_held('reg_a'), rlock_hold_count('reg_a');
SELECT kind, holder = rlock_holder_id() AS mine, hold_count,
       remaining_lease BETWEEN '1 second' AND '1 minute' AS lease_ok
  FROM rlock_status('reg_a');
SELECT rlock_release('reg_a');
SELECT rlock_hold_count('reg_a');
SELECT rlock_release('reg_a'), rlock_release('reg_a');
SELECT rlock_is_locked('reg_a'), rlock_hold_count('reg_a');
SELECT count(*) FROM rlock_status('reg_a');
SELECT rlock_remaining_lease('reg_a');

-- release of what is not held: false with a WARNING, like pg_advisory_unlock
SELECT rlock_release('reg_a');
SELECT rlock_release('reg_never_taken');

-- a fixed lease is the key's TTL
SELECT rlock_acquire('reg_lease', '90 seconds');
SELECT rlock_remaining_lease('reg_lease') BETWEEN '80 seconds' AND '90 seconds' AS fixed_lease;
-- NULL lease: rlock.watchdog_timeout (2s in the test configuration)
SELECT rlock_acquire('reg_wd');
SELECT rlock_remaining_lease('reg_wd') <= '2 seconds' AS watchdog_lease;
SELECT rlock_release('reg_wd'), rlock_release('reg_lease');

-- session locks survive ROLLBACK; transaction locks go at ROLLBACK
BEGIN;
SELECT rlock_acquire('reg_s', '1 minute');
SELECT rlock_xact_acquire('reg_x', '1 minute');
SELECT rlock_is_held('reg_s'), rlock_is_held('reg_x');
ROLLBACK;
SELECT rlock_is_held('reg_s'), rlock_is_held('reg_x'), rlock_is_locked('reg_x');

-- transaction locks go at COMMIT, not before
BEGIN;
SELECT rlock_xact_acquire('reg_x', '1 minute');
SELECT rlock_xact_try_acquire('reg_x', '1 minute');
SELECT rlock_hold_count('reg_x');
-- cannot be released by hand
SELECT rlock_release('reg_x');
SELECT rlock_hold_count('reg_x');
COMMIT;
SELECT rlock_is_locked('reg_x');

-- session and transaction holds of one name stack
BEGIN;
SELECT rlock_xact_acquire('reg_s', '1 minute');
SELECT rlock_hold_count('reg_s');
COMMIT;
SELECT rlock_hold_count('reg_s');

-- ROLLBACK TO SAVEPOINT releases what was taken after the savepoint only
BEGIN;
SELECT rlock_xact_acquire('reg_p1', '1 minute');
SAVEPOINT sp1;
SELECT rlock_xact_acquire('reg_p1', '1 minute');
SELECT rlock_xact_acquire('reg_p2', '1 minute');
SAVEPOINT sp2;
SELECT rlock_xact_acquire('reg_p3', '1 minute');
RELEASE SAVEPOINT sp2;
SELECT rlock_hold_count('reg_p1'), rlock_hold_count('reg_p2'), rlock_hold_count('reg_p3');
ROLLBACK TO SAVEPOINT sp1;
SELECT rlock_hold_count('reg_p1'), rlock_hold_count('reg_p2'), rlock_hold_count('reg_p3');
SELECT rlock_is_locked('reg_p2'), rlock_is_locked('reg_p3');
COMMIT;
SELECT rlock_is_locked('reg_p1');

-- a failed statement inside a subtransaction releases its transaction locks
BEGIN;
SAVEPOINT sp;
SELECT rlock_xact_acquire('reg_sub', '1 minute');
SELECT 1/0;
ROLLBACK TO SAVEPOINT sp;
SELECT rlock_is_locked('reg_sub');
COMMIT;

-- PREPARE TRANSACTION is refused while transaction locks are held
BEGIN;
SELECT rlock_xact_acquire('reg_prep', '1 minute');
PREPARE TRANSACTION 'rlock_p';
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_is_locked('reg_prep');

-- rlock_release_all: every session lock, all levels; returns how many names
SELECT rlock_acquire('reg_all1', '1 minute'), rlock_acquire('reg_all1', '1 minute'),
       rlock_acquire('reg_all2', '1 minute');
BEGIN;
SELECT rlock_xact_acquire('reg_all3', '1 minute');
SELECT rlock_release_all();
SELECT rlock_is_locked('reg_all1'), rlock_is_locked('reg_all2'), rlock_is_locked('reg_all3'),
       rlock_is_locked('reg_s');
COMMIT;
SELECT rlock_release_all();

-- owner tokens: not this session's holds; released with the same owner
SELECT rlock_acquire('reg_own', '1 minute', owner => 'job-42');
SELECT rlock_is_locked('reg_own'), rlock_is_held('reg_own');
SELECT holder, hold_count FROM rlock_status('reg_own');
SELECT rlock_try_acquire('reg_own', '1 minute');
SELECT rlock_release('reg_own');
SELECT rlock_release('reg_own', owner => 'job-7');
SELECT rlock_release('reg_own', owner => 'job-42');
SELECT rlock_release('reg_own', owner => 'job-42');
SELECT rlock_is_locked('reg_own');

-- force release deletes the lock whoever holds it
SELECT rlock_acquire('reg_force', '1 minute', owner => 'other');
SELECT rlock_force_release('reg_force'), rlock_is_locked('reg_force');
SELECT rlock_force_release('reg_force');
-- and this session notices its own hold is gone
SELECT rlock_acquire('reg_force', '1 minute');
SELECT rlock_force_release('reg_force');
SELECT rlock_release('reg_force');

-- force release is not granted to PUBLIC
CREATE ROLE rlock_regress_user;
SET ROLE rlock_regress_user;
SELECT rlock_force_release('reg_force');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_try_acquire('reg_user', '1 minute'), rlock_release('reg_user');
RESET ROLE;
DROP ROLE rlock_regress_user;

-- rlock_ping answers
SELECT rlock_ping() < '1 second' AS ping_ok;

-- key prefix: the name is prefixed in Redis
SET rlock.key_prefix = 'tenant1:';
SELECT rlock_acquire('reg_pfx', '1 minute');
RESET rlock.key_prefix;
SELECT rlock_is_locked('reg_pfx'), rlock_is_locked('tenant1:reg_pfx');
SET rlock.key_prefix = 'tenant1:';
SELECT rlock_release('reg_pfx');
RESET rlock.key_prefix;
SELECT rlock_is_locked('tenant1:reg_pfx');

-- names are binary-safe text: no injection into scripts
SELECT rlock_acquire($$x'); redis.call('flushall') --$$, '1 minute');
SELECT rlock_is_held($$x'); redis.call('flushall') --$$);
SELECT rlock_release($$x'); redis.call('flushall') --$$);
SELECT rlock_acquire('锁-ünïcødé', '1 minute'), rlock_hold_count('锁-ünïcødé'), rlock_release('锁-ünïcødé');

-- a wait bounded by lock_timeout fails with SQLSTATE 55P03 and holds nothing
SELECT rlock_acquire('reg_lt', '1 minute', owner => 'someone-else');
SET lock_timeout = '100ms';
SELECT rlock_acquire('reg_lt', '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_xact_acquire('reg_lt', '1 minute');
\echo :LAST_ERROR_SQLSTATE
-- a timed try is bounded by its own wait, not by lock_timeout
SELECT rlock_try_acquire('reg_lt', '1 minute', '300ms');
RESET lock_timeout;
SET statement_timeout = '100ms';
SELECT rlock_acquire('reg_lt', '1 minute');
\echo :LAST_ERROR_SQLSTATE
RESET statement_timeout;
SELECT rlock_is_held('reg_lt'), rlock_release('reg_lt', owner => 'someone-else');
