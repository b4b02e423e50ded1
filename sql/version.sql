-- The versions agree (test/check-package checks the files of the tree):
-- the library the server runs reports the version CREATE EXTENSION
-- installed, rlock.control's default_version (pg_extension is read rather
-- than pg_available_extensions, which does not list control files found
-- through Debian's extension_destdir).
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS rlock;
RESET client_min_messages;
SELECT rlock_version() = extversion AS library_is_catalog_version,
       rlock_version() ~ '^[0-9]+\.[0-9]+(\.[0-9]+)?$' AS looks_like_a_version
  FROM pg_extension WHERE extname = 'rlock';
