-- bench/deadlock_setup.sql -- the deadlock section's tables and procedure
-- (bench/deadlock.sh), read by bench/setup.sql.

-- pgbench runs with deadlock detection on (rlock.deadlock_timeout's
-- default) and off (0): per round, mode and number of clients, the rate
-- and the Redis round trips per transaction (rlock_stats' deltas).
CREATE TABLE deadlock_run (round int, mode text, script text, clients int,
                           tps float8, latency_ms float8, xacts bigint,
                           round_trips bigint);

-- Deadlock cycles of two sessions: when the second wait closed the cycle,
-- when the victim got 40P01, when the other acquired.
CREATE UNLOGGED TABLE deadlock_event (cycle int, who text, event text,
                                      at timestamptz);

-- What the target is made of: deadlock_timeout (ms), a Redis round trip
-- (rlock_ping's median, ms).
CREATE TABLE deadlock_basis (deadlock_timeout_ms float8, round_trip_ms float8);

-- One session of a 2-cycle, n times: take my lock, wait until the peer
-- holds its own, then wait for the peer's.  The closer waits first until
-- the peer waits for its lock (rlock_waits), notes the time and closes the
-- cycle.  The session that gets 40P01 notes it and lets go of its lock;
-- the other then gets the peer's lock and lets go of both.  Session locks,
-- released by each session itself (a caught 40P01 aborts only the block's
-- subtransaction).  lock_timeout bounds a cycle that is never found.
CREATE PROCEDURE bench_deadlock(me text, peer text, closer boolean, n int)
LANGUAGE plpgsql AS $$
DECLARE
  mine text;
  theirs text;
  peer_pid int;
BEGIN
  PERFORM set_config('application_name', me, false);
  PERFORM set_config('lock_timeout', '60s', false);
  FOR i IN 1..n LOOP
    mine := format('bench-dl-%s-%s', me, i);
    theirs := format('bench-dl-%s-%s', peer, i);
    PERFORM rlock_acquire(mine);
    FOR j IN 1..60000 LOOP
      EXIT WHEN rlock_is_locked(theirs);
      PERFORM pg_sleep(0.001);
      IF j = 60000 THEN
        RAISE EXCEPTION 'cycle %: the peer never took its lock', i;
      END IF;
    END LOOP;
    IF closer THEN
      FOR j IN 1..60000 LOOP
        PERFORM pg_stat_clear_snapshot();
        SELECT pid INTO peer_pid FROM pg_stat_activity
          WHERE application_name = peer;
        EXIT WHEN EXISTS (SELECT 1 FROM rlock_waits
                          WHERE pid = peer_pid AND name = mine);
        PERFORM pg_sleep(0.001);
        IF j = 60000 THEN
          RAISE EXCEPTION 'cycle %: the peer never waited for my lock', i;
        END IF;
      END LOOP;
      INSERT INTO deadlock_event VALUES (i, me, 'closing', clock_timestamp());
    END IF;
    BEGIN
      PERFORM rlock_acquire(theirs);
      INSERT INTO deadlock_event VALUES (i, me, 'acquired', clock_timestamp());
      PERFORM rlock_release(theirs);
    EXCEPTION WHEN deadlock_detected THEN
      INSERT INTO deadlock_event VALUES (i, me, 'deadlock', clock_timestamp());
    END;
    PERFORM rlock_release(mine);
  END LOOP;
END $$;

-- Per cycle: the cycle closing -> the victim's 40P01 (ms), and who it was.
CREATE VIEW deadlock_ms AS
  SELECT c.cycle, d.who AS victim, c.who AS closer,
         extract(epoch FROM d.at - c.at) * 1000 AS ms
  FROM deadlock_event c JOIN deadlock_event d USING (cycle)
  WHERE c.event = 'closing' AND d.event = 'deadlock';
