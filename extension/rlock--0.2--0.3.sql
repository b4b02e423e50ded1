/* rlock--0.2--0.3.sql: from rlock 0.2 to 0.3 (ALTER EXTENSION rlock UPDATE) */
--
-- What 0.3 changes in the SQL surface, applied to an installed 0.2; the
-- result is the catalog rlock--0.3.sql makes (test/t/048_upgrade.pl).

\echo Use "ALTER EXTENSION rlock UPDATE TO '0.3'" to load this file. \quit

-- ---- 0.3, issue 40 (SPEC 5.5 "Only their own kind", SPEC 8): sizing a
-- semaphore is not PUBLIC's, nor is adopting a latch that rlock did not
-- set (a Redisson client's count, or what may be an application's
-- counter).  A role with EXECUTE on rlock_latch_adopt counts such a latch
-- down (adopting it); one with EXECUTE on rlock_semaphore_add_permits
-- takes permits of such a semaphore (adopting it). ----
REVOKE ALL ON FUNCTION rlock_semaphore_set_permits(text, integer) FROM PUBLIC;

-- mark the count a Redisson client set at a latch's name as rlock's
-- latch; false when the latch is absent
CREATE FUNCTION rlock_latch_adopt(name text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'rlock_latch_adopt'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION rlock_latch_adopt(text) FROM PUBLIC;
COMMENT ON FUNCTION rlock_latch_adopt(text) IS
  'Marks the count at a latch''s name that rlock did not set (a Redisson client''s, say) as an rlock latch, so roles without this grant may count it down; false when absent. Not granted to PUBLIC.';

-- ---- issue 40, review finding 13 ----------------------------------------
-- rlock_locks may do Redis I/O (its node column may ask Sentinel where the
-- master is) over this backend's connections: not in a parallel worker.
ALTER FUNCTION rlock_locks() PARALLEL RESTRICTED;
