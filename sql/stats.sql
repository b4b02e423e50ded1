-- rlock_stats: the server's activity counters move as users expect.
-- (Counters are server-wide; nothing else runs during this test, and every
-- lock here has a fixed lease, so the watchdog stays quiet.)
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS rlock;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never

SELECT rlock_ping() IS NOT NULL AS connected;
SELECT current_setting('rlock.redis_url') AS redis_url \gset
\setenv RLOCK_REDIS_URL :redis_url

-- what changed since the last mark
CREATE TEMP TABLE mark AS SELECT * FROM rlock_stats;
CREATE TEMP VIEW delta AS
  SELECT s.acquisitions - m.acquisitions AS acquired,
         s.contended_acquisitions - m.contended_acquisitions AS contended,
         s.failed_acquisitions - m.failed_acquisitions AS failed,
         s.releases - m.releases AS released,
         s.redis_round_trips - m.redis_round_trips AS round_trips,
         s.redis_errors - m.redis_errors AS errors,
         s.locks_lost - m.locks_lost AS lost
  FROM rlock_stats s, mark m;
CREATE FUNCTION pg_temp.remark() RETURNS void LANGUAGE sql AS $$
  DELETE FROM mark; INSERT INTO mark SELECT * FROM rlock_stats;
$$;

-- every counter is there, and a wait time is a number of milliseconds
SELECT count(*) AS columns FROM information_schema.columns
 WHERE table_name = 'rlock_stats';
SELECT pg_typeof(wait_time) AS wait_time, pg_typeof(renewal_time) AS renewal_time,
       pg_typeof(acquisitions) AS acquisitions,
       pg_typeof(open_connections) AS open_connections
  FROM rlock_stats;

-- a Redis that does not know rlock's scripts yet costs one more round trip
-- per script, once
\! redis-cli -u "$RLOCK_REDIS_URL" SCRIPT FLUSH > /dev/null
SELECT pg_temp.remark();
SELECT rlock_try_acquire('st_a', '1 minute'), rlock_release('st_a');
SELECT acquired, released, round_trips FROM delta;

-- an uncontended try and release: one acquisition, one release, and two
-- round trips to Redis, no more
SELECT pg_temp.remark();
SELECT rlock_try_acquire('st_a', '1 minute'), rlock_release('st_a');
SELECT * FROM delta;

-- reentrant holds count one by one; releasing them all is one round trip
SELECT pg_temp.remark();
SELECT rlock_acquire('st_a', '1 minute'), rlock_acquire('st_a', '1 minute');
SELECT rlock_release_all();
SELECT * FROM delta;

-- a transaction-level lock: acquire, the check before COMMIT, the release
-- (once the check's script is known to Redis)
BEGIN;
SELECT rlock_xact_acquire('st_x', '1 minute');
COMMIT;
SELECT pg_temp.remark();
BEGIN;
SELECT rlock_xact_acquire('st_x', '1 minute');
COMMIT;
SELECT * FROM delta;

-- a try that finds the lock taken fails at once; one that may wait fails
-- when the wait is over, and its wait is counted
SELECT rlock_acquire('st_b', '1 minute', owner => 'st_owner');
SELECT pg_temp.remark();
SELECT rlock_try_acquire('st_b', '1 minute');
SELECT rlock_try_acquire('st_b', '1 minute', wait => '150 ms');
SELECT acquired, contended, failed, released, errors FROM delta;
SELECT s.wait_time - m.wait_time >= 150 AS waited_150ms
  FROM rlock_stats s, mark m;
SELECT rlock_release('st_b', owner => 'st_owner');

-- an error reply from Redis is a Redis error, not an acquisition
\! redis-cli -u "$RLOCK_REDIS_URL" SET st_string 'not a lock' > /dev/null
SELECT pg_temp.remark();
SELECT rlock_try_acquire('st_string', '1 minute');
SELECT acquired, failed, errors FROM delta;
\! redis-cli -u "$RLOCK_REDIS_URL" DEL st_string > /dev/null

-- a lock lost while held (its key deleted behind our back) is counted when
-- the session finds out
SELECT rlock_acquire('st_lost', '1 minute');
\! redis-cli -u "$RLOCK_REDIS_URL" DEL st_lost > /dev/null
SELECT pg_temp.remark();
-- (terse: the session or the worker may be first to see the loss)
\set VERBOSITY terse
SELECT rlock_release('st_lost');
\set VERBOSITY default
SELECT released, lost FROM delta;

-- anyone may read the counters; only superusers may reset them
CREATE ROLE rlock_stats_reader;
SET ROLE rlock_stats_reader;
SELECT acquisitions > 0 AS readable FROM rlock_stats;
SELECT rlock_stats_reset();
RESET ROLE;
DROP ROLE rlock_stats_reader;

-- a reset starts every counter from zero
SELECT rlock_stats_reset();
SELECT acquisitions, contended_acquisitions, failed_acquisitions, releases,
       locks_lost, redis_errors, stats_reset > (SELECT stats_reset FROM mark) AS reset_later
  FROM rlock_stats;
SELECT rlock_try_acquire('st_a', '1 minute'), rlock_release('st_a');
SELECT acquisitions, releases, redis_round_trips FROM rlock_stats;
-- open_connections is a gauge, not a counter: the reset left it alone, and
-- it counts this session's connection, used a moment ago
SELECT open_connections >= 1 AS open_counted FROM rlock_stats;

-- rlock_stats_histograms: wait and hold times per lock kind, cumulative
-- buckets in Prometheus's "le" convention, a fixed set of rows
SELECT column_name, data_type FROM information_schema.columns
 WHERE table_name = 'rlock_stats_histograms' ORDER BY ordinal_position;
SELECT measure, count(DISTINCT kind) AS kinds, count(*) AS rows,
       string_agg(DISTINCT kind, ' ' ORDER BY kind) AS which
  FROM rlock_stats_histograms GROUP BY measure ORDER BY measure;
SELECT string_agg(le::text, ' ' ORDER BY le) AS buckets
  FROM rlock_stats_histograms WHERE kind = 'exclusive' AND measure = 'wait';
-- the reset above emptied them; one try and release: one wait, one hold
SELECT rlock_stats_reset();
SELECT rlock_try_acquire('st_h', '1 minute'), rlock_release('st_h');
SELECT kind, measure, count, sum >= 0 AS has_sum FROM rlock_stats_histograms
 WHERE le = 'Infinity' AND count > 0 ORDER BY kind, measure;
-- cumulative: never fewer observations at a larger le, and each histogram's
-- sum the same on all its rows
SELECT count(*) AS decreasing FROM (
  SELECT count < lag(count) OVER (PARTITION BY kind, measure ORDER BY le) AS down
    FROM rlock_stats_histograms) s WHERE down;
SELECT count(*) AS sums_differ FROM (
  SELECT kind, measure FROM rlock_stats_histograms
   GROUP BY kind, measure HAVING count(DISTINCT sum) > 1) s;
