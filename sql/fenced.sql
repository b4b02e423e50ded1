-- Fenced locks (SPEC.md 5.2, Redisson RFencedLock): the exclusive lock,
-- whose every acquisition returns a fencing token that strictly increases.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS rlock;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never
SELECT current_setting('rlock.redis_url') AS redis_url \gset
\setenv RLOCK_REDIS_URL :redis_url
-- this file's token counters start afresh (make installcheck may run it
-- again against the same Redis)
\! redis-cli -u "$RLOCK_REDIS_URL" DEL 'redisson_lock_token:{fx_a}' 'redisson_lock_token:{fx_x}' 'redisson_lock_token:{fx_job}' >/dev/null

-- no token before the first acquisition
SELECT rlock_fenced_token('fx_a') AS never_acquired;

-- every acquisition, reentrant ones included, gets a larger token
SELECT rlock_fenced_acquire('fx_a', '1 minute') AS t1 \gset
SELECT rlock_fenced_acquire('fx_a', '1 minute') AS t2 \gset
SELECT :t1 > 0 AS positive, :t2 > :t1 AS reentrant_larger,
       rlock_fenced_token('fx_a') = :t2 AS token_reads_the_last,
       rlock_hold_count('fx_a') AS holds;

-- a try that does not get the lock returns NULL and takes no token
SELECT rlock_fenced_try_acquire('fx_a', '1 minute', owner => 'fx_other') IS NULL AS refused;
SELECT rlock_fenced_try_acquire('fx_a', '1 minute', wait => '50 ms', owner => 'fx_other') IS NULL AS refused_after_wait;
SELECT rlock_fenced_token('fx_a') = :t2 AS unchanged;

-- released with rlock_release; the next holder's token is larger still
SELECT rlock_release('fx_a'), rlock_release('fx_a');
SELECT rlock_fenced_try_acquire('fx_a', '1 minute', owner => 'fx_other') AS t3 \gset
SELECT :t3 > :t2 AS next_holder_larger;
SELECT rlock_release('fx_a', owner => 'fx_other');

-- a fenced lock is an exclusive lock: the two exclude each other
SELECT rlock_acquire('fx_a', '1 minute', owner => 'fx_plain');
SELECT rlock_fenced_try_acquire('fx_a', '1 minute') IS NULL AS excluded_by_plain;
SELECT rlock_release('fx_a', owner => 'fx_plain');
SELECT rlock_fenced_acquire('fx_a', '1 minute') > :t3 AS fenced_again;
SELECT rlock_try_acquire('fx_a', '1 minute', owner => 'fx_plain') AS plain_excluded_by_fenced;
SELECT rlock_release('fx_a');

-- transaction-level fenced locks end with the transaction
BEGIN;
SELECT rlock_fenced_xact_acquire('fx_x', '1 minute') AS x1 \gset
SELECT rlock_fenced_xact_try_acquire('fx_x', '1 minute') > :x1 AS xact_reentrant_larger;
SELECT rlock_hold_count('fx_x') AS holds;
COMMIT;
SELECT rlock_is_locked('fx_x') AS still_locked;
SELECT rlock_acquire('fx_x', '1 minute', owner => 'fx_other');
BEGIN;
SELECT rlock_fenced_xact_try_acquire('fx_x', '1 minute') IS NULL AS xact_refused;
COMMIT;
SELECT rlock_release('fx_x', owner => 'fx_other');

-- the pattern: a job stores its token with what it writes, and a write
-- carrying an older token than the one stored is refused
CREATE TABLE fx_report (id int PRIMARY KEY, body text, token bigint NOT NULL);
CREATE FUNCTION fx_refuse_stale() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.token < (SELECT coalesce(max(token), 0) FROM fx_report) THEN
    RAISE EXCEPTION 'stale fencing token: a newer holder of the lock has written';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER fx_fence BEFORE INSERT OR UPDATE ON fx_report
  FOR EACH ROW EXECUTE FUNCTION fx_refuse_stale();
SELECT rlock_fenced_acquire('fx_job', '1 minute', owner => 'fx_old_run') AS old_token \gset
SELECT rlock_force_release('fx_job');   -- the old run lost its lock (say, a pause)
SELECT rlock_fenced_acquire('fx_job', '1 minute') AS new_token \gset
INSERT INTO fx_report VALUES (1, 'written by the new run', :new_token);
INSERT INTO fx_report VALUES (2, 'written late by the old run', :old_token);
SELECT id, body FROM fx_report;
SELECT rlock_release('fx_job');
DROP TABLE fx_report;
DROP FUNCTION fx_refuse_stale();

-- a name used by a read/write lock is not taken as a fenced lock
\! redis-cli -u "$RLOCK_REDIS_URL" HSET fx_rw mode read > /dev/null
SELECT rlock_fenced_try_acquire('fx_rw', '1 minute');
\! redis-cli -u "$RLOCK_REDIS_URL" DEL fx_rw > /dev/null

-- arguments are checked as for the exclusive lock
SELECT rlock_fenced_acquire(NULL, '1 minute');
SELECT rlock_fenced_try_acquire('fx_a', '-1 s');
SELECT rlock_fenced_try_acquire('fx_a', '1 minute', NULL);
SELECT rlock_fenced_token(NULL);
