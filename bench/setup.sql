-- bench/setup.sql -- the benchmark database: rlock, where the figures are
-- collected, and the helpers that measure what pgbench cannot.

CREATE EXTENSION rlock;

-- pgbench runs: one row per (script, clients, sched); sched is the
-- scheduling policy PostgreSQL ran under (other: the default; batch:
-- SCHED_BATCH, bench/run's postgres_policy).
CREATE TABLE pgbench_run (script text, clients int, tps float8, latency_ms float8,
                          sched text NOT NULL DEFAULT 'other');

-- redis-benchmark runs of rlock's own script calls (the floor).
CREATE TABLE redis_run (command text, clients int, rps float8, latency_ms float8);

-- Transports: per round and transport (tcp, tls, unix), try+release over it
-- (pgbench, 1 client) and its floor's parts measured beside it: SELECT 1
-- (once per round) and the acquire and release script round trips over the
-- same transport (redis-benchmark, 1 client).
CREATE TABLE transport_run (round int, transport text, rlock_ms float8,
                            rlock_tps float8, select1_ms float8,
                            acquire_ms float8, release_ms float8);

-- Cluster: per round and target (standalone: the bench's Redis; cluster: a
-- Redis Cluster of 3 masters), try+release on it (pgbench, 1 client) and
-- its floor's parts measured beside it: SELECT 1 (once per round) and the
-- acquire and release script round trips on the node that serves the lock
-- (its hash slot on the cluster).
CREATE TABLE cluster_run (round int, target text, node text, slot int,
                          rlock_ms float8, rlock_tps float8, select1_ms float8,
                          acquire_ms float8, release_ms float8);

-- Multi-lock and Redlock (bench/nodes.sh): per pgbench run (1 client) of
-- try+release, its latency, what rlock_stats says the run cost, and its
-- floor's parts: SELECT 1 (the try and the release are two statements) and
-- rlock's acquire and release commands replayed by a bare client, each as
-- one pipeline, on every master at once (bench/replay.c).
CREATE TABLE multi_run (names int, latency_ms float8, tps float8,
                        xacts bigint, round_trips bigint, acquisitions bigint,
                        releases bigint, failed bigint, select1_ms float8,
                        acquire_ms float8, release_ms float8);
CREATE TABLE redlock_run (round int, masters int, latency_ms float8,
                          tps float8, xacts bigint, round_trips bigint,
                          acquisitions bigint, releases bigint, failed bigint,
                          select1_ms float8, acquire_ms float8,
                          release_ms float8);
-- ... and the Redis round trips of each acquire and each release apart
-- (bench_attempts): what, on how many nodes, over how many calls.
CREATE TABLE node_attempt (what text, nodes int, calls int,
                           acquire_round_trips bigint,
                           release_round_trips bigint,
                           acquisitions bigint, releases bigint,
                           failed bigint);

-- Call the acquire statement, then the release statement (each a SELECT of
-- one boolean, which must be true), n times in this session, and note the
-- rlock_stats deltas of the acquires and of the releases apart (a backend's
-- counters reach rlock_stats at once; nothing else runs meanwhile).  One
-- uncounted pair first: this session's connections and scripts.
CREATE PROCEDURE bench_attempts(what text, nodes int, acquire text,
                                release text, n int)
LANGUAGE plpgsql AS $$
DECLARE
  s0 record;
  s1 record;
  s2 record;
  ok boolean;
  acq_rt bigint := 0;
  rel_rt bigint := 0;
  acqs bigint := 0;
  rels bigint := 0;
  failed bigint := 0;
BEGIN
  FOR i IN 0..n LOOP
    SELECT * INTO s0 FROM rlock_stats;
    EXECUTE acquire INTO ok;
    SELECT * INTO s1 FROM rlock_stats;
    IF ok IS NOT TRUE THEN
      RAISE EXCEPTION '%: % returned %', what, acquire, ok;
    END IF;
    EXECUTE release INTO ok;
    SELECT * INTO s2 FROM rlock_stats;
    IF ok IS NOT TRUE THEN
      RAISE EXCEPTION '%: % returned %', what, release, ok;
    END IF;
    CONTINUE WHEN i = 0;
    acq_rt := acq_rt + s1.redis_round_trips - s0.redis_round_trips;
    rel_rt := rel_rt + s2.redis_round_trips - s1.redis_round_trips;
    acqs := acqs + s1.acquisitions - s0.acquisitions;
    rels := rels + s2.releases - s1.releases;
    failed := failed + s2.failed_acquisitions - s0.failed_acquisitions;
  END LOOP;
  INSERT INTO node_attempt VALUES (what, nodes, n, acq_rt, rel_rt, acqs, rels,
                                   failed);
END $$;

-- Contended runs (script, clients: 8 or 64 sessions on one name):
-- acquisitions per pgbench client, what rlock_stats says the run cost, and
-- the Redis connections open once the run's sessions had ended (NULL when
-- rlock_stats has no open_connections column).
CREATE TABLE contended_client (script text, clients int, client int,
                               acquisitions bigint);
