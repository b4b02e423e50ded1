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
-- ---- 0.4, stats histograms (SPEC 12) ----
-- The wait and hold times of this server's lock calls, per lock kind, as
-- cumulative buckets (Prometheus's "le"): a fixed set of rows, never one
-- per lock name.  Saved, loaded and reset with rlock_stats.
CREATE FUNCTION rlock_stats_histograms(OUT kind text, OUT measure text,
                                       OUT le double precision,
                                       OUT count bigint,
                                       OUT sum double precision)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'rlock_stats_histograms'
LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION rlock_stats_histograms() IS
  'Wait and hold times of this server''s lock calls per lock kind: one row per kind, measure (wait or hold) and bucket; count is the observations of at most le seconds (cumulative; le = Infinity: all), sum their total seconds. Granted to PUBLIC.';

CREATE VIEW rlock_stats_histograms AS SELECT * FROM rlock_stats_histograms();
GRANT SELECT ON rlock_stats_histograms TO PUBLIC;
COMMENT ON VIEW rlock_stats_histograms IS
  'Histograms of wait time (every acquisition call, from its start to granted, refused, timed out or failed) and hold time (first hold granted to released or found lost) per lock kind, in cumulative buckets of le seconds; survives a clean restart, reset by rlock_stats_reset().';

-- ---- 0.4, comments (SPEC 12: every function and view has a COMMENT, so
-- that \df+ and \dv+ explain it).  The same block ends rlock--0.4.sql and
-- rlock--0.3--0.4.sql, so a fresh install and an updated one describe their
-- objects alike (test/t/048_upgrade.pl compares them; regress comments
-- lists any member left without one).  The functions commented where they
-- are created (rlock_latch_await, rlock_assert_held, rlock_waits...) are not
-- repeated here. ----

-- exclusive reentrant lock (SPEC 5.1)
COMMENT ON FUNCTION rlock_acquire(text, interval, text) IS
  'Acquires the exclusive reentrant lock name for this session (or for owner, with a finite lease), waiting for it as long as lock_timeout allows; a NULL lease is renewed while the session lives.';
COMMENT ON FUNCTION rlock_try_acquire(text, interval, interval, text) IS
  'Tries to acquire the exclusive reentrant lock name for this session (or for owner), waiting at most wait (0: one attempt); returns whether it was acquired.';
COMMENT ON FUNCTION rlock_release(text, text) IS
  'Releases one level of this session''s (or owner''s) hold of the exclusive or fenced lock name; returns false with a WARNING when it was not held.';
COMMENT ON FUNCTION rlock_xact_acquire(text, interval) IS
  'Acquires the exclusive reentrant lock name until the end of the current transaction, waiting for it as long as lock_timeout allows.';
COMMENT ON FUNCTION rlock_xact_try_acquire(text, interval, interval) IS
  'Tries to acquire the exclusive reentrant lock name until the end of the current transaction, waiting at most wait; returns whether it was acquired.';
COMMENT ON FUNCTION rlock_release_all() IS
  'Releases every session-level lock this session holds, all levels; returns how many names it released.';
COMMENT ON FUNCTION rlock_force_release(text) IS
  'Deletes the lock name whoever holds it and wakes its waiters (Redisson forceUnlock); returns whether a lock was there. Not granted to PUBLIC.';

-- fenced lock (SPEC 5.2)
COMMENT ON FUNCTION rlock_fenced_acquire(text, interval, text) IS
  'Acquires the fenced lock name for this session (or for owner), waiting as long as lock_timeout allows; returns its fencing token, which increases with every acquisition of the name. Released by rlock_release.';
COMMENT ON FUNCTION rlock_fenced_try_acquire(text, interval, interval, text) IS
  'Tries to acquire the fenced lock name for this session (or for owner), waiting at most wait; returns its fencing token, or NULL when not acquired.';
COMMENT ON FUNCTION rlock_fenced_xact_acquire(text, interval) IS
  'Acquires the fenced lock name until the end of the current transaction, waiting as long as lock_timeout allows; returns its fencing token.';
COMMENT ON FUNCTION rlock_fenced_xact_try_acquire(text, interval, interval) IS
  'Tries to acquire the fenced lock name until the end of the current transaction, waiting at most wait; returns its fencing token, or NULL when not acquired.';
COMMENT ON FUNCTION rlock_fenced_token(text) IS
  'Returns the last fencing token handed out for the fenced lock name, or NULL when it was never acquired as one.';

-- read/write lock (SPEC 5.2)
COMMENT ON FUNCTION rlock_read_acquire(text, interval, text) IS
  'Acquires the read side of the read/write lock name for this session (or for owner): shared with other readers, excluded by a writer; waits as long as lock_timeout allows.';
COMMENT ON FUNCTION rlock_read_try_acquire(text, interval, interval, text) IS
  'Tries to acquire the read side of the read/write lock name for this session (or for owner), waiting at most wait; returns whether it was acquired.';
COMMENT ON FUNCTION rlock_read_xact_acquire(text, interval) IS
  'Acquires the read side of the read/write lock name until the end of the current transaction, waiting as long as lock_timeout allows.';
COMMENT ON FUNCTION rlock_read_xact_try_acquire(text, interval, interval) IS
  'Tries to acquire the read side of the read/write lock name until the end of the current transaction, waiting at most wait; returns whether it was acquired.';
COMMENT ON FUNCTION rlock_read_release(text, text) IS
  'Releases one level of this session''s (or owner''s) read hold of the read/write lock name; returns false with a WARNING when it was not held.';
COMMENT ON FUNCTION rlock_write_acquire(text, interval, text) IS
  'Acquires the write side of the read/write lock name for this session (or for owner): excludes readers and writers; a reader asking to write gets an ERROR; waits as long as lock_timeout allows.';
COMMENT ON FUNCTION rlock_write_try_acquire(text, interval, interval, text) IS
  'Tries to acquire the write side of the read/write lock name for this session (or for owner), waiting at most wait; returns whether it was acquired.';
COMMENT ON FUNCTION rlock_write_xact_acquire(text, interval) IS
  'Acquires the write side of the read/write lock name until the end of the current transaction, waiting as long as lock_timeout allows.';
COMMENT ON FUNCTION rlock_write_xact_try_acquire(text, interval, interval) IS
  'Tries to acquire the write side of the read/write lock name until the end of the current transaction, waiting at most wait; returns whether it was acquired.';
COMMENT ON FUNCTION rlock_write_release(text, text) IS
  'Releases one level of this session''s (or owner''s) write hold of the read/write lock name; returns false with a WARNING when it was not held.';

-- fair lock (SPEC 5.2)
COMMENT ON FUNCTION rlock_fair_acquire(text, interval, text) IS
  'Acquires the fair lock name for this session (or for owner), waiters being served in the order they came; waits as long as lock_timeout allows.';
COMMENT ON FUNCTION rlock_fair_try_acquire(text, interval, interval, text) IS
  'Tries to acquire the fair lock name for this session (or for owner), waiting in its queue at most wait; returns whether it was acquired.';
COMMENT ON FUNCTION rlock_fair_xact_acquire(text, interval) IS
  'Acquires the fair lock name until the end of the current transaction, in the order waiters came, waiting as long as lock_timeout allows.';
COMMENT ON FUNCTION rlock_fair_xact_try_acquire(text, interval, interval) IS
  'Tries to acquire the fair lock name until the end of the current transaction, waiting in its queue at most wait; returns whether it was acquired.';
COMMENT ON FUNCTION rlock_fair_release(text, text) IS
  'Releases one level of this session''s (or owner''s) hold of the fair lock name; returns false with a WARNING when it was not held.';

-- multi-lock and Redlock (SPEC 5.3)
COMMENT ON FUNCTION rlock_multi_acquire(text[], interval) IS
  'Acquires every exclusive lock of names for this session, all or none (at most 1000 names, duplicates dropped), waiting as long as lock_timeout allows without holding part of them meanwhile.';
COMMENT ON FUNCTION rlock_multi_try_acquire(text[], interval, interval) IS
  'Tries to acquire every exclusive lock of names for this session, all or none, waiting at most wait; returns whether all were acquired.';
COMMENT ON FUNCTION rlock_multi_xact_acquire(text[], interval) IS
  'Acquires every exclusive lock of names, all or none, until the end of the current transaction, waiting as long as lock_timeout allows.';
COMMENT ON FUNCTION rlock_multi_xact_try_acquire(text[], interval, interval) IS
  'Tries to acquire every exclusive lock of names, all or none, until the end of the current transaction, waiting at most wait; returns whether all were acquired.';
COMMENT ON FUNCTION rlock_multi_release(text[]) IS
  'Releases one level of this session''s hold of each exclusive lock of names; returns true when it held every one of them (false with a WARNING otherwise).';
COMMENT ON FUNCTION rlock_redlock_acquire(text, interval) IS
  'Acquires the Redlock name for this session: the exclusive lock on a majority of the masters of rlock.redlock_urls, asked in parallel; waits as long as lock_timeout allows.';
COMMENT ON FUNCTION rlock_redlock_try_acquire(text, interval, interval) IS
  'Tries to acquire the Redlock name (a majority of the masters of rlock.redlock_urls) for this session, waiting at most wait; returns whether it was acquired.';
COMMENT ON FUNCTION rlock_redlock_xact_acquire(text, interval) IS
  'Acquires the Redlock name (a majority of the masters of rlock.redlock_urls) until the end of the current transaction, waiting as long as lock_timeout allows.';
COMMENT ON FUNCTION rlock_redlock_xact_try_acquire(text, interval, interval) IS
  'Tries to acquire the Redlock name (a majority of the masters of rlock.redlock_urls) until the end of the current transaction, waiting at most wait; returns whether it was acquired.';
COMMENT ON FUNCTION rlock_redlock_release(text) IS
  'Releases one level of this session''s hold of the Redlock name on every master of rlock.redlock_urls; returns false with a WARNING when it was not held.';

-- semaphores (SPEC 5.5)
COMMENT ON FUNCTION rlock_semaphore_set_permits(text, integer) IS
  'Sets the number of permits of the semaphore name when it has none yet (trySetPermits); returns whether it set them. Not granted to PUBLIC.';
COMMENT ON FUNCTION rlock_semaphore_add_permits(text, integer) IS
  'Adds permits (a negative number removes them) to the semaphore name. Not granted to PUBLIC.';
COMMENT ON FUNCTION rlock_semaphore_acquire(text, integer, interval) IS
  'Takes permits of the semaphore name for this session, held like a lock (a NULL lease is renewed while the session lives), waiting as long as lock_timeout allows.';
COMMENT ON FUNCTION rlock_semaphore_try_acquire(text, integer, interval, interval) IS
  'Tries to take permits of the semaphore name for this session, waiting at most wait; returns whether they were taken.';
COMMENT ON FUNCTION rlock_semaphore_xact_acquire(text, integer, interval) IS
  'Takes permits of the semaphore name until the end of the current transaction, waiting as long as lock_timeout allows.';
COMMENT ON FUNCTION rlock_semaphore_xact_try_acquire(text, integer, interval, interval) IS
  'Tries to take permits of the semaphore name until the end of the current transaction, waiting at most wait; returns whether they were taken.';
COMMENT ON FUNCTION rlock_semaphore_release(text, integer) IS
  'Gives back permits of the semaphore name that this session holds; returns false with a WARNING when it does not hold that many.';
COMMENT ON FUNCTION rlock_semaphore_available(text) IS
  'Returns the number of permits of the semaphore name available now.';

-- count-down latches (SPEC 5.5)
COMMENT ON FUNCTION rlock_latch_count_down(text) IS
  'Counts the latch name down by one; returns the count after it (never below zero; 0 with a WARNING when the latch is absent).';
COMMENT ON FUNCTION rlock_latch_count(text) IS
  'Returns the current count of the latch name (0 when it is absent).';

-- introspection (SPEC 5.4, 12)
COMMENT ON FUNCTION rlock_version() IS
  'Returns the version of the rlock library the server runs (pg_extension.extversion is that of the SQL objects of this database).';
COMMENT ON FUNCTION rlock_holder_id() IS
  'Returns this session''s holder identity, <instance uuid>:<backend pid>, as Redis and Redisson clients see it.';
COMMENT ON FUNCTION rlock_is_locked(text) IS
  'Returns whether the lock name is held by anyone, any kind, on any server or client (one round trip to Redis).';
COMMENT ON FUNCTION rlock_is_held(text) IS
  'Returns whether this session (or its transaction) holds the lock name.';
COMMENT ON FUNCTION rlock_hold_count(text) IS
  'Returns how many times this session holds the lock name (its reentrant count; 0 when not held).';
COMMENT ON FUNCTION rlock_remaining_lease(text) IS
  'Returns the time the lock name has left before it expires in Redis, or NULL when it is not locked.';
COMMENT ON FUNCTION rlock_status(text) IS
  'Returns one row per holder of the lock name, as Redis has it: kind, holder (owner tokens masked), hold count and remaining lease.';
COMMENT ON FUNCTION rlock_ping() IS
  'Makes one round trip to the Redis master of rlock.redis_url and returns how long it took; ERROR when it is unreachable.';
COMMENT ON FUNCTION rlock_nodes() IS
  'Returns the Redis master(s) locks live on now, pinged: address, role, connected replicas, round trip (NULLs for one that did not answer).';
COMMENT ON FUNCTION rlock_locks() IS
  'Returns every lock held by a session of this server, from its shared registry; the rlock_locks view shows it with the server''s name.';
COMMENT ON VIEW rlock_locks IS
  'One row per lock held by a session of this server: pid, database, name, kind, scope, holder (owner tokens masked), hold count, lease, acquired, renewed, state (held, lost, stranded), node and server.';
COMMENT ON FUNCTION rlock_stats() IS
  'Returns this server''s cumulative rlock activity counters (acquisitions, waits, renewals, losses, round trips, reconnects...) and the Redis connections open now; the rlock_stats view shows it.';
COMMENT ON VIEW rlock_stats IS
  'One row of this server''s cumulative rlock activity counters (since stats_reset) and the Redis connections open now.';
COMMENT ON FUNCTION rlock_stats_reset() IS
  'Resets this server''s rlock_stats counters to zero and sets stats_reset to now. Not granted to PUBLIC.';
