-- rlock, a Redlock on the masters of rlock.redlock_urls (bench/nodes.sh sets
-- it): try, then release.
SELECT rlock_redlock_try_acquire('bench_redlock', '30s');
SELECT rlock_redlock_release('bench_redlock');
