-- Multi-locks (SPEC.md 5.3, Redisson MultiLock): every name is an exclusive
-- lock of 5.1; all are taken or none.  Another holder (a Redisson client,
-- another job) is played by an owner token.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS rlock;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never

-- a multi release in a session that never took a lock (nothing to look in
-- yet): a WARNING for each name, false, and the session goes on
\c
SELECT rlock_multi_release(ARRAY['multi.never', 'multi.never2']);
SELECT 1 AS still_here;

-- a set is taken at once; each member is an exclusive lock of this session
SELECT rlock_multi_acquire(ARRAY['multi.a', 'multi.b', 'multi.c'], '1 minute');
SELECT n, rlock_is_locked(n), rlock_is_held(n), rlock_hold_count(n)
  FROM unnest(ARRAY['multi.a', 'multi.b', 'multi.c']) AS n ORDER BY n;
SELECT n, s.kind, s.holder = rlock_holder_id() AS mine, s.hold_count,
       s.remaining_lease BETWEEN '1 second' AND '1 minute' AS lease_ok
  FROM unnest(ARRAY['multi.a', 'multi.b', 'multi.c']) AS n, rlock_status(n) AS s
 ORDER BY n;
-- rlock_locks shows one row per member
SELECT name, kind, scope, hold_count, holder = rlock_holder_id() AS mine, state
  FROM rlock_locks WHERE pid = pg_backend_pid() AND name LIKE 'multi.%' ORDER BY name;

-- reentrant: each member's count goes up by one per multi acquisition
SELECT rlock_multi_try_acquire(ARRAY['multi.b', 'multi.a'], '1 minute') AS reentered;
SELECT rlock_acquire('multi.c', '1 minute');
SELECT n, rlock_hold_count(n)
  FROM unnest(ARRAY['multi.a', 'multi.b', 'multi.c']) AS n ORDER BY n;
SELECT name, hold_count FROM rlock_locks
 WHERE pid = pg_backend_pid() AND name LIKE 'multi.%' ORDER BY name;

-- multi release: one session level of each name
SELECT rlock_multi_release(ARRAY['multi.a', 'multi.b', 'multi.c']);
SELECT n, rlock_is_locked(n), rlock_hold_count(n)
  FROM unnest(ARRAY['multi.a', 'multi.b', 'multi.c']) AS n ORDER BY n;
-- a member is released on its own like any exclusive lock
SELECT rlock_release('multi.a');
SELECT rlock_is_locked('multi.a'), rlock_hold_count('multi.a');
-- a name not held: WARNING and false, but the held ones are still released
SELECT rlock_multi_release(ARRAY['multi.a', 'multi.b', 'multi.c']);
SELECT n, rlock_is_locked(n), rlock_hold_count(n)
  FROM unnest(ARRAY['multi.a', 'multi.b', 'multi.c']) AS n ORDER BY n;
SELECT rlock_multi_release(ARRAY['multi.c', 'multi.never']);
SELECT count(*) FROM rlock_locks WHERE pid = pg_backend_pid() AND name LIKE 'multi.%';

-- names are de-duplicated, in acquisition and in release
SELECT rlock_multi_acquire(ARRAY['multi.d', 'multi.d', 'multi.e', 'multi.d'], '1 minute');
SELECT rlock_hold_count('multi.d'), rlock_hold_count('multi.e');
SELECT rlock_multi_try_acquire(ARRAY['multi.d', 'multi.d'], '1 minute');
SELECT rlock_hold_count('multi.d'), rlock_hold_count('multi.e');
SELECT rlock_multi_release(ARRAY['multi.d', 'multi.e', 'multi.e', 'multi.d']);
SELECT rlock_hold_count('multi.d'), rlock_hold_count('multi.e'), rlock_is_locked('multi.e');
SELECT rlock_multi_release(ARRAY['multi.d', 'multi.d']);
SELECT rlock_is_locked('multi.d');
-- de-duplicated before counting: 1000 copies of one name are one name
SELECT rlock_multi_try_acquire(array_fill('multi.same'::text, ARRAY[1000]), '1 minute');
SELECT rlock_hold_count('multi.same');
SELECT rlock_multi_release(array_fill('multi.same'::text, ARRAY[1000]));
SELECT rlock_is_locked('multi.same');