CREATE TABLE contended_stats (script text, clients int, acquisitions bigint,
                              contended bigint, round_trips bigint,
                              open_connections bigint);
-- ... and the floor of each run, measured right after it: the acquire and
-- the release script of one lock replayed one after the other by the bare
-- client (bench/replay.c, 1 client): the name changes hands at most once
-- per release + acquire round trip.
CREATE TABLE contended_floor (script text, clients int, acquire_ms float8,
                              release_ms float8);

-- Uncontended, 8 and 64 clients each on its own lock: the floor measured
-- right after pgbench's runs, by the bare client (bench/replay.c -d) with
-- as many clients, each doing SELECT 1 (libpq, prepared, its own
-- PostgreSQL session), the acquire and the release script (the commands
-- rlock sends, on a lock of its own) one after the other: each part's mean
-- latency while the parts ran together as rlock's do, the rate the client
-- reached and its pairs.
CREATE TABLE many_floor (clients int, select1_ms float8, acquire_ms float8,
                         release_ms float8, pairs_per_s float8, pairs bigint,
                         sched text NOT NULL DEFAULT 'other');
-- Context switches of the whole machine during a run of the uncontended
-- section (/proc/stat's ctxt before and after), the pairs it made, and how
-- often the Redis server was switched out while it could still run.
CREATE TABLE ctxt_run (script text, clients int, switches bigint, pairs float8,
                       sched text NOT NULL DEFAULT 'other',
                       redis_preempted bigint);
CREATE TABLE stats_mark AS SELECT * FROM rlock_stats;
CREATE PROCEDURE bench_mark() LANGUAGE sql AS $$
  DELETE FROM stats_mark; INSERT INTO stats_mark SELECT * FROM rlock_stats;
$$;

-- Hand-off events of two sessions passing one lock back and forth.
CREATE UNLOGGED TABLE handoff_event (kind text, who text, seq int, event text,
                                     at timestamptz);

-- Watchdog cycles, from rlock_stats deltas while the holder sits idle.
CREATE TABLE watchdog_run (locks int, cycles bigint, renewals bigint,
                           batches bigint, round_trips bigint,
                           renewal_ms float8);

-- A backend's memory while it takes and releases locks.
CREATE TABLE memory_sample (pairs bigint, vmrss_kb bigint, rssanon_kb bigint);

-- This backend's resident memory, from /proc/self/status.
CREATE FUNCTION bench_rss(field text) RETURNS bigint LANGUAGE sql AS $$
  SELECT (regexp_match(pg_read_file('/proc/self/status'),
                       field || ':\s+(\d+) kB'))[1]::bigint
$$;

-- Take and release the lock "bench:mem" n times, then note the memory.
CREATE PROCEDURE bench_pairs(n bigint, done bigint) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1..n LOOP
    PERFORM rlock_try_acquire('bench:mem'), rlock_release('bench:mem');
  END LOOP;
  INSERT INTO memory_sample VALUES (done, bench_rss('VmRSS'), bench_rss('RssAnon'));
END $$;

-- Hold n locks (named bench:wd:1..n) in this session, without a lease.
CREATE PROCEDURE bench_hold(n int) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN (SELECT count(*) + 1 FROM rlock_locks WHERE pid = pg_backend_pid())..n LOOP
    PERFORM rlock_acquire('bench:wd:' || i);
  END LOOP;
END $$;

-- Counters of interest, now.
CREATE FUNCTION bench_counters(OUT cycles bigint, OUT renewals bigint,
                               OUT batches bigint, OUT round_trips bigint,
                               OUT renewal_ms float8)
LANGUAGE sql AS $$
  SELECT renewal_cycles, renewals, renewal_batches, redis_round_trips,
         renewal_time FROM rlock_stats
$$;

-- Let the watchdog run "cycles" renewal cycles over what this session holds
-- (sitting idle meanwhile), and record what they cost.
CREATE PROCEDURE bench_watch(cycles int) LANGUAGE plpgsql AS $$
DECLARE
  held int := (SELECT count(*) FROM rlock_locks WHERE pid = pg_backend_pid());
  c0 record;
  c1 record;
BEGIN
  -- start at a cycle boundary
  c0 := bench_counters();
  LOOP
    PERFORM pg_sleep(0.01);
    c1 := bench_counters();
    EXIT WHEN c1.cycles > c0.cycles;
  END LOOP;
  c0 := c1;
  LOOP
    PERFORM pg_sleep(0.01);
    c1 := bench_counters();
    EXIT WHEN c1.cycles >= c0.cycles + cycles;
  END LOOP;
  INSERT INTO watchdog_run VALUES (held, c1.cycles - c0.cycles,
    c1.renewals - c0.renewals, c1.batches - c0.batches,
    c1.round_trips - c0.round_trips, c1.renewal_ms - c0.renewal_ms);
END $$;

-- One of two sessions passing a lock back and forth n times: take it, wait
-- until the peer is blocked on it, note the time, release it, and wait
-- until the peer has it (so as not to barge back in).
CREATE PROCEDURE bench_handoff(kind text, me text, peer text, n int)
LANGUAGE plpgsql AS $$
DECLARE
  peer_wait text := CASE kind WHEN 'rlock' THEN 'Extension' ELSE 'Lock' END;
BEGIN
  PERFORM set_config('application_name', me, false);
  FOR i IN 1..n LOOP
    IF kind = 'rlock' THEN
      PERFORM rlock_acquire('bench:handoff');
    ELSE
      PERFORM pg_advisory_lock(4242);
    END IF;
    INSERT INTO handoff_event VALUES (kind, me, i, 'acquired', clock_timestamp());

    PERFORM pg_sleep(0.002);
    FOR j IN 1..5000 LOOP
      PERFORM pg_stat_clear_snapshot();
      EXIT WHEN EXISTS (SELECT 1 FROM pg_stat_activity
                        WHERE application_name = peer
                          AND wait_event_type = peer_wait);
      PERFORM pg_sleep(0.001);
    END LOOP;

    INSERT INTO handoff_event VALUES (kind, me, i, 'releasing', clock_timestamp());
    IF kind = 'rlock' THEN
      PERFORM rlock_release('bench:handoff');
    ELSE
      PERFORM pg_advisory_unlock(4242);
    END IF;

    -- (give it the time a hand-off takes before polling, so as not to
    -- compete with it for the CPU)
    PERFORM pg_sleep(0.001);
    FOR j IN 1..2000 LOOP
      EXIT WHEN CASE kind
        WHEN 'rlock' THEN rlock_is_locked('bench:handoff')
        ELSE EXISTS (SELECT 1 FROM pg_locks
                     WHERE locktype = 'advisory' AND objid = 4242 AND granted)
      END;
      PERFORM pg_sleep(0.0002);
    END LOOP;
  END LOOP;
END $$;

-- Hand-off latencies (ms): each acquisition that followed a release by the
-- other session.
CREATE VIEW handoff_ms AS
  SELECT kind, extract(epoch FROM at - prev_at) * 1000 AS ms
  FROM (SELECT *, lag(event) OVER w AS prev_event, lag(who) OVER w AS prev_who,
               lag(at) OVER w AS prev_at
        FROM handoff_event WINDOW w AS (PARTITION BY kind ORDER BY at)) e
  WHERE event = 'acquired' AND prev_event = 'releasing' AND prev_who <> who;

-- Semaphores and latches (bench/sync.sh).  Per round and what (semaphore:
-- acquire+release of a permit; lock: try+release, the same floor method
-- for comparison), its latency in a pgbench run (1 client) of SELECT 1,
-- the semaphore's and the lock's statements together, and its floor's
-- parts: SELECT 1 (from the same run) and rlock's acquire and release
-- commands replayed one after the other by a bare client
-- (bench/replay.c) right after it.
CREATE TABLE sync_run (round int, what text, latency_ms float8, xacts bigint,
                       select1_ms float8, acquire_ms float8,
                       release_ms float8);
-- ... and what rlock_stats says each round's run cost (semaphore and lock
-- transactions together).
CREATE TABLE sync_stats (round int, xacts bigint, round_trips bigint,
                         acquisitions bigint, releases bigint, failed bigint);
