/* rlock--0.3--0.4.sql: from rlock 0.3 to 0.4 (ALTER EXTENSION rlock UPDATE) */
--
-- What 0.4 changes in the SQL surface, applied to an installed 0.3; the
-- result is the catalog rlock--0.4.sql makes (test/t/048_upgrade.pl).

\echo Use "ALTER EXTENSION rlock UPDATE TO '0.4'" to load this file. \quit
