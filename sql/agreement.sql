-- Agreement between Redis and rlock (SPEC.md 6): whatever sequence of calls
-- a session makes, no script lowers a held lock's TTL below what one of its
-- holds was promised.  Each case below once left Redis keeping a lock for
-- about a second while rlock believed it held for an hour, so that another
-- holder could take it with no fault at all.  Other holders are played by
-- owner tokens; rlock.watchdog_timeout is 2 s in this suite.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS rlock;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never
SELECT current_setting('rlock.redis_url') AS redis_url \gset
\setenv RLOCK_REDIS_URL :redis_url

-- waits (bounded) until the watchdog has renewed "n" once more
CREATE FUNCTION agreement_renewed(n text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  before timestamptz;
BEGIN
  SELECT coalesce(max(renewed_at), '-infinity') INTO before
    FROM rlock_locks WHERE name = n AND pid = pg_backend_pid();
  FOR i IN 1 .. 600 LOOP
    PERFORM pg_sleep(0.05);
    IF EXISTS (SELECT FROM rlock_locks WHERE name = n AND pid = pg_backend_pid()
               AND renewed_at > before) THEN
      RETURN true;
    END IF;
  END LOOP;
  RETURN false;
END $$;

-- 1. a multi-lock that fails on another holder's name gives back the name
-- this session already held, and leaves that hold's TTL as it was
SELECT rlock_acquire('ag_ma', '1 hour');
SELECT rlock_acquire('ag_mb', '1 hour', owner => 'ag-other');
SELECT rlock_multi_try_acquire(ARRAY['ag_ma', 'ag_mb'], '1 second') AS multi;
SELECT rlock_hold_count('ag_ma') AS count_ma,
       rlock_remaining_lease('ag_ma') > '59 minutes' AS ma_keeps_its_hour;
\! redis-cli -u "$RLOCK_REDIS_URL" PTTL ag_ma | awk '{ print ($1 > 3540000) ? "ttl kept" : "ttl cut to " $1 }'
SELECT rlock_release('ag_ma');
SELECT rlock_release('ag_mb', 'ag-other');

-- the same with the held name renewed by the watchdog (NULL lease)
SELECT rlock_acquire('ag_mc');
SELECT rlock_acquire('ag_md', '1 hour', owner => 'ag-other');
SELECT rlock_multi_try_acquire(ARRAY['ag_mc', 'ag_md'], '50 milliseconds') AS multi;
\! redis-cli -u "$RLOCK_REDIS_URL" PTTL ag_mc | awk '{ print ($1 > 1000) ? "ttl kept" : "ttl cut to " $1 }'
SELECT rlock_release('ag_mc');
SELECT rlock_release('ag_md', 'ag-other');

-- 2. re-entry with a shorter lease keeps the longer one
SELECT rlock_acquire('ag_m2', '1 hour');
SELECT rlock_acquire('ag_m2', '10 seconds');
SELECT rlock_remaining_lease('ag_m2') > '59 minutes' AS reentry_keeps_hour;
SELECT rlock_release('ag_m2');
SELECT rlock_remaining_lease('ag_m2') > '59 minutes' AS after_release_keeps_hour;
SELECT rlock_release('ag_m2');
SELECT rlock_is_locked('ag_m2') AS still_locked;
-- ... and a watchdog hold re-entered with a fixed lease is not lowered
SELECT rlock_acquire('ag_m3');
SELECT rlock_acquire('ag_m3', '100 milliseconds');
SELECT agreement_renewed('ag_m3') AS renewed;
SELECT state, hold_count FROM rlock_locks WHERE name = 'ag_m3';
\! redis-cli -u "$RLOCK_REDIS_URL" PTTL ag_m3 | awk '{ print ($1 > 1000) ? "ttl kept" : "ttl cut to " $1 }'
SELECT rlock_release('ag_m3'), rlock_release('ag_m3');
-- ... also once renewals have carried it past its first lease: the
-- re-entry's shorter expiry does not replace the renewed one
SELECT rlock_acquire('ag_m5');
SELECT pg_sleep(2.2);
SELECT agreement_renewed('ag_m5') AS renewed;
SELECT rlock_acquire('ag_m5', '100 milliseconds');
SELECT agreement_renewed('ag_m5') AS renewed;
SELECT agreement_renewed('ag_m5') AS renewed;
SELECT state, hold_count FROM rlock_locks WHERE name = 'ag_m5';
SELECT rlock_release('ag_m5'), rlock_release('ag_m5');
-- the same for a read hold
SELECT rlock_read_acquire('ag_rw5');
SELECT pg_sleep(2.2);
SELECT agreement_renewed('ag_rw5') AS renewed;
SELECT rlock_read_acquire('ag_rw5', '100 milliseconds');
SELECT agreement_renewed('ag_rw5') AS renewed;
SELECT agreement_renewed('ag_rw5') AS renewed;
SELECT state, hold_count FROM rlock_locks WHERE name = 'ag_rw5';
SELECT rlock_read_release('ag_rw5'), rlock_read_release('ag_rw5');
-- the same for the fair lock
SELECT rlock_fair_acquire('ag_f1', '1 hour');
SELECT rlock_fair_acquire('ag_f1', '1 second');
SELECT rlock_fair_release('ag_f1');
SELECT rlock_remaining_lease('ag_f1') > '59 minutes' AS fair_keeps_hour;
SELECT rlock_fair_release('ag_f1');

-- 3. read holds inside a write hold never cut the writer's TTL
SELECT rlock_write_acquire('ag_rw1', '1 hour');
SELECT rlock_read_acquire('ag_rw1', '1 second');
SELECT rlock_read_acquire('ag_rw1', '1 second');
SELECT rlock_read_release('ag_rw1');
SELECT rlock_remaining_lease('ag_rw1') > '59 minutes' AS writer_keeps_hour;
SELECT rlock_read_release('ag_rw1');
SELECT rlock_remaining_lease('ag_rw1') > '59 minutes' AS writer_keeps_hour;
SELECT rlock_write_try_acquire('ag_rw1', '1 minute', owner => 'ag-other') AS second_writer;
SELECT rlock_write_release('ag_rw1');

-- 4. a long read hold and a watchdog read hold of the same holder: the
-- renewal does not lower the lock (or the long hold's timeout key) to 2 s
SELECT rlock_read_acquire('ag_rw2', '1 hour');
SELECT rlock_read_acquire('ag_rw2');
SELECT agreement_renewed('ag_rw2') AS renewed;
SELECT rlock_remaining_lease('ag_rw2') > '59 minutes' AS reader_keeps_hour;
SELECT rlock_read_release('ag_rw2');
-- the release keeps the holder's longest hold, whichever one it ended
SELECT rlock_remaining_lease('ag_rw2') > '59 minutes' AS reader_keeps_hour;
\! redis-cli -u "$RLOCK_REDIS_URL" --scan --pattern '{ag_rw2}:*:rwlock_timeout:*' | xargs -r -n1 redis-cli -u "$RLOCK_REDIS_URL" PTTL | awk '{ print ($1 > 3540000) ? "timeout kept" : "timeout cut to " $1 }'
SELECT rlock_read_release('ag_rw2');
-- two holders: another's long read survives this session's renewals
SELECT rlock_read_acquire('ag_rw3', '1 hour', owner => 'ag-other');
SELECT rlock_read_acquire('ag_rw3');
SELECT agreement_renewed('ag_rw3') AS renewed;
SELECT rlock_remaining_lease('ag_rw3') > '59 minutes' AS other_reader_keeps_hour;
SELECT rlock_read_release('ag_rw3');
SELECT rlock_remaining_lease('ag_rw3') > '59 minutes' AS other_reader_keeps_hour;
SELECT rlock_read_release('ag_rw3', 'ag-other');

-- 5. a write release that leaves this holder's reads keeps their lease
-- (the writer's renewals had set the TTL to 2 s)
SELECT rlock_write_acquire('ag_rw4');
SELECT rlock_read_acquire('ag_rw4', '1 hour');
SELECT agreement_renewed('ag_rw4') AS renewed;
SELECT rlock_write_release('ag_rw4');
\! redis-cli -u "$RLOCK_REDIS_URL" HGET ag_rw4 mode
SELECT rlock_remaining_lease('ag_rw4') > '59 minutes' AS reads_keep_hour;
SELECT rlock_write_try_acquire('ag_rw4', '1 minute', owner => 'ag-other') AS second_writer;
SELECT rlock_read_release('ag_rw4');
SELECT rlock_is_locked('ag_rw4') AS still_locked;

-- 6. another client lowers the lock's TTL (a Redisson read unlock sets it
-- to its longest remaining read): the watchdog's next check records the
-- lower expiry at once, so the session stops believing in the lock the
-- moment Redis lets it go, not at the check after
SELECT rlock_read_acquire('ag_rw6', '1 hour');
SELECT pg_sleep(1);
\! redis-cli -u "$RLOCK_REDIS_URL" PEXPIRE ag_rw6 2500
DO $$
BEGIN
  FOR i IN 1 .. 600 LOOP
    EXIT WHEN NOT rlock_is_locked('ag_rw6');
    PERFORM pg_sleep(0.01);
  END LOOP;
END $$;
SELECT rlock_is_held('ag_rw6') AS held_after_redis_let_go;
SELECT rlock_read_release('ag_rw6');

DROP FUNCTION agreement_renewed(text);
DROP EXTENSION rlock;  -- errors.sql, next, creates it