-- The script calls Redis counted (INFO commandstats: EVALSHA and EVAL)
-- during a pgbench run.
CREATE TABLE script_calls (script text, calls bigint);
-- The latch's floor: its set-count and its count-down (the one that
-- reaches zero and publishes it) replayed by a bare client.
CREATE TABLE latch_floor (set_ms float8, count_down_ms float8);

-- Latch wake-up events of the two sessions of bench_latch.
CREATE UNLOGGED TABLE latch_event (seq int, event text, at timestamptz);

-- One of two sessions, n rounds on the latch "bench-latch".  The awaiter
-- sets its count to 2 and awaits it.  The counter waits for that count,
-- counts down once (2 -> 1: no message), waits until the awaiter is
-- blocked (an Extension wait that lasts: a round trip shows as one too),
-- notes the time and counts down to zero (which publishes "0").  The
-- awaiter notes when its await returned.
CREATE PROCEDURE bench_latch(role text, n int)
LANGUAGE plpgsql AS $$
DECLARE
  awaiter_blocked boolean;
BEGIN
  PERFORM set_config('application_name', 'bench_latch_' || role, false);
  FOR i IN 1..n LOOP
    IF role = 'awaiter' THEN
      IF NOT rlock_latch_set_count('bench-latch', 2) THEN
        RAISE EXCEPTION 'round %: the latch was not at zero', i;
      END IF;
      IF NOT rlock_latch_await('bench-latch', '10s') THEN
        RAISE EXCEPTION 'round %: the latch did not reach zero within 10 s', i;
      END IF;
      INSERT INTO latch_event VALUES (i, 'returned', clock_timestamp());
      CONTINUE;
    END IF;

    FOR j IN 1..40000 LOOP
      EXIT WHEN rlock_latch_count('bench-latch') = 2;
      IF j = 40000 THEN
        RAISE EXCEPTION 'round %: the awaiter did not set the count', i;
      END IF;
      PERFORM pg_sleep(0.0005);
    END LOOP;
    IF rlock_latch_count_down('bench-latch') <> 1 THEN
      RAISE EXCEPTION 'round %: the first count-down did not leave 1', i;
    END IF;
    PERFORM pg_sleep(0.002);
    FOR j IN 1..10000 LOOP
      PERFORM pg_stat_clear_snapshot();
      awaiter_blocked := EXISTS (SELECT 1 FROM pg_stat_activity
                                 WHERE application_name = 'bench_latch_awaiter'
                                   AND wait_event_type = 'Extension');
      IF awaiter_blocked THEN
        PERFORM pg_sleep(0.001);
        PERFORM pg_stat_clear_snapshot();
        EXIT WHEN EXISTS (SELECT 1 FROM pg_stat_activity
                          WHERE application_name = 'bench_latch_awaiter'
                            AND wait_event_type = 'Extension');
      ELSE
        PERFORM pg_sleep(0.0005);
      END IF;
      IF j = 10000 THEN
        RAISE EXCEPTION 'round %: the awaiter never blocked', i;
      END IF;
    END LOOP;
    INSERT INTO latch_event VALUES (i, 'counting', clock_timestamp());
    IF rlock_latch_count_down('bench-latch') <> 0 THEN
      RAISE EXCEPTION 'round %: the last count-down did not reach zero', i;
    END IF;
    -- (give the wake-up its time before polling, so as not to compete
    -- with it for the CPU)
    PERFORM pg_sleep(0.001);
  END LOOP;
