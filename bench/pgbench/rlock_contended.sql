-- Every client on the same rlock lock: acquire (waiting), release.
SELECT rlock_acquire('bench-hot'), rlock_release('bench-hot');
