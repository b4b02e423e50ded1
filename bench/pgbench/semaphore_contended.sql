-- Every client on the same semaphore of 3 permits (bench/sync.sh): acquire
-- one (waiting), give it back.
SELECT rlock_semaphore_acquire('bench-sem-hot'), rlock_semaphore_release('bench-sem-hot');
