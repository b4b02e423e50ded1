-- Every client on the same advisory lock: acquire (waiting), release.
SELECT pg_advisory_lock(42), pg_advisory_unlock(42);
