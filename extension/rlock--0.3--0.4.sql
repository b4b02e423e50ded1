/* rlock--0.3--0.4.sql: from rlock 0.3 to 0.4 (ALTER EXTENSION rlock UPDATE) */
--
-- What 0.4 changes in the SQL surface, applied to an installed 0.3; the
-- result is the catalog rlock--0.4.sql makes (test/t/048_upgrade.pl).

\echo Use "ALTER EXTENSION rlock UPDATE TO '0.4'" to load this file. \quit

-- ---- 0.4, crash clean-up and server announce ----
-- How this server is named on its Redis (rlock.server_name, else
-- cluster_name, else host:port), and the servers announced there.
CREATE FUNCTION rlock_server_name()
RETURNS text
AS 'MODULE_PATHNAME', 'rlock_server_name'
LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION rlock_server_name() IS
  'How this server is named to the others on its Redis: rlock.server_name, else cluster_name, else host:port. Granted to PUBLIC.';

CREATE FUNCTION rlock_servers(OUT uuid text, OUT name text,
                              OUT started timestamptz, OUT previous_uuid text,
                              OUT host text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'rlock_servers'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION rlock_servers() IS
  'The PostgreSQL servers announced on this server''s Redis (their instance UUID, name, start, the UUID of its previous run, host); each vanishes about 15 s after its server is gone. Granted to PUBLIC.';

-- every row of rlock_locks names the server (SPEC 12)
CREATE OR REPLACE VIEW rlock_locks AS
  SELECT l.*, rlock_server_name() AS server FROM rlock_locks() l;
