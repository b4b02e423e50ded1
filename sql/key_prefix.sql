-- CREATE EXTENSION warns when rlock.key_prefix sets this database's locks
-- apart (SPEC.md sections 2 and 12): a WARNING (a NOTICE of an extension's
-- script never shows) for a database's own prefix, a role's (in it or in
-- every database), every role's, else the session's; none without a prefix.
\set VERBOSITY default
SELECT current_database() AS regress_db \gset
SET client_min_messages = warning;
DROP DATABASE IF EXISTS rlock_prefix_billing;
DROP DATABASE IF EXISTS rlock_prefix_plain;
DROP ROLE IF EXISTS rlock_prefix_role;
RESET client_min_messages;
CREATE DATABASE rlock_prefix_billing;
ALTER DATABASE rlock_prefix_billing SET rlock.key_prefix = 'billing:';
CREATE DATABASE rlock_prefix_plain;
CREATE ROLE rlock_prefix_role;

-- a database with a prefix of its own: the WARNING names it, with a HINT
\c rlock_prefix_billing
SHOW rlock.key_prefix;
CREATE EXTENSION rlock;
-- ... also when this session sets none (the database's prefix is every
-- other session's)
DROP EXTENSION rlock;
SET rlock.key_prefix = '';
CREATE EXTENSION rlock;

-- no prefix: no WARNING
\c rlock_prefix_plain
SHOW rlock.key_prefix;
CREATE EXTENSION rlock;
-- a prefix this session set: the WARNING says it is the session's
DROP EXTENSION rlock;
SET rlock.key_prefix = 'tenant-7:';
CREATE EXTENSION rlock;
-- the session's prefix back to none: no WARNING again
DROP EXTENSION rlock;
RESET rlock.key_prefix;
CREATE EXTENSION rlock;
SELECT extversion = rlock_version() AS installed FROM pg_extension WHERE extname = 'rlock';

-- a role's prefix, in this database or in every one: one WARNING each
-- (the session's own value, '' here, is not what matters then)
ALTER ROLE rlock_prefix_role IN DATABASE rlock_prefix_plain SET rlock.key_prefix = 'r-here:';
ALTER ROLE rlock_prefix_role SET rlock.key_prefix = 'r-all:';
DROP EXTENSION rlock;
CREATE EXTENSION rlock;
-- a role's prefix set to '' is none
ALTER ROLE rlock_prefix_role IN DATABASE rlock_prefix_plain SET rlock.key_prefix = '';
ALTER ROLE rlock_prefix_role RESET rlock.key_prefix;
DROP EXTENSION rlock;
CREATE EXTENSION rlock;
-- every role's (ALTER ROLE ALL), reset at once
ALTER ROLE ALL SET rlock.key_prefix = 'everyone:';
DROP EXTENSION rlock;
CREATE EXTENSION rlock;
ALTER ROLE ALL RESET rlock.key_prefix;
SELECT count(*) AS role_prefixes_left FROM pg_db_role_setting s, unnest(s.setconfig) AS cfg
 WHERE (s.setrole <> 0 OR s.setdatabase = 0)
   AND cfg LIKE 'rlock.key\_prefix=%' AND cfg <> 'rlock.key_prefix=';

\c :regress_db
DROP DATABASE rlock_prefix_billing WITH (FORCE);
DROP DATABASE rlock_prefix_plain WITH (FORCE);
DROP ROLE rlock_prefix_role;
