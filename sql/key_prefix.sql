-- CREATE EXTENSION warns when rlock.key_prefix sets this database's locks
-- apart (SPEC.md sections 2 and 12): a WARNING (a NOTICE of an extension's
-- script never shows) for a database's own prefix, one for a session's,
-- none without a prefix.
\set VERBOSITY default
SELECT current_database() AS regress_db \gset
SET client_min_messages = warning;
DROP DATABASE IF EXISTS rlock_prefix_billing;
DROP DATABASE IF EXISTS rlock_prefix_plain;
RESET client_min_messages;
CREATE DATABASE rlock_prefix_billing;
ALTER DATABASE rlock_prefix_billing SET rlock.key_prefix = 'billing:';
CREATE DATABASE rlock_prefix_plain;

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

\c :regress_db
DROP DATABASE rlock_prefix_billing WITH (FORCE);
DROP DATABASE rlock_prefix_plain WITH (FORCE);
