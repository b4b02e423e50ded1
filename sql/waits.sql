-- rlock_waits, rlock_blocking_pids and rlock.deadlock_timeout (SPEC.md
-- section 5.6) as one session sees them: the shape of the view and the
-- function, empty answers while no one waits, and what a plain role may
-- do.  A deadlock needs two sessions: its error and DETAIL are checked by
-- the isolation spec deadlock and by TAP 065.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS rlock;
DROP ROLE IF EXISTS rlock_waits_plain;
RESET client_min_messages;
\set SHOW_CONTEXT never

-- ---- the view's columns, in order, and the function's signature ----
SELECT column_name, data_type, udt_name
  FROM information_schema.columns
 WHERE table_schema = current_schema() AND table_name = 'rlock_waits'
 ORDER BY ordinal_position;
SELECT p.oid::regprocedure AS function,
       pg_get_function_result(p.oid) AS result,
       p.proisstrict AS strict, p.provolatile AS volatility
  FROM pg_proc p
 WHERE p.proname IN ('rlock_waits', 'rlock_blocking_pids')
 ORDER BY 1::text;

-- ---- nobody waits: no rows, no blockers ----
SELECT count(*) AS waits FROM rlock_waits;
SELECT rlock_blocking_pids(pg_backend_pid()) AS mine;
-- a pid that is no session of this server is blocked by no one
SELECT rlock_blocking_pids(0) AS nobody;
-- STRICT: a NULL pid gives NULL
SELECT rlock_blocking_pids(NULL) IS NULL AS null_gives_null;
-- a lock held (by this very session) is not a wait
SELECT rlock_acquire('wt_held', '1 minute');
SELECT count(*) AS waits FROM rlock_waits;
SELECT rlock_blocking_pids(pg_backend_pid()) AS mine;
SELECT rlock_release('wt_held');

-- ---- rlock.deadlock_timeout: -1 (PostgreSQL's deadlock_timeout) by
-- default; a superuser sets it, 0 turns the checks off ----
SHOW rlock.deadlock_timeout;
SET rlock.deadlock_timeout = '2s';
SHOW rlock.deadlock_timeout;
SET rlock.deadlock_timeout = 0;
SHOW rlock.deadlock_timeout;
-- (the message's range names its unit from PostgreSQL 17: only the SQLSTATE)
\set VERBOSITY sqlstate
SET rlock.deadlock_timeout = -2;
\set VERBOSITY default
\echo :LAST_ERROR_SQLSTATE
RESET rlock.deadlock_timeout;
SHOW rlock.deadlock_timeout;

-- ---- a plain role: sees the waits and the blockers, cannot set the
-- timeout ----
CREATE ROLE rlock_waits_plain;
SELECT has_table_privilege('rlock_waits_plain', 'rlock_waits', 'SELECT') AS view,
       has_function_privilege('rlock_waits_plain', 'rlock_waits()', 'EXECUTE') AS waits,
       has_function_privilege('rlock_waits_plain', 'rlock_blocking_pids(integer)', 'EXECUTE') AS blocking_pids;
SET ROLE rlock_waits_plain;
SELECT count(*) AS waits FROM rlock_waits;
SELECT rlock_blocking_pids(pg_backend_pid()) AS mine;
SHOW rlock.deadlock_timeout;
SET rlock.deadlock_timeout = '5s';
\echo :LAST_ERROR_SQLSTATE
SET rlock.deadlock_timeout = 0;
\echo :LAST_ERROR_SQLSTATE
SHOW rlock.deadlock_timeout;
RESET ROLE;
DROP ROLE rlock_waits_plain;
