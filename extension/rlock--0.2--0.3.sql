/* rlock--0.2--0.3.sql: from rlock 0.2 to 0.3 (ALTER EXTENSION rlock UPDATE) */
--
-- What 0.3 changes in the SQL surface, applied to an installed 0.2; the
-- result is the catalog rlock--0.3.sql makes (test/t/048_upgrade.pl).

\echo Use "ALTER EXTENSION rlock UPDATE TO '0.3'" to load this file. \quit

-- ---- issue 40, review finding 13 ----------------------------------------
-- rlock_locks may do Redis I/O (its node column may ask Sentinel where the
-- master is) over this backend's connections: not in a parallel worker.
ALTER FUNCTION rlock_locks() PARALLEL RESTRICTED;