END $$;

-- Latch wake-up latencies (ms): the start of the count-down that reached
-- zero -> the await returned, per round.
CREATE VIEW latch_ms AS
  SELECT c.seq, extract(epoch FROM r.at - c.at) * 1000 AS ms
  FROM latch_event c JOIN latch_event r USING (seq)
  WHERE c.event = 'counting' AND r.event = 'returned';

-- The deadlock section (bench/deadlock.sh).
\ir deadlock_setup.sql

-- ---- The scale section's hand-off and watchdog axes (bench/scale_big.sh) ----
-- Their sessions run on servers of their own (each with this file), their
-- figures are gathered here.

-- Hand-off with W sessions waiting on one name across two servers: each
-- session's acquisitions (the time its acquire returned) and releases (the
-- time before it released), server its server's port, who 0 the gate; the gate's opening; the
-- rounds each session made; what each point cost (Redis's INFO commandstats,
-- rlock_stats of both servers, the machine's context switches); its floor.
CREATE TABLE scale_handoff_event (waiters int, server text, who int, seq int,
                                  event text, at timestamptz);
CREATE TABLE scale_gate (waiters int);
CREATE TABLE scale_handoff_rounds (waiters int, rounds int);
CREATE TABLE scale_handoff_cost (waiters int, acquisitions bigint,
                                 script_calls bigint, subscribes bigint,
                                 round_trips bigint, switches bigint);
CREATE TABLE scale_handoff_floor (waiters int, acquire_ms float8,
                                  release_ms float8);

-- The gate: take the name, wait until the driver says every session waits
-- (a row in scale_gate), note the time, release it.
CREATE PROCEDURE bench_scale_gate(waiters int)
LANGUAGE plpgsql AS $$
DECLARE
  released timestamptz;
BEGIN
  PERFORM rlock_acquire('bench:scale:handoff');
  COMMIT;
  LOOP
    EXIT WHEN EXISTS (SELECT 1 FROM scale_gate g WHERE g.waiters = bench_scale_gate.waiters);
    PERFORM pg_sleep(0.01);
  END LOOP;
  released := clock_timestamp();
  PERFORM rlock_release('bench:scale:handoff');
  INSERT INTO scale_handoff_event
    VALUES (waiters, current_setting('port'), 0, 1, 'releasing', released);
END $$;

-- One of the W sessions: rounds times take the name (waiting), note the
-- time, hold it 0.2 ms, note the time, release it, note the time; the
-- times are written once at the end (no write between the rounds).
CREATE PROCEDURE bench_scale_handoff(waiters int, who int, rounds int)
LANGUAGE plpgsql AS $$
DECLARE
  server text := current_setting('port');
  acquired timestamptz[] := '{}';
  releasing timestamptz[] := '{}';
  released timestamptz[] := '{}';
BEGIN
  PERFORM set_config('application_name', 'scale_handoff', false);
  FOR i IN 1..rounds LOOP
    PERFORM rlock_acquire('bench:scale:handoff');
    acquired := acquired || clock_timestamp();
    PERFORM pg_sleep(0.0002);
    releasing := releasing || clock_timestamp();
    PERFORM rlock_release('bench:scale:handoff');
    released := released || clock_timestamp();
  END LOOP;
  PERFORM set_config('application_name', 'scale_handoff_done', false);
  INSERT INTO scale_handoff_event
    SELECT waiters, server, who, s, e.event, e.at
    FROM generate_subscripts(acquired, 1) s,
         LATERAL (VALUES ('acquired', acquired[s]), ('releasing', releasing[s]),
                         ('released', released[s])) e(event, at);
END $$;

-- The hand-offs: each acquisition whose previous acquisition or release
-- start (of the point, both servers' sessions by one clock) was another
-- session's release start; crossed: the two sessions were on different
-- servers; after_ms: from the return of that release (NULL for the gate's)
-- to the acquisition; counted: at least 90 % of the W sessions had rounds
-- left (the last rounds drain the queue).  scale_handoff_ms: those counted.
CREATE VIEW scale_handoff_all AS
  WITH e AS (
    SELECT *, lag(event) OVER w AS prev_event, lag(server) OVER w AS prev_server,
           lag(who) OVER w AS prev_who, lag(seq) OVER w AS prev_seq,
           lag(at) OVER w AS prev_at
    FROM scale_handoff_event
    WHERE event <> 'released'
    WINDOW w AS (PARTITION BY waiters ORDER BY at, event DESC)),
  done AS (
    SELECT waiters, server, who, max(at) AS finished
    FROM scale_handoff_event WHERE who > 0 GROUP BY 1, 2, 3)
  SELECT e.waiters, extract(epoch FROM e.at - e.prev_at) * 1000 AS ms,
         e.server <> e.prev_server AS crossed,
         extract(epoch FROM e.at - r.at) * 1000 AS after_ms,
         (SELECT count(*) FROM done d
          WHERE d.waiters = e.waiters AND d.finished < e.at) <= e.waiters / 10
           AS counted
  FROM e
  LEFT JOIN scale_handoff_event r
    ON r.waiters = e.waiters AND r.server = e.prev_server AND r.who = e.prev_who
   AND r.seq = e.prev_seq AND r.event = 'released'
  WHERE e.event = 'acquired' AND e.prev_event = 'releasing'
    AND (e.server, e.who) <> (e.prev_server, e.prev_who);
CREATE VIEW scale_handoff_ms AS
  SELECT waiters, ms, crossed, after_ms FROM scale_handoff_all WHERE counted;

-- Watchdog: hold n locks (bench:swd:1..n) in this session, without a lease,
-- taken 1000 names per multi-lock call (its largest).
CREATE PROCEDURE bench_scale_hold(n int) LANGUAGE plpgsql AS $$
DECLARE
  held int := (SELECT count(*) FROM rlock_locks WHERE pid = pg_backend_pid());
  k int;
BEGIN
  WHILE held < n LOOP
    k := least(1000, n - held);
    PERFORM rlock_multi_acquire(ARRAY(SELECT 'bench:swd:' || i
                                      FROM generate_series(held + 1, held + k) i));
    held := held + k;
  END LOOP;
END $$;

-- Wait (poll) until the worker has ended n more renewal cycles, or for
-- timeout_s seconds at most.
CREATE PROCEDURE bench_scale_cycles(n int, timeout_s int) LANGUAGE plpgsql AS $$
DECLARE
  c0 bigint := (SELECT renewal_cycles FROM rlock_stats);
  t_end timestamptz := clock_timestamp() + make_interval(secs => timeout_s);
BEGIN
  WHILE (SELECT renewal_cycles FROM rlock_stats) < c0 + n
        AND clock_timestamp() < t_end LOOP
    PERFORM pg_sleep(0.005);
  END LOOP;
END $$;

-- Per N: locks held, cycles watched, the worker's counters' deltas over
-- them, Redis CPU (ms, from /proc) and script time (ms, INFO commandstats)
-- over them, and how long taking the locks took (s).
CREATE TABLE scale_watchdog_run (locks int, held bigint, cycles bigint,
                                 renewals bigint, batches bigint,
                                 round_trips bigint, renewal_ms float8,
                                 redis_cpu_ms bigint, redis_script_ms bigint,
                                 failures bigint, lost bigint,
                                 hold_s float8);
-- ... and shared memory per lock of rlock.max_locks: all of
-- pg_shmem_allocations on the axis's server and on the bench's, their
-- rlock.max_locks, rlock's named allocations, the difference per lock.
CREATE TABLE scale_shmem (max_locks int, bytes bigint, main_max_locks int,
                          main_bytes bigint, named_bytes bigint,
                          per_lock bigint);
