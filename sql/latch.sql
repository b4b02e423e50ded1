-- Count-down latches (SPEC.md 5.5, Redisson's RCountDownLatch): a count in a
-- string key, "1" and "0" on redisson_countdownlatch__channel__{name}.  Java
-- clients are played by redis-cli.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS rlock;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never
SELECT current_setting('rlock.redis_url') AS redis_url \gset
\setenv RLOCK_REDIS_URL :redis_url
\! redis-cli -u "$RLOCK_REDIS_URL" DEL lt_a lt_b lt_big lt_java '{lt_java}:rlock_latch' lt_zero lt_str lt_list lt_lock lt_m lt_two lt_done lt_sem '{lt_sem}:timeout' > /dev/null

-- an absent latch is at zero: await returns at once, count_down is harmless
SELECT rlock_latch_count('lt_a');
SELECT rlock_latch_await('lt_a');
SELECT rlock_latch_await('lt_a', '0');
SELECT rlock_latch_count_down('lt_a');
\! redis-cli -u "$RLOCK_REDIS_URL" EXISTS lt_a

-- set a count, count it down to zero: the key goes away at zero
SELECT rlock_latch_set_count('lt_a', 3);
\! redis-cli -u "$RLOCK_REDIS_URL" GET lt_a
SELECT rlock_latch_count('lt_a');
-- a latch that is counting takes no new count
SELECT rlock_latch_set_count('lt_a', 5) AS counting_refused;
SELECT rlock_latch_count('lt_a');
SELECT rlock_latch_await('lt_a', '0') AS not_yet;
SELECT rlock_latch_await('lt_a', '50 ms') AS timed_out;
SELECT rlock_latch_count_down('lt_a');
SELECT rlock_latch_count_down('lt_a');
SELECT rlock_latch_count_down('lt_a');
\! redis-cli -u "$RLOCK_REDIS_URL" EXISTS lt_a
SELECT rlock_latch_count('lt_a'), rlock_latch_await('lt_a');
-- below zero is harmless, and leaves no key
SELECT rlock_latch_count_down('lt_a');
\! redis-cli -u "$RLOCK_REDIS_URL" EXISTS lt_a
-- at zero it takes a new count again
SELECT rlock_latch_set_count('lt_a', 1);
SELECT rlock_latch_count_down('lt_a');
-- a count of 0 is accepted and leaves the latch at zero
SELECT rlock_latch_set_count('lt_zero', 0);
\! redis-cli -u "$RLOCK_REDIS_URL" EXISTS lt_zero

-- counts up to bigint's limit are kept exactly
SELECT rlock_latch_set_count('lt_big', 9223372036854775807);
SELECT rlock_latch_count('lt_big');
SELECT rlock_latch_count_down('lt_big');
\! redis-cli -u "$RLOCK_REDIS_URL" DEL lt_big > /dev/null

-- a latch a Java client set (trySetCount writes the count as text): a
-- superuser's count-down adopts it (marks it rlock's; test/privileges
-- shows a plain role refused); and one it left at 0, which reads as zero
-- but is never overwritten (a key at 0 or below is not a live latch)
\! redis-cli -u "$RLOCK_REDIS_URL" SET lt_java 2 > /dev/null
SELECT rlock_latch_count('lt_java'), rlock_latch_set_count('lt_java', 7);
SELECT rlock_latch_count_down('lt_java');
\! redis-cli -u "$RLOCK_REDIS_URL" GET lt_java
\! redis-cli -u "$RLOCK_REDIS_URL" SET lt_java 0 > /dev/null
SELECT rlock_latch_count('lt_java'), rlock_latch_await('lt_java');
SELECT rlock_latch_set_count('lt_java', 2);
\! redis-cli -u "$RLOCK_REDIS_URL" GET lt_java
\! redis-cli -u "$RLOCK_REDIS_URL" DEL lt_java '{lt_java}:rlock_latch' > /dev/null

