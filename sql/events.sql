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

-- a long name is cut on a character boundary, in the lock column (255
-- bytes) and in the detail (511): a UTF8 database, 'x' and 2-byte
-- characters, so that a cut by bytes would split one
SELECT current_database() AS origdb \gset
SET client_min_messages = warning;
DROP DATABASE IF EXISTS rlock_events_utf8;
CREATE DATABASE rlock_events_utf8 TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C';
RESET client_min_messages;
\c rlock_events_utf8
SET client_min_messages = warning;
CREATE EXTENSION rlock;
RESET client_min_messages;
SELECT coalesce(max(seq), 0) AS last_seq FROM rlock_events \gset
SELECT rlock_acquire('x' || repeat(U&'\00e9', 400), '60s');
SELECT rlock_force_release('x' || repeat(U&'\00e9', 400)) AS deleted;
SELECT event, octet_length(lock) AS lock_bytes,
       lock = 'x' || repeat(U&'\00e9', 127) AS lock_cut_on_a_character,
       octet_length(detail) AS detail_bytes,
       detail = 'rlock: lock "x' || repeat(U&'\00e9', 248) AS detail_cut_on_a_character
FROM rlock_events WHERE seq > :last_seq ORDER BY seq;
\c :origdb
DROP DATABASE rlock_events_utf8;

-- the ring's size is fixed when the server starts
SELECT context, min_val, max_val, boot_val FROM pg_settings
WHERE name = 'rlock.events_max';
SET rlock.events_max = 20;