-- all or nothing: one member held by another holder, none is taken
SELECT rlock_acquire('multi.b', lease => '1 min', owner => 'other-job');
SELECT rlock_multi_try_acquire(ARRAY['multi.a', 'multi.b', 'multi.c'], '1 minute') AS got_all;
SELECT n, rlock_is_locked(n), rlock_is_held(n), rlock_hold_count(n)
  FROM unnest(ARRAY['multi.a', 'multi.b', 'multi.c']) AS n ORDER BY n;
SELECT count(*) FROM rlock_status('multi.a');
SELECT count(*) FROM rlock_status('multi.c');
SELECT kind, holder, hold_count FROM rlock_status('multi.b');
-- whatever the position of the busy member
SELECT rlock_multi_try_acquire(ARRAY['multi.b', 'multi.a', 'multi.c'], '1 minute') AS busy_first,
       rlock_multi_try_acquire(ARRAY['multi.a', 'multi.c', 'multi.b'], '1 minute') AS busy_last;
SELECT rlock_is_locked('multi.a'), rlock_is_locked('multi.c');
-- transaction-level, and with a NULL lease (watchdog mode)
BEGIN;
SELECT rlock_multi_xact_try_acquire(ARRAY['multi.a', 'multi.b', 'multi.c'], '1 minute') AS xact_got_all;
SELECT rlock_multi_try_acquire(ARRAY['multi.a', 'multi.b', 'multi.c']) AS watchdog_got_all;
SELECT rlock_is_locked('multi.a'), rlock_is_locked('multi.c');
COMMIT;
-- a timed try gives up at the end of its wait, holding nothing
SELECT rlock_multi_try_acquire(ARRAY['multi.a', 'multi.b', 'multi.c'], '1 minute', '200ms') AS waited;
SELECT rlock_is_locked('multi.a'), rlock_is_locked('multi.c');
-- a blocking multi acquire honours lock_timeout (55P03) and holds nothing
SET lock_timeout = '200ms';
SELECT rlock_multi_acquire(ARRAY['multi.a', 'multi.b', 'multi.c'], '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_multi_xact_acquire(ARRAY['multi.c', 'multi.b', 'multi.a'], '1 minute');
\echo :LAST_ERROR_SQLSTATE
RESET lock_timeout;
SELECT rlock_is_locked('multi.a'), rlock_is_locked('multi.c');
SELECT count(*) FROM rlock_locks WHERE pid = pg_backend_pid() AND name LIKE 'multi.%';
-- a member this session already holds keeps its count when the set fails
SELECT rlock_acquire('multi.a', '1 minute');
SELECT rlock_multi_try_acquire(ARRAY['multi.a', 'multi.b', 'multi.c'], '1 minute') AS got_all;
SELECT rlock_hold_count('multi.a'), rlock_is_locked('multi.c');
SELECT kind, holder = rlock_holder_id() AS mine, hold_count FROM rlock_status('multi.a');
-- once the other holder is gone, the set is taken
SELECT rlock_release('multi.b', owner => 'other-job');
SELECT rlock_multi_try_acquire(ARRAY['multi.a', 'multi.b', 'multi.c'], '1 minute') AS got_all;
SELECT n, rlock_is_held(n), rlock_hold_count(n)
  FROM unnest(ARRAY['multi.a', 'multi.b', 'multi.c']) AS n ORDER BY n;
-- and another holder is excluded from every member
SELECT rlock_try_acquire('multi.c', '1 minute', owner => 'other-job') AS other_got_c;
SELECT rlock_release('multi.a');
SELECT rlock_multi_release(ARRAY['multi.a', 'multi.b', 'multi.c']);
SELECT n, rlock_is_locked(n) FROM unnest(ARRAY['multi.a', 'multi.b', 'multi.c']) AS n ORDER BY n;

-- a NULL lease is the watchdog's (rlock.watchdog_timeout, 2s in the tests)
SELECT rlock_multi_acquire(ARRAY['multi.w1', 'multi.w2']);
SELECT n, rlock_remaining_lease(n) BETWEEN '1 millisecond' AND '2 seconds' AS watchdog_lease
  FROM unnest(ARRAY['multi.w1', 'multi.w2']) AS n ORDER BY n;
SELECT rlock_multi_release(ARRAY['multi.w1', 'multi.w2']);

-- session locks survive ROLLBACK; transaction locks go at ROLLBACK
BEGIN;
SELECT rlock_multi_acquire(ARRAY['multi.s1', 'multi.s2'], '1 minute');
SELECT rlock_multi_xact_acquire(ARRAY['multi.x1', 'multi.x2'], '1 minute');
SELECT rlock_multi_xact_try_acquire(ARRAY['multi.x2', 'multi.x3'], '1 minute');
SELECT n, rlock_is_held(n), rlock_hold_count(n)
  FROM unnest(ARRAY['multi.s1', 'multi.s2', 'multi.x1', 'multi.x2', 'multi.x3']) AS n ORDER BY n;
SELECT name, kind, scope, hold_count FROM rlock_locks
 WHERE pid = pg_backend_pid() AND name LIKE 'multi.%' ORDER BY name, scope;
-- transaction-level holds cannot be released by hand
SELECT rlock_multi_release(ARRAY['multi.x1', 'multi.x3']);
SELECT rlock_hold_count('multi.x1'), rlock_hold_count('multi.x3');
ROLLBACK;
SELECT n, rlock_is_locked(n), rlock_hold_count(n)
  FROM unnest(ARRAY['multi.s1', 'multi.s2', 'multi.x1', 'multi.x2', 'multi.x3']) AS n ORDER BY n;

-- transaction locks go at COMMIT, not before; session and transaction
-- holds of one name stack
BEGIN;
SELECT rlock_multi_xact_acquire(ARRAY['multi.x1', 'multi.s1'], '1 minute');
SELECT rlock_hold_count('multi.x1'), rlock_hold_count('multi.s1');
SELECT name, scope, hold_count FROM rlock_locks
 WHERE pid = pg_backend_pid() AND name LIKE 'multi.%' ORDER BY name, scope;
-- the release takes the session level of s1; x1 (transaction only) stays
SELECT rlock_multi_release(ARRAY['multi.s1', 'multi.x1']);
SELECT rlock_hold_count('multi.x1'), rlock_hold_count('multi.s1'), rlock_is_held('multi.s1');
SELECT name, scope, hold_count FROM rlock_locks
 WHERE pid = pg_backend_pid() AND name LIKE 'multi.%' ORDER BY name, scope;
COMMIT;
SELECT n, rlock_is_locked(n), rlock_hold_count(n)
  FROM unnest(ARRAY['multi.s1', 'multi.s2', 'multi.x1']) AS n ORDER BY n;
SELECT rlock_multi_release(ARRAY['multi.s2']);
SELECT count(*) FROM rlock_locks WHERE pid = pg_backend_pid() AND name LIKE 'multi.%';

-- ROLLBACK TO SAVEPOINT releases the transaction locks taken after it only
BEGIN;
SELECT rlock_multi_xact_acquire(ARRAY['multi.p1', 'multi.p2'], '1 minute');
SAVEPOINT sp1;
SELECT rlock_multi_xact_acquire(ARRAY['multi.p2', 'multi.p3'], '1 minute');
SAVEPOINT sp2;
SELECT rlock_multi_xact_try_acquire(ARRAY['multi.p4', 'multi.p1'], '1 minute');
RELEASE SAVEPOINT sp2;
-- session locks taken inside the savepoint stay
SELECT rlock_multi_acquire(ARRAY['multi.p5', 'multi.p6'], '1 minute');
SELECT n, rlock_hold_count(n)
  FROM unnest(ARRAY['multi.p1', 'multi.p2', 'multi.p3', 'multi.p4', 'multi.p5', 'multi.p6']) AS n ORDER BY n;
ROLLBACK TO SAVEPOINT sp1;
SELECT n, rlock_is_locked(n), rlock_hold_count(n)
  FROM unnest(ARRAY['multi.p1', 'multi.p2', 'multi.p3', 'multi.p4', 'multi.p5', 'multi.p6']) AS n ORDER BY n;
COMMIT;
SELECT n, rlock_is_locked(n), rlock_hold_count(n)
  FROM unnest(ARRAY['multi.p1', 'multi.p2', 'multi.p3', 'multi.p4', 'multi.p5', 'multi.p6']) AS n ORDER BY n;
SELECT rlock_multi_release(ARRAY['multi.p5', 'multi.p6']);

-- a failed statement inside a subtransaction releases its transaction locks
BEGIN;
SAVEPOINT sp;
SELECT rlock_multi_xact_acquire(ARRAY['multi.f1', 'multi.f2'], '1 minute');
SELECT 1/0;
ROLLBACK TO SAVEPOINT sp;
SELECT rlock_is_locked('multi.f1'), rlock_is_locked('multi.f2');
COMMIT;

-- rlock_release_all covers members taken by a multi acquisition
SELECT rlock_multi_acquire(ARRAY['multi.r1', 'multi.r2'], '1 minute');
SELECT rlock_multi_acquire(ARRAY['multi.r1', 'multi.r3'], '1 minute');
SELECT rlock_release_all();
SELECT n, rlock_is_locked(n) FROM unnest(ARRAY['multi.r1', 'multi.r2', 'multi.r3']) AS n ORDER BY n;

-- at most 1000 names (before de-duplication)
SELECT rlock_multi_try_acquire(ARRAY(SELECT 'multi.m' || i FROM generate_series(1, 1000) AS i), '1 minute');
SELECT count(*), sum(hold_count), min(kind), max(kind) FROM rlock_locks
 WHERE pid = pg_backend_pid() AND name LIKE 'multi.m%';
SELECT rlock_multi_release(ARRAY(SELECT 'multi.m' || i FROM generate_series(1, 1000) AS i));
SELECT count(*) FROM rlock_locks WHERE pid = pg_backend_pid() AND name LIKE 'multi.m%';
SELECT rlock_is_locked('multi.m1'), rlock_is_locked('multi.m1000');
SELECT rlock_multi_acquire(ARRAY(SELECT 'multi.m' || i FROM generate_series(1, 1001) AS i), '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_multi_try_acquire(array_fill('multi.same'::text, ARRAY[1001]), '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_multi_xact_try_acquire(ARRAY(SELECT 'multi.m' || (i % 10) FROM generate_series(1, 1001) AS i), '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_is_locked('multi.m1'), rlock_is_locked('multi.same');

-- bad input: NULL array or element, empty array
SELECT rlock_multi_acquire(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_multi_try_acquire(NULL, '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_multi_xact_acquire(ARRAY['multi.n1', NULL], '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_multi_xact_try_acquire(ARRAY[NULL, 'multi.n1']::text[], '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_multi_release(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_multi_release(ARRAY['multi.n1', NULL]);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_multi_acquire('{}', '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_multi_try_acquire(ARRAY[]::text[], '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_multi_xact_try_acquire('{}');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_multi_release('{}');
\echo :LAST_ERROR_SQLSTATE
-- a two-dimensional array is not a set of names
SELECT rlock_multi_try_acquire(ARRAY[['multi.d1', 'multi.d2'], ['multi.d3', 'multi.d4']], '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_multi_release('{{multi.d1},{multi.d2}}');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_is_locked('multi.d1');
SELECT rlock_is_locked('multi.n1');
-- invalid names: the errors of rlock_acquire
SELECT rlock_multi_acquire(ARRAY['multi.n1', ''], '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_multi_try_acquire(ARRAY['multi.n1', repeat('n', 1025)], '1 minute');
\echo :LAST_ERROR_SQLSTATE
SET rlock.key_prefix = 'pfx:';
SELECT rlock_multi_xact_try_acquire(ARRAY['multi.n1', repeat('n', 1021)], '1 minute');
\echo :LAST_ERROR_SQLSTATE
RESET rlock.key_prefix;
SELECT rlock_multi_release(ARRAY['multi.n1', '']);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_is_locked('multi.n1');
-- a name of 1024 bytes is fine
SELECT rlock_multi_try_acquire(ARRAY['multi.n1', repeat('n', 1024)], '1 minute'),
       rlock_multi_release(ARRAY['multi.n1', repeat('n', 1024)]);
-- leases: zero, negative, absurd
SELECT rlock_multi_acquire(ARRAY['multi.l'], '0');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_multi_try_acquire(ARRAY['multi.l'], '-5 seconds');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_multi_xact_acquire(ARRAY['multi.l'], '366 days');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_multi_xact_try_acquire(ARRAY['multi.l'], '1000 years');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_is_locked('multi.l');
-- waits: negative, absurd, NULL
SELECT rlock_multi_try_acquire(ARRAY['multi.w'], '1 minute', '-1 second');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_multi_xact_try_acquire(ARRAY['multi.w'], '1 minute', '400 days');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_multi_try_acquire(ARRAY['multi.w'], '1 minute', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_is_locked('multi.w');

-- a member that is another kind of lock is an ERROR, and nothing is taken
SELECT rlock_read_acquire('multi.rw', '1 minute');
SELECT rlock_multi_try_acquire(ARRAY['multi.k1', 'multi.rw', 'multi.k2'], '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_multi_acquire(ARRAY['multi.k2', 'multi.k1', 'multi.rw'], '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_is_locked('multi.k1'), rlock_is_locked('multi.k2'), rlock_hold_count('multi.rw');
SELECT kind, hold_count FROM rlock_status('multi.rw');
SELECT rlock_multi_release(ARRAY['multi.rw']);
\echo :LAST_ERROR_SQLSTATE
-- a release refused for one member releases none
SELECT rlock_acquire('multi.k1', '1 minute');
SELECT rlock_multi_release(ARRAY['multi.k1', 'multi.rw']);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_is_locked('multi.k1'), rlock_hold_count('multi.k1');
SELECT rlock_release('multi.k1');
SELECT rlock_read_release('multi.rw'), rlock_is_locked('multi.rw');
-- the same when another holder has the read/write lock
SELECT rlock_read_acquire('multi.rw', '1 minute', owner => 'other-job');
SELECT rlock_multi_try_acquire(ARRAY['multi.k1', 'multi.rw', 'multi.k2'], '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_multi_xact_try_acquire(ARRAY['multi.k1', 'multi.k2', 'multi.rw'], '1 minute', '100ms');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_is_locked('multi.k1'), rlock_is_locked('multi.k2');
SELECT rlock_read_release('multi.rw', owner => 'other-job'), rlock_is_locked('multi.rw');
-- a member whose Redis key is not a lock: the same
SELECT current_setting('rlock.redis_url') AS redis_url \gset
\setenv RLOCK_REDIS_URL :redis_url
\! redis-cli -u "$RLOCK_REDIS_URL" SET multi.str 'not a lock'
SELECT rlock_multi_try_acquire(ARRAY['multi.k1', 'multi.str'], '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_is_locked('multi.k1'), rlock_hold_count('multi.k1');
\! redis-cli -u "$RLOCK_REDIS_URL" GET multi.str
\! redis-cli -u "$RLOCK_REDIS_URL" DEL multi.str

-- the session is still fine and holds nothing
SELECT count(*) FROM rlock_locks WHERE pid = pg_backend_pid() AND name LIKE 'multi.%';
SELECT rlock_release_all();
