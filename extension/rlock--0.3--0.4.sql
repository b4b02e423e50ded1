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
-- ---- 0.4, latches and semaphores: absent is not done; lifecycle (SPEC
-- 5.5).  rlock_latch_await takes must_exist (an absent latch is an ERROR,
-- 55000, instead of an immediate true) and rlock_latch_set_count an expiry
-- after which an unfinished latch disappears: new signatures, so new C
-- symbols (0.3's stay for 0.3 catalogs).  Deleting a latch or a semaphore
-- (only one rlock set: an application's key is refused) is not PUBLIC's. ----
DROP FUNCTION rlock_latch_await(text, interval);
CREATE FUNCTION rlock_latch_await(name text, wait interval DEFAULT NULL,
                                  must_exist boolean DEFAULT false)
RETURNS boolean
AS 'MODULE_PATHNAME', 'rlock_latch_await_0_4'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION rlock_latch_await(text, interval, boolean) IS
  'Waits until the latch reaches zero: true then, false when the wait ran out (NULL: no limit, lock_timeout applies). An absent latch counts as zero unless must_exist, which makes it an ERROR (55000).';

DROP FUNCTION rlock_latch_set_count(text, bigint);
CREATE FUNCTION rlock_latch_set_count(name text, count bigint,
                                      expire interval DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'rlock_latch_set_count_0_4'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION rlock_latch_set_count(text, bigint, interval) IS
  'Sets the count of a latch that is absent (trySetCount): true when set, false when it is counting. With expire, the latch disappears after it whether or not it reached zero.';

CREATE FUNCTION rlock_latch_delete(name text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'rlock_latch_delete'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION rlock_latch_delete(text) FROM PUBLIC;
COMMENT ON FUNCTION rlock_latch_delete(text) IS
  'Deletes a latch rlock set (its waiters wake); false when absent. A count rlock did not set (an application''s key) is refused, never deleted. Not granted to PUBLIC.';

CREATE FUNCTION rlock_semaphore_delete(name text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'rlock_semaphore_delete'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION rlock_semaphore_delete(text) FROM PUBLIC;
COMMENT ON FUNCTION rlock_semaphore_delete(text) IS
  'Deletes a semaphore rlock set, with its permits out (their holders report them lost; waiters wake); false when absent. A value rlock did not set (an application''s key) is refused, never deleted. Not granted to PUBLIC.';
-- ---- 0.4, crash clean-up and server announce ----
-- How this server is named on its Redis (rlock.server_name, else
-- cluster_name, else host:port), and the servers announced there.
CREATE FUNCTION rlock_server_name()
RETURNS text
AS 'MODULE_PATHNAME', 'rlock_server_name'
LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION rlock_server_name() IS
  'How this server is named to the others on its Redis: rlock.server_name, else cluster_name, else host:port. Granted to PUBLIC.';

CREATE FUNCTION rlock_servers(OUT uuid text, OUT name text,
                              OUT started timestamptz, OUT previous_uuid text,
                              OUT host text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'rlock_servers'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION rlock_servers() IS
  'The PostgreSQL servers announced on this server''s Redis (their instance UUID, name, start, the UUID of its previous run, host); each vanishes about 15 s after its server is gone. Granted to PUBLIC.';

-- every row of rlock_locks names the server (SPEC 12)
CREATE OR REPLACE VIEW rlock_locks AS
  SELECT l.*, rlock_server_name() AS server FROM rlock_locks() l;

-- ---- 0.4, deadlocks and waits (SPEC 5.6) ----
-- Every session waiting for an rlock lock on any server sharing this
-- server's Redis, with the holders that block it.
CREATE FUNCTION rlock_waits(OUT server text, OUT pid integer,
                            OUT database text, OUT name text, OUT kind text,
                            OUT waiting_since timestamptz, OUT holder text,
                            OUT blocking_servers text[],
                            OUT blocking_pids integer[],
                            OUT blocking_holders text[])
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'rlock_waits'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION rlock_waits() IS
  'Every session waiting for an rlock lock, semaphore or latch on any server sharing this server''s Redis, with the holders that block it (an owner token is masked). Granted to PUBLIC.';

CREATE VIEW rlock_waits AS SELECT * FROM rlock_waits();
GRANT SELECT ON rlock_waits TO PUBLIC;
COMMENT ON VIEW rlock_waits IS
  'One row per session waiting for an rlock lock, semaphore or latch, on any server sharing this server''s Redis: its server, pid, database, lock, kind, since when, and the holders that block it (server, pid, holder id; an owner token is masked).';

CREATE FUNCTION rlock_blocking_pids(pid integer)
RETURNS integer[]
AS 'MODULE_PATHNAME', 'rlock_blocking_pids'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION rlock_blocking_pids(integer) IS
  'Like pg_blocking_pids: the sessions of this server that block the session pid, through rlock locks or PostgreSQL''s locks. Granted to PUBLIC.';

-- ---- 0.4, events ----
-- The recent events of this server, kept in shared memory (SPEC 12):
-- locks lost, renewals failing and recovering, force releases,
-- deadlocks, stranded releases, reconnects, crash clean-ups, outages
-- ridden out; each was also a line of the server log.
CREATE FUNCTION rlock_events(OUT seq bigint, OUT at timestamptz,
                             OUT pid integer, OUT database name,
                             OUT event text, OUT lock text, OUT kind text,
                             OUT holder text, OUT detail text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'rlock_events'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION rlock_events() IS
  'The recent events of this server (the newest rlock.events_max, oldest first): locks lost, renewals failing and recovering, force releases, deadlocks, stranded releases, reconnects, crash clean-ups, outages ridden out; an owner token is masked. Granted to PUBLIC.';

CREATE VIEW rlock_events AS SELECT * FROM rlock_events();
GRANT SELECT ON rlock_events TO PUBLIC;
COMMENT ON VIEW rlock_events IS
  'One row per recent event of this server, newest last: its sequence number, time, pid, database, event, lock, kind, holder (an owner token is masked) and what the server log said.';
