/* rlock--0.1.sql: SQL surface of rlock (see SPEC.md section 5) */

\echo Use "CREATE EXTENSION rlock" to load this file. \quit

-- Exclusive reentrant lock (Redisson RLock).  The functions are not STRICT
-- so that a NULL argument gets a clear error instead of a silent NULL.
CREATE FUNCTION rlock_acquire(name text, lease interval DEFAULT NULL,
                              owner text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'rlock_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_try_acquire(name text, lease interval DEFAULT NULL,
                                  wait interval DEFAULT '0',
                                  owner text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'rlock_try_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_release(name text, owner text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'rlock_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_xact_acquire(name text, lease interval DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'rlock_xact_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_xact_try_acquire(name text, lease interval DEFAULT NULL,
                                       wait interval DEFAULT '0')
RETURNS boolean
AS 'MODULE_PATHNAME', 'rlock_xact_try_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Fenced lock (Redisson RFencedLock): the exclusive lock, whose every
-- acquisition also returns a fencing token that strictly increases; the try
-- variants return NULL when the lock was not acquired.  Released with
-- rlock_release.
CREATE FUNCTION rlock_fenced_acquire(name text, lease interval DEFAULT NULL,
                                     owner text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'rlock_fenced_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_fenced_try_acquire(name text, lease interval DEFAULT NULL,
                                         wait interval DEFAULT '0',
                                         owner text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'rlock_fenced_try_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_fenced_xact_acquire(name text, lease interval DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'rlock_fenced_xact_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_fenced_xact_try_acquire(name text, lease interval DEFAULT NULL,
                                              wait interval DEFAULT '0')
RETURNS bigint
AS 'MODULE_PATHNAME', 'rlock_fenced_xact_try_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- The last fencing token handed out for the name (NULL: never acquired as a
-- fenced lock).
CREATE FUNCTION rlock_fenced_token(name text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'rlock_fenced_token'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Read/write lock (Redisson RReadWriteLock): many readers or one writer; a
-- writer may also read; a reader asking to write gets an ERROR.
CREATE FUNCTION rlock_read_acquire(name text, lease interval DEFAULT NULL,
                                   owner text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'rlock_read_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_read_try_acquire(name text, lease interval DEFAULT NULL,
                                       wait interval DEFAULT '0',
                                       owner text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'rlock_read_try_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_read_xact_acquire(name text, lease interval DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'rlock_read_xact_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_read_xact_try_acquire(name text, lease interval DEFAULT NULL,
                                            wait interval DEFAULT '0')
RETURNS boolean
AS 'MODULE_PATHNAME', 'rlock_read_xact_try_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_read_release(name text, owner text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'rlock_read_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_write_acquire(name text, lease interval DEFAULT NULL,
                                   owner text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'rlock_write_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_write_try_acquire(name text, lease interval DEFAULT NULL,
                                       wait interval DEFAULT '0',
                                       owner text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'rlock_write_try_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_write_xact_acquire(name text, lease interval DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'rlock_write_xact_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_write_xact_try_acquire(name text, lease interval DEFAULT NULL,
                                            wait interval DEFAULT '0')
RETURNS boolean
AS 'MODULE_PATHNAME', 'rlock_write_xact_try_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_write_release(name text, owner text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'rlock_write_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Fair lock (Redisson fair lock): waiters acquire in the order they came.
CREATE FUNCTION rlock_fair_acquire(name text, lease interval DEFAULT NULL,
                                  owner text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'rlock_fair_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_fair_try_acquire(name text, lease interval DEFAULT NULL,
                                      wait interval DEFAULT '0',
                                      owner text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'rlock_fair_try_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_fair_xact_acquire(name text, lease interval DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'rlock_fair_xact_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_fair_xact_try_acquire(name text, lease interval DEFAULT NULL,
                                           wait interval DEFAULT '0')
RETURNS boolean
AS 'MODULE_PATHNAME', 'rlock_fair_xact_try_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_fair_release(name text, owner text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'rlock_fair_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Several locks and several Redis nodes (SPEC.md 5.3)

CREATE FUNCTION rlock_multi_acquire(names text[], lease interval DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'rlock_multi_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_multi_try_acquire(names text[], lease interval DEFAULT NULL,
                                       wait interval DEFAULT '0')
RETURNS boolean
AS 'MODULE_PATHNAME', 'rlock_multi_try_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_multi_xact_acquire(names text[], lease interval DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'rlock_multi_xact_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_multi_xact_try_acquire(names text[], lease interval DEFAULT NULL,
                                            wait interval DEFAULT '0')
RETURNS boolean
AS 'MODULE_PATHNAME', 'rlock_multi_xact_try_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_multi_release(names text[])
RETURNS boolean
AS 'MODULE_PATHNAME', 'rlock_multi_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_redlock_acquire(name text, lease interval DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'rlock_redlock_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_redlock_try_acquire(name text, lease interval DEFAULT NULL,
                                         wait interval DEFAULT '0')
RETURNS boolean
AS 'MODULE_PATHNAME', 'rlock_redlock_try_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_redlock_xact_acquire(name text, lease interval DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'rlock_redlock_xact_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_redlock_xact_try_acquire(name text, lease interval DEFAULT NULL,
                                              wait interval DEFAULT '0')
RETURNS boolean
AS 'MODULE_PATHNAME', 'rlock_redlock_xact_try_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_redlock_release(name text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'rlock_redlock_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_release_all()
RETURNS integer
AS 'MODULE_PATHNAME', 'rlock_release_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_force_release(name text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'rlock_force_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

REVOKE ALL ON FUNCTION rlock_force_release(text) FROM PUBLIC;

-- Introspection.
CREATE FUNCTION rlock_holder_id()
RETURNS text
AS 'MODULE_PATHNAME', 'rlock_holder_id'
LANGUAGE C STABLE PARALLEL UNSAFE;

CREATE FUNCTION rlock_is_locked(name text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'rlock_is_locked'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_is_held(name text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'rlock_is_held'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_hold_count(name text)
RETURNS integer
AS 'MODULE_PATHNAME', 'rlock_hold_count'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_remaining_lease(name text)
RETURNS interval
AS 'MODULE_PATHNAME', 'rlock_remaining_lease'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_status(name text,
                             OUT kind text, OUT holder text,
                             OUT hold_count integer,
                             OUT remaining_lease interval)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'rlock_status'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION rlock_ping()
RETURNS interval
AS 'MODULE_PATHNAME', 'rlock_ping'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- The master locks live on now, pinged: address, role, connected replicas,
-- round trip (one row for a standalone or Sentinel deployment, one per master
-- of a Cluster: those that did not answer show NULLs).
CREATE FUNCTION rlock_nodes(OUT node text, OUT role text, OUT replicas integer,
                            OUT round_trip interval)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'rlock_nodes'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Every lock held by any session of this server (from the shared registry).
CREATE FUNCTION rlock_locks(OUT pid integer, OUT database name, OUT name text,
                            OUT kind text, OUT scope text, OUT holder text,
                            OUT hold_count integer, OUT lease interval,
                            OUT acquired_at timestamptz,
                            OUT renewed_at timestamptz, OUT state text,
                            OUT node text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'rlock_locks'
LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE VIEW rlock_locks AS SELECT * FROM rlock_locks();
GRANT SELECT ON rlock_locks TO PUBLIC;

-- Cumulative activity counters of this server (stats.c), one row.
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
                            OUT stats_reset timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'rlock_stats'
LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE VIEW rlock_stats AS SELECT * FROM rlock_stats();
GRANT SELECT ON rlock_stats TO PUBLIC;

CREATE FUNCTION rlock_stats_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'rlock_stats_reset'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

REVOKE ALL ON FUNCTION rlock_stats_reset() FROM PUBLIC;
