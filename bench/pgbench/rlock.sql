-- rlock, uncontended: try and release, in one statement, each client on a
-- lock of its own.  Two Redis round trips.  (No colon in the names: pgbench would read one as a
-- variable.)
SELECT rlock_try_acquire('bench-u' || :client_id), rlock_release('bench-u' || :client_id);
