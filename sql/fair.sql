-- Fair locks (SPEC.md 5.2, Redisson's fair lock): the queue decides who is
-- next.  Other holders are played by owner tokens, a foreign waiter by
-- redis-cli.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS rlock;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never
SELECT current_setting('rlock.redis_url') AS redis_url \gset
\setenv RLOCK_REDIS_URL :redis_url

-- acquire, re-enter, release, like the exclusive lock
SELECT rlock_fair_acquire('fr_a', '1 minute');
SELECT rlock_fair_try_acquire('fr_a', '1 minute') AS reentrant;
SELECT rlock_hold_count('fr_a'), rlock_is_locked('fr_a');
SELECT kind, scope, hold_count FROM rlock_locks WHERE name = 'fr_a';
SELECT kind, holder = rlock_holder_id() AS mine, hold_count FROM rlock_status('fr_a');
SELECT rlock_fair_try_acquire('fr_a', '1 minute', owner => 'other') AS other_refused;
-- a try that waited and gave up has left the queue
SELECT rlock_fair_try_acquire('fr_a', '1 minute', wait => '100 ms', owner => 'other') AS other_after_wait;
\! redis-cli -u "$RLOCK_REDIS_URL" LLEN 'redisson_lock_queue:{fr_a}'
\! redis-cli -u "$RLOCK_REDIS_URL" ZCARD 'redisson_lock_timeout:{fr_a}'
SELECT rlock_fair_release('fr_a'), rlock_fair_release('fr_a');
SELECT rlock_fair_release('fr_a');
SELECT rlock_is_locked('fr_a');

-- a waiter at the head of the queue goes first, even when the lock is free
\! redis-cli -u "$RLOCK_REDIS_URL" RPUSH 'redisson_lock_queue:{fr_q}' 'java-waiter' > /dev/null
\! redis-cli -u "$RLOCK_REDIS_URL" ZADD 'redisson_lock_timeout:{fr_q}' 99999999999999 'java-waiter' > /dev/null
SELECT rlock_fair_try_acquire('fr_q', '1 minute') AS not_before_the_head;
SELECT rlock_acquire('fr_q', '1 minute', owner => 'x');
SELECT rlock_is_locked('fr_q');
-- ... until its deadline has passed: then it counts as gone
\! redis-cli -u "$RLOCK_REDIS_URL" ZADD 'redisson_lock_timeout:{fr_q}' 1 'java-waiter' > /dev/null
SELECT rlock_fair_try_acquire('fr_q', '1 minute') AS after_the_head_expired;
\! redis-cli -u "$RLOCK_REDIS_URL" LLEN 'redisson_lock_queue:{fr_q}'
SELECT rlock_fair_release('fr_q');

-- one name, one kind: a name with fair waiters is not an exclusive or a
-- read/write lock, and the reverse
\! redis-cli -u "$RLOCK_REDIS_URL" RPUSH 'redisson_lock_queue:{fr_k}' 'java-waiter' > /dev/null
\! redis-cli -u "$RLOCK_REDIS_URL" ZADD 'redisson_lock_timeout:{fr_k}' 99999999999999 'java-waiter' > /dev/null
SELECT rlock_try_acquire('fr_k', '1 minute');
SELECT rlock_read_try_acquire('fr_k', '1 minute');
SELECT rlock_write_try_acquire('fr_k', '1 minute');
\! redis-cli -u "$RLOCK_REDIS_URL" DEL 'redisson_lock_queue:{fr_k}' 'redisson_lock_timeout:{fr_k}' > /dev/null
SELECT rlock_read_acquire('fr_k', '1 minute', owner => 'someone');
SELECT rlock_fair_try_acquire('fr_k', '1 minute');
SELECT rlock_read_release('fr_k', owner => 'someone');
SELECT rlock_fair_acquire('fr_k', '1 minute');
SELECT rlock_acquire('fr_k', '1 minute');
SELECT rlock_release('fr_k');
SELECT rlock_read_acquire('fr_k', '1 minute');
SELECT rlock_fair_release('fr_k');

-- transaction-level fair locks end with the transaction
BEGIN;
SELECT rlock_fair_xact_acquire('fr_x', '1 minute');
SELECT rlock_fair_xact_try_acquire('fr_x', '1 minute');
SELECT rlock_hold_count('fr_x');
COMMIT;
SELECT rlock_is_locked('fr_x');

-- a fair lock with waiters shows as fair in rlock_status; force release frees it
SELECT rlock_fair_acquire('fr_f', '1 minute', owner => 'someone');
\! redis-cli -u "$RLOCK_REDIS_URL" RPUSH 'redisson_lock_queue:{fr_f}' 'java-waiter' > /dev/null
\! redis-cli -u "$RLOCK_REDIS_URL" ZADD 'redisson_lock_timeout:{fr_f}' 99999999999999 'java-waiter' > /dev/null
SELECT kind, holder, hold_count FROM rlock_status('fr_f');
SELECT rlock_force_release('fr_f');
\! redis-cli -u "$RLOCK_REDIS_URL" DEL 'redisson_lock_queue:{fr_f}' 'redisson_lock_timeout:{fr_f}' > /dev/null

-- argument checks as for the exclusive lock
SELECT rlock_fair_acquire(NULL);
SELECT rlock_fair_try_acquire('fr_a', '1 minute', NULL);
SELECT rlock_fair_acquire('fr_a', NULL, owner => 'x');