-- the messages on the channel ("0" zero reached, "1" a new count) are
-- hints: the await reads the count on each, and answers true only at
-- zero (anyone may PUBLISH "0" while the count is 2: it waits on).  A
-- Java client is played by redis-cli, which publishes once the waiter has
-- subscribed.
\! redis-cli -u "$RLOCK_REDIS_URL" SET lt_m 2 > /dev/null
\! (for i in $(seq 400); do [ "$(redis-cli -u "$RLOCK_REDIS_URL" PUBSUB NUMSUB 'redisson_countdownlatch__channel__{lt_m}' | tail -1)" -ge 1 ] && break; sleep 0.05; done; redis-cli -u "$RLOCK_REDIS_URL" PUBLISH 'redisson_countdownlatch__channel__{lt_m}' 0 > /dev/null) &
SELECT rlock_latch_await('lt_m', '2 s') AS answered_true, rlock_latch_count('lt_m');
-- (the count dropped to zero without a message; "1" makes the waiter look)
\! (for i in $(seq 400); do [ "$(redis-cli -u "$RLOCK_REDIS_URL" PUBSUB NUMSUB 'redisson_countdownlatch__channel__{lt_m}' | tail -1)" -ge 1 ] && break; sleep 0.05; done; redis-cli -u "$RLOCK_REDIS_URL" DEL lt_m > /dev/null; redis-cli -u "$RLOCK_REDIS_URL" PUBLISH 'redisson_countdownlatch__channel__{lt_m}' 1 > /dev/null) &
SELECT rlock_latch_await('lt_m', '3 s') AS woken_by_new_count, rlock_latch_count('lt_m');

