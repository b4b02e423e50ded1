-- Latches and semaphores, absent is not done and their lifecycle (SPEC.md
-- 5.5): an absent latch awaited with must_exist is an ERROR (55000), a
-- count-down on it a WARNING; rlock_latch_delete and rlock_semaphore_delete
-- remove only what rlock set (an application's key under the name is
-- refused, never deleted) and are not PUBLIC's; rlock_latch_set_count takes
-- an expiry.  (Expiry and waking waiters: test/t/055_latch_lifecycle.pl.)
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS rlock;
DROP ROLE IF EXISTS rlock_ll_plain;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never
SELECT current_setting('rlock.redis_url') AS redis_url \gset
\setenv RLOCK_REDIS_URL :redis_url
\! redis-cli -u "$RLOCK_REDIS_URL" DEL ll_a '{ll_a}:rlock_latch' ll_app ll_sem '{ll_sem}:timeout' '{ll_sem}:rlock_semaphore' ll_semapp ll_exp '{ll_exp}:rlock_latch' ll_lock > /dev/null

-- never armed: without must_exist it looks done, with it it is an ERROR
SELECT rlock_latch_await('ll_a', '10 seconds') AS absent_looks_done;
SELECT rlock_latch_await('ll_a', '10 seconds', must_exist => true);
SELECT rlock_latch_await('ll_a', '0', true);
-- counting it down changes nothing, and says so
SELECT rlock_latch_count_down('ll_a');
\! redis-cli -u "$RLOCK_REDIS_URL" EXISTS ll_a
-- must_exist on a latch that is counting: it waits as before
SELECT rlock_latch_set_count('ll_a', 2);
SELECT rlock_latch_await('ll_a', '0', true) AS not_yet;
SELECT rlock_latch_count_down('ll_a');
SELECT rlock_latch_count_down('ll_a');
-- reached zero: the key is gone, so it is absent again
SELECT rlock_latch_await('ll_a', '0', true);
SELECT rlock_latch_await('ll_a', '0') AS done;
-- must_exist NULL is refused
SELECT rlock_latch_await('ll_a', '0', NULL);

-- rlock_latch_delete: the count and its marker go; false when absent
SELECT rlock_latch_set_count('ll_a', 5);
\! redis-cli -u "$RLOCK_REDIS_URL" EXISTS ll_a '{ll_a}:rlock_latch'
SELECT rlock_latch_delete('ll_a') AS existed;
\! redis-cli -u "$RLOCK_REDIS_URL" EXISTS ll_a '{ll_a}:rlock_latch'
SELECT rlock_latch_delete('ll_a') AS existed;
SELECT rlock_latch_count('ll_a');
-- an application's integer key under the name is refused, never deleted
\! redis-cli -u "$RLOCK_REDIS_URL" SET ll_app 7 > /dev/null
SELECT rlock_latch_delete('ll_app');
\! redis-cli -u "$RLOCK_REDIS_URL" GET ll_app
-- and a lock or a semaphore is not a latch to delete
SELECT rlock_acquire('ll_lock', '1 min');
SELECT rlock_latch_delete('ll_lock');
SELECT rlock_release('ll_lock');
SELECT rlock_semaphore_set_permits('ll_sem', 2);
SELECT rlock_latch_delete('ll_sem');

-- rlock_semaphore_delete: permits key, permits out and marker go
SELECT rlock_semaphore_acquire('ll_sem', 1, '10 min');
\! redis-cli -u "$RLOCK_REDIS_URL" EXISTS ll_sem '{ll_sem}:timeout' '{ll_sem}:rlock_semaphore'
SELECT rlock_semaphore_delete('ll_sem') AS existed;
\! redis-cli -u "$RLOCK_REDIS_URL" EXISTS ll_sem '{ll_sem}:timeout' '{ll_sem}:rlock_semaphore'
SELECT rlock_semaphore_delete('ll_sem') AS existed;
-- the permit this session held is lost: its release says so
-- (terse: the session or the worker may be first to see the loss)
\set VERBOSITY terse
SELECT rlock_semaphore_release('ll_sem');
\set VERBOSITY default
SELECT count(*) FROM rlock_locks WHERE name = 'll_sem';
-- an application's integer key is refused, never deleted
\! redis-cli -u "$RLOCK_REDIS_URL" SET ll_semapp 4 > /dev/null
SELECT rlock_semaphore_delete('ll_semapp');
\! redis-cli -u "$RLOCK_REDIS_URL" GET ll_semapp
-- a latch and a lock are not semaphores to delete
SELECT rlock_latch_set_count('ll_a', 3);
SELECT rlock_semaphore_delete('ll_a');
SELECT rlock_latch_count('ll_a');
SELECT rlock_acquire('ll_lock', '1 min');
SELECT rlock_semaphore_delete('ll_lock');
SELECT rlock_release('ll_lock');

-- set_count with an expiry: the count and its marker carry it
SELECT rlock_latch_set_count('ll_exp', 3, '1 hour');
\! redis-cli -u "$RLOCK_REDIS_URL" PTTL ll_exp | awk '{ print ($1 > 3500000 && $1 <= 3600000) ? "expires within the hour" : "pttl " $1 }'
\! redis-cli -u "$RLOCK_REDIS_URL" PTTL '{ll_exp}:rlock_latch' | awk '{ print ($1 > 3500000 && $1 <= 3600000) ? "marker expires within the hour" : "pttl " $1 }'
-- counting down keeps the expiry
SELECT rlock_latch_count_down('ll_exp');
\! redis-cli -u "$RLOCK_REDIS_URL" PTTL ll_exp | awk '{ print ($1 > 3500000 && $1 <= 3600000) ? "still expires within the hour" : "pttl " $1 }'
-- without one, no expiry
SELECT rlock_latch_delete('ll_exp');
SELECT rlock_latch_set_count('ll_exp', 3);
\! redis-cli -u "$RLOCK_REDIS_URL" PTTL ll_exp
SELECT rlock_latch_set_count('ll_exp', 3, NULL) AS counting_refused;
-- an expiry must be positive
SELECT rlock_latch_set_count('ll_b', 3, '0');
SELECT rlock_latch_set_count('ll_b', 3, '-1 s');

-- privileges: deleting is not PUBLIC's
CREATE ROLE rlock_ll_plain;
SELECT p.oid::regprocedure AS function,
       has_function_privilege('rlock_ll_plain', p.oid, 'EXECUTE') AS plain
  FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.deptype = 'e'
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'rlock'
 WHERE p.proname IN ('rlock_latch_delete', 'rlock_semaphore_delete',
                     'rlock_latch_await', 'rlock_latch_set_count')
 ORDER BY p.oid::regprocedure::text;
SET ROLE rlock_ll_plain;
SELECT rlock_latch_delete('ll_exp');
SELECT rlock_semaphore_delete('ll_exp');
-- but awaiting with must_exist and counting down are
SELECT rlock_latch_await('ll_exp', '0', true) AS not_yet;
SELECT rlock_latch_count_down('ll_exp');
RESET ROLE;
\! redis-cli -u "$RLOCK_REDIS_URL" GET ll_exp

\! redis-cli -u "$RLOCK_REDIS_URL" DEL ll_a '{ll_a}:rlock_latch' ll_app ll_sem '{ll_sem}:timeout' '{ll_sem}:rlock_semaphore' ll_semapp ll_exp '{ll_exp}:rlock_latch' ll_lock > /dev/null
DROP ROLE rlock_ll_plain;
