-- Semaphores (SPEC.md 5.5, Redisson's RPermitExpirableSemaphore): the
-- permits available in a string key, the permits out in {name}:timeout
-- (ids scored by expiry), redisson_sc:{name} announcing permits that come
-- back.  The permits a session takes are held like locks.  A Java client
-- is played by redis-cli.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS rlock;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never
SELECT current_setting('rlock.redis_url') AS redis_url \gset
\setenv RLOCK_REDIS_URL :redis_url
\! redis-cli -u "$RLOCK_REDIS_URL" DEL sm_a '{sm_a}:timeout' sm_b '{sm_b}:timeout' sm_j '{sm_j}:timeout' sm_lock sm_str sm_q '{sm_q}:timeout' sm_q_done sm_i '{sm_i}:timeout' > /dev/null

-- permits are set once (trySetPermits), added to or taken away
SELECT rlock_semaphore_available('sm_a');
SELECT rlock_semaphore_set_permits('sm_a', 3);
SELECT rlock_semaphore_set_permits('sm_a', 5) AS set_again_refused;
\! redis-cli -u "$RLOCK_REDIS_URL" GET sm_a
SELECT rlock_semaphore_add_permits('sm_a', 2);
SELECT rlock_semaphore_available('sm_a');
SELECT rlock_semaphore_add_permits('sm_a', -2);
SELECT rlock_semaphore_available('sm_a');

-- taking permits: each is a permit id <holder>:<k> scored by its expiry
SELECT rlock_semaphore_try_acquire('sm_a');
SELECT rlock_semaphore_try_acquire('sm_a', 2, '1 minute') AS two_more;
SELECT rlock_semaphore_available('sm_a');
SELECT rlock_semaphore_try_acquire('sm_a') AS none_left;
SELECT rlock_semaphore_try_acquire('sm_a', 1, NULL, '50 ms') AS none_after_wait;
\! redis-cli -u "$RLOCK_REDIS_URL" ZRANGE '{sm_a}:timeout' 0 -1 | sed 's/^[^:]*:[^:]*:/<holder>:/'
SELECT kind, scope, hold_count, state FROM rlock_locks WHERE name = 'sm_a';
-- more than the semaphore has in all is an error, not a wait
SELECT rlock_semaphore_try_acquire('sm_a', 4);
\echo :LAST_ERROR_SQLSTATE
-- ... but a wait waits for permits to be added (here until lock_timeout)
SET lock_timeout = '50ms';
SELECT rlock_semaphore_acquire('sm_a', 4);
RESET lock_timeout;
\echo :LAST_ERROR_SQLSTATE

-- giving permits back: the highest-numbered first
SELECT rlock_semaphore_release('sm_a');
\! redis-cli -u "$RLOCK_REDIS_URL" ZRANGE '{sm_a}:timeout' 0 -1 | sed 's/^[^:]*:[^:]*:/<holder>:/'
SELECT rlock_semaphore_available('sm_a');
SELECT rlock_semaphore_release('sm_a', 3) AS more_than_held;
SELECT rlock_semaphore_release('sm_a', 2);
SELECT rlock_semaphore_available('sm_a');
SELECT rlock_semaphore_release('sm_a') AS not_held;
SELECT count(*) FROM rlock_locks WHERE name = 'sm_a';
\! redis-cli -u "$RLOCK_REDIS_URL" EXISTS '{sm_a}:timeout'

-- transaction permits: given back at COMMIT, at ROLLBACK, and those taken
-- after a savepoint at ROLLBACK TO it; they cannot be released by hand
BEGIN;
SELECT rlock_semaphore_xact_acquire('sm_a', 2);
SELECT rlock_semaphore_available('sm_a');
SELECT kind, scope, hold_count FROM rlock_locks WHERE name = 'sm_a';
SELECT rlock_semaphore_release('sm_a') AS xact_not_released_by_hand;
COMMIT;
SELECT rlock_semaphore_available('sm_a');
BEGIN;
SELECT rlock_semaphore_xact_try_acquire('sm_a');
SAVEPOINT sp;
SELECT rlock_semaphore_xact_try_acquire('sm_a', 2, '1 minute');
SELECT rlock_semaphore_available('sm_a');
ROLLBACK TO sp;
SELECT rlock_semaphore_available('sm_a'), hold_count FROM rlock_locks WHERE name = 'sm_a';
ROLLBACK;
SELECT rlock_semaphore_available('sm_a');
-- session permits survive ROLLBACK; session and transaction permits stack
BEGIN;
SELECT rlock_semaphore_acquire('sm_a');
SELECT rlock_semaphore_xact_acquire('sm_a');
SELECT hold_count FROM rlock_locks WHERE name = 'sm_a';
ROLLBACK;
SELECT rlock_semaphore_available('sm_a'), hold_count FROM rlock_locks WHERE name = 'sm_a';
SELECT rlock_release_all();
SELECT rlock_semaphore_available('sm_a');

-- a Java client's permit whose lease ran out counts as available when
-- someone reads (which writes nothing), and comes back to the semaphore
-- when someone next takes permits; one that has not stays out
\! redis-cli -u "$RLOCK_REDIS_URL" SET sm_j 1 > /dev/null
\! redis-cli -u "$RLOCK_REDIS_URL" ZADD '{sm_j}:timeout' 1000 0123456789abcdef0123456789abcdef 99999999999999 fedcba9876543210fedcba9876543210 > /dev/null
SELECT rlock_semaphore_available('sm_j');
\! redis-cli -u "$RLOCK_REDIS_URL" ZRANGE '{sm_j}:timeout' 0 -1
SELECT rlock_semaphore_try_acquire('sm_j', 2, '1 minute');
SELECT rlock_semaphore_try_acquire('sm_j', 3, '1 minute') AS three_of_three_refused;
SELECT rlock_semaphore_try_acquire('sm_j', 4, '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_semaphore_release('sm_j', 2);

-- permits taken without a lease are renewed by the watchdog
-- (rlock.watchdog_timeout is 2 s in this suite) ...
CREATE FUNCTION sem_renewed(n text) RETURNS boolean LANGUAGE plpgsql AS $$
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
SELECT rlock_semaphore_acquire('sm_a', 2);
SELECT sem_renewed('sm_a') AS renewed, pg_sleep(2.5);
SELECT kind, hold_count, state, lease FROM rlock_locks WHERE name = 'sm_a';
SELECT rlock_semaphore_available('sm_a') AS still_out;
\! redis-cli -u "$RLOCK_REDIS_URL" ZCARD '{sm_a}:timeout'
-- ... and reported lost when Redis no longer has them
\! redis-cli -u "$RLOCK_REDIS_URL" DEL '{sm_a}:timeout' > /dev/null
\! redis-cli -u "$RLOCK_REDIS_URL" INCRBY sm_a 2 > /dev/null
DO $$
BEGIN
  FOR i IN 1 .. 600 LOOP
    EXIT WHEN EXISTS (SELECT FROM rlock_locks WHERE name = 'sm_a' AND state = 'lost');
    PERFORM pg_sleep(0.05);
  END LOOP;
END $$;
SELECT kind, hold_count, state FROM rlock_locks WHERE name = 'sm_a';
SELECT rlock_semaphore_release('sm_a', 2) AS release_of_lost;
SELECT count(*) FROM rlock_locks WHERE name = 'sm_a';
SELECT rlock_semaphore_available('sm_a');
-- ... also when only one of them is gone
SELECT rlock_holder_id() AS hid \gset
\setenv RLOCK_HID :hid
SELECT rlock_semaphore_acquire('sm_a', 2);
\! redis-cli -u "$RLOCK_REDIS_URL" ZREM '{sm_a}:timeout' "$RLOCK_HID:2"
\! redis-cli -u "$RLOCK_REDIS_URL" INCRBY sm_a 1 > /dev/null
DO $$
BEGIN
  FOR i IN 1 .. 600 LOOP
    EXIT WHEN EXISTS (SELECT FROM rlock_locks WHERE name = 'sm_a' AND state = 'lost');
    PERFORM pg_sleep(0.05);
  END LOOP;
END $$;
SELECT kind, hold_count, state FROM rlock_locks WHERE name = 'sm_a';
SELECT rlock_semaphore_release('sm_a', 2) AS release_of_lost;
SELECT rlock_semaphore_available('sm_a') AS the_other_given_back;
-- ... and by the next call itself, before the watchdog looks (it looks at
-- permits with a fixed lease once they are older than a third of
-- rlock.watchdog_timeout): one of two permits taken away, one given back
SELECT rlock_semaphore_acquire('sm_a', 2, '1 minute');
\! redis-cli -u "$RLOCK_REDIS_URL" ZREM '{sm_a}:timeout' "$RLOCK_HID:1" > /dev/null
\! redis-cli -u "$RLOCK_REDIS_URL" INCRBY sm_a 1 > /dev/null
-- (terse: the session or the worker may be first to see the loss)
\set VERBOSITY terse
SELECT rlock_semaphore_release('sm_a') AS release_after_one_taken_away;
\set VERBOSITY default
SELECT count(*) FROM rlock_locks WHERE name = 'sm_a';
SELECT rlock_semaphore_available('sm_a') AS all_back;
-- a session's permits share one expiry, as a lock's holds do: one taken
-- with a shorter lease than the others keeps theirs (none of them runs
-- out while the session believes it held), one taken with a longer lease
-- extends them all
SELECT rlock_semaphore_acquire('sm_a', 1, '1 minute');
SELECT rlock_semaphore_acquire('sm_a', 1, '100 ms');
SELECT pg_sleep(0.3);
SELECT rlock_semaphore_available('sm_a') AS both_still_out;
\! redis-cli -u "$RLOCK_REDIS_URL" ZRANGE '{sm_a}:timeout' 0 -1 WITHSCORES | awk 'NR % 2 == 0' | sort -u | wc -l
SELECT rlock_semaphore_release('sm_a', 2) AS both_given_back;
SELECT rlock_semaphore_acquire('sm_a', 1, '100 ms');
SELECT rlock_semaphore_acquire('sm_a', 1, '1 minute');
SELECT pg_sleep(0.3);
SELECT rlock_semaphore_available('sm_a') AS both_still_out;
SELECT rlock_semaphore_release('sm_a', 2) AS both_given_back;
SELECT count(*) FROM rlock_locks WHERE name = 'sm_a';
SELECT rlock_semaphore_available('sm_a') AS all_back;
-- ... and COMMIT is refused when transaction permits were lost (checked
-- in Redis before COMMIT, whether or not the watchdog saw it yet)
BEGIN;
SELECT rlock_semaphore_xact_acquire('sm_a', 2, '1 hour');
\! redis-cli -u "$RLOCK_REDIS_URL" ZREM '{sm_a}:timeout' "$RLOCK_HID:1" > /dev/null
\! redis-cli -u "$RLOCK_REDIS_URL" INCRBY sm_a 1 > /dev/null
COMMIT;
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM rlock_locks WHERE name = 'sm_a';
SELECT rlock_semaphore_available('sm_a') AS all_back_after_rollback;

-- a waiter that wants more permits than came back lets the next waiter,
-- which asks for fewer, look at once (two other sessions, the first asking
-- for 2, the second for 1; the permits out have an hour's lease, so no
-- waiter looks on its own for 5 s)
CREATE FUNCTION sem_waiters(n int) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  c bigint;
BEGIN
  FOR i IN 1 .. 3000 LOOP
    SELECT count(*) INTO c FROM pg_stat_activity
     WHERE application_name LIKE 'rlock_sm_%' AND wait_event_type = 'Extension';
    EXIT WHEN c >= n;
    PERFORM pg_sleep(0.01);
    PERFORM pg_stat_clear_snapshot();	-- (read anew each time)
  END LOOP;
  RETURN c;
END $$;
SELECT current_database() AS db \gset
\setenv RLOCK_DB :db
SELECT rlock_semaphore_set_permits('sm_q', 2), rlock_latch_set_count('sm_q_done', 1);
SELECT rlock_semaphore_try_acquire('sm_q', 2, '1 hour');
\! PGAPPNAME=rlock_sm_big psql -X -q -d "$RLOCK_DB" -c "SELECT rlock_semaphore_try_acquire('sm_q', 2, '1 hour', '30 s')" > /dev/null 2>&1 &
SELECT sem_waiters(1) AS first_waits;
\! PGAPPNAME=rlock_sm_small psql -X -q -d "$RLOCK_DB" -c "SELECT rlock_semaphore_try_acquire('sm_q', 1, '1 hour', '30 s') AND rlock_latch_count_down('sm_q_done') >= 0" > /dev/null 2>&1 &
SELECT sem_waiters(2) AS both_wait;
-- (both subscribed, and a second more for their attempts after subscribing)
\! for i in $(seq 400); do [ "$(redis-cli -u "$RLOCK_REDIS_URL" PUBSUB NUMSUB 'redisson_sc:{sm_q}' | tail -1)" -ge 2 ] && break; sleep 0.05; done
SELECT pg_sleep(1);
SELECT rlock_semaphore_release('sm_q');
SELECT rlock_latch_await('sm_q_done', '2.5 s') AS second_took_the_one;
SELECT rlock_semaphore_release('sm_q');
-- (the first takes its 2 once the second has ended; then it ends too)
DO $$
BEGIN
  FOR i IN 1 .. 3000 LOOP
    EXIT WHEN rlock_semaphore_available('sm_q') = 2 AND NOT EXISTS
      (SELECT FROM pg_stat_activity WHERE application_name LIKE 'rlock_sm_%');
    PERFORM pg_sleep(0.01);
    PERFORM pg_stat_clear_snapshot();
  END LOOP;
END $$;
SELECT rlock_semaphore_available('sm_q') AS all_back;

-- bad arguments: clear errors naming the semaphore
SELECT rlock_semaphore_try_acquire('sm_b', 0);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_semaphore_try_acquire('sm_b', -1);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_semaphore_try_acquire('sm_b', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_semaphore_try_acquire('sm_b', 20000);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_semaphore_try_acquire('sm_b', 1, '0.5 ms');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_semaphore_try_acquire('sm_b', 1, '0');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_semaphore_try_acquire('sm_b', 1, NULL, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_semaphore_acquire(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_semaphore_release('sm_b', 0);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_semaphore_set_permits('sm_b', 0);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_semaphore_set_permits('sm_b', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_semaphore_add_permits('', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_semaphore_available('redisson_sc:{sm_b}');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_semaphore_available('{sm_b}:timeout');
\echo :LAST_ERROR_SQLSTATE
\! redis-cli -u "$RLOCK_REDIS_URL" EXISTS sm_b

-- a name is one kind: a semaphore call on a lock, a lock call on a
-- semaphore, and other Redis values, which no call changes
SELECT rlock_acquire('sm_lock', '1 minute');
SELECT rlock_semaphore_try_acquire('sm_lock');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_semaphore_add_permits('sm_lock', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_semaphore_available('sm_lock');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_release('sm_lock');
SELECT rlock_try_acquire('sm_a', '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_semaphore_try_acquire('sm_a');
SELECT rlock_try_acquire('sm_a', '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_semaphore_release('sm_a');
\! redis-cli -u "$RLOCK_REDIS_URL" SET sm_str 'not permits' > /dev/null
SELECT rlock_semaphore_try_acquire('sm_str');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_semaphore_set_permits('sm_str', 1);
\echo :LAST_ERROR_SQLSTATE
\! redis-cli -u "$RLOCK_REDIS_URL" GET sm_str
-- introspection understands a semaphore: who holds how many permits (a
-- Java client's permit id in hex, masked as an owner token is), this
-- session's permits, the lease left of the permit that expires first; a
-- semaphore with no permit out is not locked
SELECT rlock_semaphore_set_permits('sm_i', 4);
SELECT rlock_semaphore_acquire('sm_i', 2, '10 min');
\! redis-cli -u "$RLOCK_REDIS_URL" ZADD '{sm_i}:timeout' 922337203685477 "$(printf 'java\001permit\377id')" > /dev/null
\! redis-cli -u "$RLOCK_REDIS_URL" DECR sm_i > /dev/null
SELECT rlock_is_locked('sm_i'), rlock_is_held('sm_i'), rlock_hold_count('sm_i'),
       rlock_remaining_lease('sm_i') BETWEEN '9 min' AND '10 min';
SELECT kind, holder = rlock_holder_id() AS mine, hold_count,
       remaining_lease BETWEEN '9 min' AND '10 min' AS lease_ok
  FROM rlock_status('sm_i') ORDER BY mine;
CREATE ROLE regress_sem_plain;
SET ROLE regress_sem_plain;
SELECT kind, holder, hold_count FROM rlock_status('sm_i') WHERE holder <> rlock_holder_id();
RESET ROLE;
DROP ROLE regress_sem_plain;
SELECT rlock_semaphore_release('sm_i', 2);
SELECT rlock_is_locked('sm_i'), rlock_is_held('sm_i'), rlock_hold_count('sm_i'),
       rlock_remaining_lease('sm_i');
SELECT kind, hold_count, remaining_lease FROM rlock_status('sm_i');
\! redis-cli -u "$RLOCK_REDIS_URL" DEL '{sm_i}:timeout' > /dev/null
SELECT rlock_is_locked('sm_i'), rlock_hold_count('sm_i'), count(*) FROM rlock_status('sm_i');
-- a lock call that would change the semaphore is still refused
SELECT rlock_force_release('sm_i');
\echo :LAST_ERROR_SQLSTATE
-- all of a session's permits expire together, at the latest lease it was
-- promised: a second, shorter lease does not leave a permit to run out
-- while the session still counts it
SELECT rlock_semaphore_set_permits('sm_e', 3);
SELECT rlock_semaphore_acquire('sm_e', 1, '1 hour');
SELECT rlock_semaphore_acquire('sm_e', 1, '2 seconds');
\! redis-cli -u "$RLOCK_REDIS_URL" ZRANGE '{sm_e}:timeout' 0 -1 WITHSCORES | awk 'NR % 2 == 0' | sort -u | wc -l
SELECT rlock_hold_count('sm_e'), rlock_remaining_lease('sm_e') > '59 min';
-- asking for more than the semaphore has beside this session's own
-- permits would wait for them: an ERROR at once
SET statement_timeout = '5s';
SELECT rlock_semaphore_acquire('sm_e', 2);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_semaphore_try_acquire('sm_e', 2, wait => '1 min');
\echo :LAST_ERROR_SQLSTATE
RESET statement_timeout;
-- a try that does not wait just fails
SELECT rlock_semaphore_try_acquire('sm_e', 2);
-- a release finds one of its permits gone (taken away in Redis): lost,
-- reported, and what is left of them given back
\! redis-cli -u "$RLOCK_REDIS_URL" ZRANGE '{sm_e}:timeout' 0 0 | xargs redis-cli -u "$RLOCK_REDIS_URL" ZREM '{sm_e}:timeout' > /dev/null
-- (terse: the session or the worker may be first to see the loss)
\set VERBOSITY terse
SELECT rlock_semaphore_release('sm_e', 1);
\set VERBOSITY default
SELECT rlock_hold_count('sm_e'), rlock_semaphore_available('sm_e');
\! redis-cli -u "$RLOCK_REDIS_URL" ZCARD '{sm_e}:timeout'
-- the same when the release asks for every permit the session counts
SELECT rlock_semaphore_set_permits('sm_f', 2);
SELECT rlock_semaphore_acquire('sm_f', 2);
\! redis-cli -u "$RLOCK_REDIS_URL" ZRANGE '{sm_f}:timeout' 0 0 | xargs redis-cli -u "$RLOCK_REDIS_URL" ZREM '{sm_f}:timeout' > /dev/null
-- (terse: the session or the worker may be first to see the loss)
\set VERBOSITY terse
SELECT rlock_semaphore_release('sm_f', 2);
\set VERBOSITY default
SELECT rlock_hold_count('sm_f'), rlock_semaphore_available('sm_f');
\! redis-cli -u "$RLOCK_REDIS_URL" ZCARD '{sm_f}:timeout'
\! redis-cli -u "$RLOCK_REDIS_URL" DEL sm_f '{sm_f}:timeout' > /dev/null
-- permits stay within an integer (rlock_semaphore_available returns one):
-- an add beyond is refused, either way; one back toward it is not
\! redis-cli -u "$RLOCK_REDIS_URL" SET sm_e 2147483647 > /dev/null
SELECT rlock_semaphore_add_permits('sm_e', 1);
\echo :LAST_ERROR_SQLSTATE
\! redis-cli -u "$RLOCK_REDIS_URL" GET sm_e
SELECT rlock_semaphore_available('sm_e');
-- ... the permits out counted, which come back
\! redis-cli -u "$RLOCK_REDIS_URL" SET sm_e 2147483640 > /dev/null
\! redis-cli -u "$RLOCK_REDIS_URL" ZADD '{sm_e}:timeout' 99999999999999 o1 99999999999999 o2 99999999999999 o3 > /dev/null
SELECT rlock_semaphore_add_permits('sm_e', 5);
\! redis-cli -u "$RLOCK_REDIS_URL" GET sm_e
\! redis-cli -u "$RLOCK_REDIS_URL" DEL '{sm_e}:timeout' > /dev/null
\! redis-cli -u "$RLOCK_REDIS_URL" SET sm_e -2147483000 > /dev/null
SELECT rlock_semaphore_add_permits('sm_e', -1000);
\! redis-cli -u "$RLOCK_REDIS_URL" GET sm_e
\! redis-cli -u "$RLOCK_REDIS_URL" SET sm_e 999999999999000 > /dev/null
SELECT rlock_semaphore_add_permits('sm_e', 2147483647);
SELECT rlock_semaphore_add_permits('sm_e', -999999999);
\! redis-cli -u "$RLOCK_REDIS_URL" GET sm_e
\! redis-cli -u "$RLOCK_REDIS_URL" DEL sm_e '{sm_e}:timeout' > /dev/null
-- the session holds nothing after all of that
SELECT count(*) FROM rlock_locks WHERE pid = pg_backend_pid();
\! redis-cli -u "$RLOCK_REDIS_URL" DEL sm_a '{sm_a}:timeout' sm_b sm_j '{sm_j}:timeout' sm_lock sm_str sm_q '{sm_q}:timeout' sm_q_done sm_i '{sm_i}:timeout' > /dev/null
