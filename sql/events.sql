-- rlock_events: the ring of this server's recent events (SPEC 12).
-- Events come from faults (the TAP test 070 makes them); here: the view's
-- shape, a force release recorded with its fields, the setting's context.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS rlock;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never

-- the columns, in order
SELECT column_name, data_type FROM information_schema.columns
WHERE table_name = 'rlock_events' ORDER BY ordinal_position;

-- whatever is there: sequence numbers ascending, known events only
SELECT count(*) = count(DISTINCT seq) AS seq_unique,
       coalesce(bool_and(event IN ('lost', 'renew_failing', 'renew_recovered',
                                   'force_release', 'deadlock',
                                   'stranded_release', 'stranded_settled',
                                   'reconnect', 'crash_cleanup', 'outage_wait',
                                   'outage_ridden_out', 'failover')), true)
         AS known_events
FROM rlock_events;
SELECT coalesce(max(seq), 0) AS last_seq FROM rlock_events \gset

-- a force release of a lock nobody holds deletes nothing: no event
SELECT rlock_force_release('events:none') AS deleted;
SELECT count(*) AS new_events FROM rlock_events WHERE seq > :last_seq;

-- a force release that deletes a lock is one, with its fields
SELECT rlock_acquire('events:held', '60s');
SELECT rlock_force_release('events:held') AS deleted;
SELECT event, lock, kind, holder = rlock_holder_id() AS holder_is_mine,
       pid = pg_backend_pid() AS my_pid, database = current_database() AS my_db,
       at <= now() + interval '1 min' AND at > now() - interval '1 min' AS recent,
       detail ~ ('^rlock: lock "events:held" was force-released by pid '
                 || pg_backend_pid() || ', taken from 1 holder\(s\)$') AS detail_ok
FROM rlock_events WHERE seq > :last_seq ORDER BY seq;
SELECT rlock_release('events:held');

-- the ring's size is fixed when the server starts
SELECT context, min_val, max_val, boot_val FROM pg_settings
WHERE name = 'rlock.events_max';
SET rlock.events_max = 20;
