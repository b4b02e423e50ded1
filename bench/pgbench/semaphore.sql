-- rlock, a semaphore uncontended (bench/sync.sh): take a permit and give it
-- back, in one statement, each client on a semaphore of its own (1 permit).
-- Two Redis round trips, as for rlock.sql's lock.
SELECT rlock_semaphore_try_acquire('bench-s' || :client_id), rlock_semaphore_release('bench-s' || :client_id);
