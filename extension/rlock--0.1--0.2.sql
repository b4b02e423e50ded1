/* rlock--0.1--0.2.sql: from rlock 0.1 to 0.2 (ALTER EXTENSION rlock UPDATE) */
--
-- 0.2 adds semaphores, count-down latches and rlock_version(), and a column
-- to rlock_stats (open_connections).  What this script leaves is what
-- rlock--0.2.sql creates, but for the rlock_stats view, which is kept (its
-- privileges, the views on it) and so has open_connections last:
-- test/t/048_upgrade.pl compares the two catalogs, object by object
-- (definitions, privileges, comments).
--
-- Versions rule: a released script is never edited; a change to the SQL
-- surface is a new version with its own upgrade script (see rlock--0.2.sql).
--
-- The 0.2 library still serves a 0.1 catalog (its rlock_stats keeps the C
-- symbol rlock_stats with 0.1's columns; 0.2's is rlock_stats_0_2), so a
-- server restarted on the new library works before this script has run.
-- Run it after that restart: the 0.1 library, still loaded before it, has
-- none of the new functions, and the update would fail (and change nothing).

\echo Use "ALTER EXTENSION rlock UPDATE TO '0.2'" to load this file. \quit

-- Semaphore (Redisson RPermitExpirableSemaphore): at most N holders of
-- permits at once.  The permits a session takes are held like locks: in
-- session or transaction scope, renewed while their lease is NULL, given
-- back at the end of their scope, listed in rlock_locks (kind semaphore).
CREATE FUNCTION rlock_semaphore_set_permits(name text, permits integer)
RETURNS boolean
AS 'MODULE_PATHNAME', 'rlock_semaphore_set_permits'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_semaphore_add_permits(name text, permits integer)
RETURNS void
AS 'MODULE_PATHNAME', 'rlock_semaphore_add_permits'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
-- adding permits frees room others' permits take: a semaphore's owner's
-- call, as rlock_force_release is a lock's (SPEC 8); not for PUBLIC
REVOKE ALL ON FUNCTION rlock_semaphore_add_permits(text, integer) FROM PUBLIC;

CREATE FUNCTION rlock_semaphore_acquire(name text, permits integer DEFAULT 1,
                                        lease interval DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'rlock_semaphore_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_semaphore_try_acquire(name text, permits integer DEFAULT 1,
                                            lease interval DEFAULT NULL,
                                            wait interval DEFAULT '0')
RETURNS boolean
AS 'MODULE_PATHNAME', 'rlock_semaphore_try_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_semaphore_xact_acquire(name text, permits integer DEFAULT 1,
                                             lease interval DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'rlock_semaphore_xact_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_semaphore_xact_try_acquire(name text, permits integer DEFAULT 1,
                                                 lease interval DEFAULT NULL,
                                                 wait interval DEFAULT '0')
RETURNS boolean
AS 'MODULE_PATHNAME', 'rlock_semaphore_xact_try_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_semaphore_release(name text, permits integer DEFAULT 1)
RETURNS boolean
AS 'MODULE_PATHNAME', 'rlock_semaphore_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_semaphore_available(name text)
RETURNS integer
AS 'MODULE_PATHNAME', 'rlock_semaphore_available'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Count-down latch (Redisson RCountDownLatch): jobs anywhere count it down;
-- awaiting it returns once it reaches zero.  set_count sets a count only on
-- a latch at zero (or absent); count_down returns the count after it (never
-- below zero).
CREATE FUNCTION rlock_latch_set_count(name text, count bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'rlock_latch_set_count'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_latch_count_down(name text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'rlock_latch_count_down'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_latch_count(name text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'rlock_latch_count'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- true when the latch reached zero; false when the wait ran out.  A NULL
-- wait waits without limit (lock_timeout applies, as for rlock_acquire).
CREATE FUNCTION rlock_latch_await(name text, wait interval DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'rlock_latch_await'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_version()
RETURNS text
AS 'MODULE_PATHNAME', 'rlock_version'
LANGUAGE C STABLE PARALLEL SAFE;

-- rlock_stats gains a column.  The view is kept, so that what was granted or
-- revoked on it and the views built on it survive the update: the old
-- function steps aside (a function's result columns cannot be altered), the
-- new one takes its name, the view is replaced with the new column appended
-- (CREATE OR REPLACE VIEW adds columns only at the end: open_connections
-- comes after stats_reset here, before it in a fresh install), and the old
-- function goes.
ALTER FUNCTION rlock_stats() RENAME TO rlock_stats_0_1;

-- Cumulative activity counters of this server (stats.c), and the Redis
-- connections open now (a gauge), one row.
CREATE FUNCTION rlock_stats(OUT acquisitions bigint,
                            OUT contended_acquisitions bigint,
                            OUT failed_acquisitions bigint,
                            OUT wait_time double precision,
                            OUT releases bigint,
                            OUT renewals bigint,
                            OUT renewal_batches bigint,
                            OUT renewal_cycles bigint,
                            OUT renewal_time double precision,
                            OUT renewal_failures bigint,
                            OUT locks_lost bigint,
                            OUT redis_round_trips bigint,
                            OUT reconnects bigint,
                            OUT redis_errors bigint,
                            OUT failovers bigint,
                            OUT replica_ack_refusals bigint,
                            OUT renewal_round_trips bigint,
                            OUT redirections bigint,
                            OUT open_connections bigint,
                            OUT stats_reset timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'rlock_stats_0_2'
LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE OR REPLACE VIEW rlock_stats AS
  SELECT acquisitions, contended_acquisitions, failed_acquisitions, wait_time,
         releases, renewals, renewal_batches, renewal_cycles, renewal_time,
         renewal_failures, locks_lost, redis_round_trips, reconnects,
         redis_errors, failovers, replica_ack_refusals, renewal_round_trips,
         redirections, stats_reset, open_connections
    FROM rlock_stats();

DROP FUNCTION rlock_stats_0_1();
