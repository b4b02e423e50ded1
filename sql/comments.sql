-- Every function (each overload) and every view of the extension has a
-- COMMENT, so that \df+ and \dv+ explain it (SPEC.md section 12).  A member
-- without one is listed by name; the count keeps the check from passing on
-- an empty list.  test/t/048_upgrade.pl checks an updated install alike.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS rlock;
RESET client_min_messages;

-- the members that \df+ and \dv+ show: functions and views
CREATE TEMP VIEW rlock_members AS
SELECT d.classid, d.objid, pg_describe_object(d.classid, d.objid, 0) AS member,
       obj_description(d.objid, d.classid::regclass::name) AS description
  FROM pg_depend d
  JOIN pg_extension e ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid
 WHERE e.extname = 'rlock' AND d.deptype = 'e'
   AND (d.classid = 'pg_proc'::regclass
        OR (d.classid = 'pg_class'::regclass
            AND (SELECT relkind FROM pg_class WHERE oid = d.objid) = 'v'));

-- none without a comment (a failure names them)
SELECT member AS uncommented FROM rlock_members
 WHERE coalesce(description, '') = '' ORDER BY 1;

-- and there are members to check: dozens of functions, the three views
SELECT count(*) FILTER (WHERE classid = 'pg_proc'::regclass) > 60 AS many_functions,
       count(*) FILTER (WHERE classid = 'pg_class'::regclass) >= 3 AS views
  FROM rlock_members;
SELECT member FROM rlock_members WHERE classid = 'pg_class'::regclass ORDER BY 1;

-- a comment is one line of prose that ends with a full stop, not a
-- stand-in
SELECT member AS oddly_commented FROM rlock_members
 WHERE description !~ '^[A-Z].*\.$' OR description ~ E'\n' OR length(description) < 30
 ORDER BY 1;

-- \df+ shows them (one example, in psql's own words)
SELECT obj_description('rlock_acquire(text, interval, text)'::regprocedure, 'pg_proc') ~ '^Acquires the exclusive' AS df_plus_explains;
