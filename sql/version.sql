-- The versions agree (test/check-package checks the files of the tree):
-- the library the server runs reports rlock.control's default_version, and
-- CREATE EXTENSION installed that version's objects.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS rlock;
RESET client_min_messages;
SELECT rlock_version() = a.default_version AS library_is_control_version,
       e.extversion = a.default_version AS catalog_is_control_version,
       rlock_version() ~ '^[0-9]+\.[0-9]+(\.[0-9]+)?$' AS looks_like_a_version
  FROM pg_available_extensions a, pg_extension e
 WHERE a.name = 'rlock' AND e.extname = 'rlock';
-- every version installed can be reached from 0.1
SELECT count(*) > 0 AS upgrade_path_from_0_1
  FROM pg_extension_update_paths('rlock') p, pg_available_extensions a
 WHERE a.name = 'rlock' AND p.source = '0.1' AND p.target = a.default_version
   AND p.path IS NOT NULL;
