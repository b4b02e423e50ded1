-- What PostgreSQL users know: a session advisory lock and its release,
-- each client on a key of its own (uncontended).
SELECT pg_advisory_lock(:client_id), pg_advisory_unlock(:client_id);
