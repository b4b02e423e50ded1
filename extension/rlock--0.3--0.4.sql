/* rlock--0.3--0.4.sql: from rlock 0.3 to 0.4 (ALTER EXTENSION rlock UPDATE) */
--
-- What 0.4 changes in the SQL surface, applied to an installed 0.3; the
-- result is the catalog rlock--0.4.sql makes (test/t/048_upgrade.pl).

\echo Use "ALTER EXTENSION rlock UPDATE TO '0.4'" to load this file. \quit

-- ---- 0.4, a lost lock fails the job, naming the lock (SPEC 6, "a loss
-- the caller can act on"): a batch job checks its lock before it commits,
-- so that a scheduler that keeps no WARNING (pg_cron) records the failure.
-- It reads only the caller's own holds: PUBLIC may execute it. ----
CREATE FUNCTION rlock_assert_held(name text)
RETURNS void
AS 'MODULE_PATHNAME', 'rlock_assert_held'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
GRANT EXECUTE ON FUNCTION rlock_assert_held(text) TO PUBLIC;
COMMENT ON FUNCTION rlock_assert_held(text) IS
  'ERROR (SQLSTATE 40000, naming the lock) unless this session still holds the name, as every kind it holds it as, and Redis agrees (one round trip). A batch job calls it before it commits, so that a lock lost mid-run fails the job.';