-- every waiter wakes on the one count-down to zero: two other sessions
-- await lt_two, and each counts lt_done down once woken
SELECT current_database() AS db \gset
\setenv RLOCK_DB :db
SELECT rlock_latch_set_count('lt_two', 1), rlock_latch_set_count('lt_done', 2);
\! for i in 1 2; do PGAPPNAME=rlock_lt_waiter psql -X -q -d "$RLOCK_DB" -c "SELECT rlock_latch_await('lt_two', '30 s') AND rlock_latch_count_down('lt_done') >= 0" > /dev/null 2>&1 & done
-- (both subscribed first: a waiter's own round trips are Extension waits too)
\! for i in $(seq 600); do [ "$(redis-cli -u "$RLOCK_REDIS_URL" PUBSUB NUMSUB 'redisson_countdownlatch__channel__{lt_two}' | tail -1)" -ge 2 ] && break; sleep 0.05; done
DO $$
BEGIN
	FOR i IN 1..3000 LOOP
		EXIT WHEN (SELECT count(*) FROM pg_stat_activity
				   WHERE application_name = 'rlock_lt_waiter'
					 AND wait_event_type = 'Extension') = 2;
		PERFORM pg_sleep(0.01);
		PERFORM pg_stat_clear_snapshot();	-- (read anew each time)
	END LOOP;
END $$;
SELECT count(*) AS waiting FROM pg_stat_activity
 WHERE application_name = 'rlock_lt_waiter' AND wait_event_type = 'Extension';
SELECT rlock_latch_count('lt_done') AS not_woken_yet;
SELECT rlock_latch_count_down('lt_two');
SELECT rlock_latch_await('lt_done', '20 s') AS both_woke, rlock_latch_count('lt_done');

-- bad arguments: clear errors naming the latch
SELECT rlock_latch_set_count('lt_b', -1);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_latch_set_count('lt_b', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_latch_set_count(NULL, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_latch_count_down(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_latch_count('');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_latch_await(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_latch_await('lt_b', '-1 s');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_latch_await('lt_b', '2 years');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_latch_count(repeat('x', 2000));
\echo :LAST_ERROR_SQLSTATE
-- derived keys are refused as names, of latches as of locks
SELECT rlock_latch_set_count('redisson_countdownlatch__channel__{lt_b}', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_latch_count('redisson_sc:{lt_b}');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_latch_count('{lt_b}:timeout');
\echo :LAST_ERROR_SQLSTATE
-- ... a semaphore's marker too (else counting it down would unmark it)
SELECT rlock_latch_count_down('{lt_b}:rlock_semaphore');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_latch_set_count('{lt_b}:rlock_semaphore', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_try_acquire('redisson_countdownlatch__channel__{lt_b}', '1s');
\echo :LAST_ERROR_SQLSTATE
\! redis-cli -u "$RLOCK_REDIS_URL" EXISTS lt_b

-- a name is one kind: a latch call on a lock, and a lock call on a latch
SELECT rlock_acquire('lt_lock', '1 minute');
SELECT rlock_latch_count('lt_lock');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_latch_set_count('lt_lock', 2);
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_latch_count_down('lt_lock');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_latch_await('lt_lock', '1 s');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_hold_count('lt_lock'), rlock_release('lt_lock');
SELECT rlock_latch_set_count('lt_a', 2);
SELECT rlock_try_acquire('lt_a', '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_latch_count('lt_a');
-- ... a semaphore's (its permits out)
\! redis-cli -u "$RLOCK_REDIS_URL" SET lt_sem 2 > /dev/null
\! redis-cli -u "$RLOCK_REDIS_URL" ZADD '{lt_sem}:timeout' 99999999999999 some-permit > /dev/null
SELECT rlock_latch_count_down('lt_sem');
\echo :LAST_ERROR_SQLSTATE
\! redis-cli -u "$RLOCK_REDIS_URL" GET lt_sem
\! redis-cli -u "$RLOCK_REDIS_URL" DEL lt_sem '{lt_sem}:timeout' > /dev/null
-- a latch whose count runs is no semaphore: the semaphore calls refuse it
-- (they would take or read its count as permits) and leave it counting
SELECT rlock_latch_set_count('lt_perm', 3);
SELECT rlock_semaphore_try_acquire('lt_perm');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_semaphore_available('lt_perm');
SELECT rlock_semaphore_add_permits('lt_perm', 1);
SELECT rlock_semaphore_set_permits('lt_perm', 5);
SELECT rlock_latch_count('lt_perm');
-- at zero it is no latch any more: the name is free again
SELECT rlock_latch_count_down('lt_perm'), rlock_latch_count_down('lt_perm'),
       rlock_latch_count_down('lt_perm');
\! redis-cli -u "$RLOCK_REDIS_URL" EXISTS lt_perm '{lt_perm}:rlock_latch'
SELECT rlock_semaphore_set_permits('lt_perm', 1), rlock_semaphore_available('lt_perm');
\! redis-cli -u "$RLOCK_REDIS_URL" DEL lt_perm '{lt_perm}:rlock_semaphore' > /dev/null
-- a latch whose count Redisson ended (or deleted) leaves its marker: the
-- semaphore calls drop it, and the name is free
SELECT rlock_latch_set_count('lt_gone', 2);
\! redis-cli -u "$RLOCK_REDIS_URL" DEL lt_gone > /dev/null
SELECT rlock_semaphore_set_permits('lt_gone', 1);
\! redis-cli -u "$RLOCK_REDIS_URL" EXISTS '{lt_gone}:rlock_latch'
\! redis-cli -u "$RLOCK_REDIS_URL" DEL lt_gone '{lt_gone}:rlock_semaphore' > /dev/null
-- a latch's marker is no name
SELECT rlock_latch_set_count('{lt_perm}:rlock_latch', 1);
\echo :LAST_ERROR_SQLSTATE
-- ... and other Redis values, touched by no latch call
\! redis-cli -u "$RLOCK_REDIS_URL" SET lt_str 'not a count' > /dev/null
SELECT rlock_latch_count('lt_str');
\echo :LAST_ERROR_SQLSTATE
SELECT rlock_latch_set_count('lt_str', 1);
\echo :LAST_ERROR_SQLSTATE
\! redis-cli -u "$RLOCK_REDIS_URL" RPUSH lt_list x > /dev/null
SELECT rlock_latch_count_down('lt_list');
\echo :LAST_ERROR_SQLSTATE
\! redis-cli -u "$RLOCK_REDIS_URL" GET lt_str
\! redis-cli -u "$RLOCK_REDIS_URL" LLEN lt_list
\! redis-cli -u "$RLOCK_REDIS_URL" DEL lt_a lt_str lt_list > /dev/null

-- the session is fine after all of that
SELECT rlock_latch_set_count('lt_a', 1), rlock_latch_count_down('lt_a');
-- introspection: a latch is a count, never locked or held
SELECT rlock_latch_set_count('lt_i', 3);
SELECT rlock_is_locked('lt_i'), rlock_is_held('lt_i'), rlock_hold_count('lt_i'),
       rlock_remaining_lease('lt_i'), (SELECT count(*) FROM rlock_status('lt_i'));
\! redis-cli -u "$RLOCK_REDIS_URL" DEL lt_i > /dev/null
-- a latch is never held: nothing of it in rlock_locks
SELECT count(*) FROM rlock_locks WHERE pid = pg_backend_pid();
