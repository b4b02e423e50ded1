# Copyright (c) 2026, rlock developers
#
# A package upgrade from rlock 0.1 to this version, with locks held
# (SPEC.md section 11, "Packaging and upgrades"; doc/upgrading.md):
#
#   1. rlock 0.1 is built from the git history (commit $OLD, the release)
#      and installed into a private copy of this PostgreSQL installation
#      (PostgreSQL is relocatable: bin/, lib/ and share/ keep their layout);
#      a server of that copy preloads it and CREATE EXTENSION makes 0.1 in
#      two databases.  Sessions of both hold locks of every 0.1 kind (one a
#      transaction lock in an open transaction, one waiting), and a
#      Redisson-style client holds a lock and a semaphore permit;
#   2. the new version is installed as dpkg installs a package: each file
#      written beside the old one and renamed over it.  Running sessions go
#      on with the 0.1 library they loaded: they keep their locks (renewed),
#      the waiter gets its lock, a lock deleted from Redis is reported lost,
#      and a NEW session (a new backend) still works on the 0.1 library
#      (the postmaster's copy, never the file on disk: its memory map shows
#      the old file, deleted).  CREATE EXTENSION and ALTER EXTENSION UPDATE
#      fail cleanly until the restart, changing nothing;
#   3. restart: the sessions' locks are released as they end; every key the
#      old sessions had in Redis is gone, the Java client's lock and permit
#      are still its own (none silently forgotten).  The new library serves
#      the 0.1 catalog: every C function of it resolves, rlock_stats has
#      0.1's columns, locks work;
#   4. ALTER EXTENSION rlock UPDATE, while a session holds a lock: it keeps
#      it (renewed), and uses 0.2's functions at once; the catalog of every
#      extension object (functions' definitions, volatility, strictness,
#      security, ACLs and initial privileges; views; comments) equals a
#      fresh CREATE EXTENSION of this version's.
#
# Without git history (a tarball) or with a shallow clone, the test skips.
use strict;
use warnings;

use File::Basename;
use File::Copy;
use File::Path qw(make_path);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use RlockTest;

my $OLD = '7fe093402bb31f293a94c31a64360f96ea063065';    # rlock 0.1
my $t0 = time();

# ---- the 0.1 sources, from git --------------------------------------------

my @git = ('git', '-c', 'safe.directory=*');
sub git_out
{
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run([ @git, @_ ], '<', \undef, '>', \$out, '2>', \$err);
	chomp $out;
	return ($ok, $out, $err);
}
if (!-e '.git')
{
	plan skip_all => "no git history here (a release tarball?): rlock 0.1 is built from commit $OLD";
}
BAIL_OUT('git is not installed (scripts/install-deps installs it): rlock 0.1 is built from the history')
  unless eval { (git_out('--version'))[0] };
my ($shallow_ok, $shallow) = git_out('rev-parse', '--is-shallow-repository');
if ($shallow_ok && $shallow eq 'true')
{
	my ($has) = git_out('cat-file', '-e', "$OLD^{commit}");
	plan skip_all => "a shallow clone without commit $OLD (rlock 0.1): fetch the history to run this test"
	  unless $has;
}
my ($has_old, undef, $git_err) = git_out('cat-file', '-e', "$OLD^{commit}");
BAIL_OUT("git history is here but commit $OLD (rlock 0.1) cannot be read: $git_err")
  unless $has_old;

my $base = PostgreSQL::Test::Utils::tempdir('upgrade');
my $src01 = "$base/rlock-0.1";
make_path($src01);
IPC::Run::run([ @git, 'archive', '--format=tar', $OLD ], '|', [ 'tar', '-x', '-C', $src01 ])
  or BAIL_OUT("git archive $OLD | tar -x failed");

# This tree's extension/rlock--0.1.sql is the released script, unchanged.
is(slurp_file("$src01/rlock--0.1.sql"), slurp_file('extension/rlock--0.1.sql'),
	'extension/rlock--0.1.sql is rlock--0.1.sql as released');

# Build 0.1 against this PostgreSQL (its own warnings are not ours to fail
# on: no -Werror; no LLVM bitcode, which the test never uses).
my $pg_config = 'pg_config';
my $t_build = time();
my $build_log = "$base/build-0.1.log";
my $built = IPC::Run::run(
	[ 'make', '-C', $src01, '-j2', 'with_llvm=no', "PG_CONFIG=$pg_config", 'PG_CFLAGS=-std=gnu11' ],
	'<', \undef, '>', $build_log, '2>&1');
BAIL_OUT("building rlock 0.1 failed:\n" . `tail -n 30 $build_log`) unless $built && -f "$src01/rlock.so";
note(sprintf('rlock 0.1 built in %.1f s', time() - $t_build));

# ---- a private copy of this PostgreSQL installation ------------------------

sub pg_config_dir
{
	my ($opt) = @_;
	my $d = `$pg_config --$opt`;
	chomp $d;
	return $d;
}
my %dir = map { $_ => pg_config_dir($_) } qw(bindir pkglibdir sharedir);
# the longest directory prefix they share: the copy keeps the paths below it
my @parts = map { [ split m{/}, $_ ] } values %dir;
my @common;
for (my $i = 0;; $i++)
{
	my $p = $parts[0][$i];
	last if !defined $p || grep { !defined $_->[$i] || $_->[$i] ne $p } @parts;
	push @common, $p;
}
my $prefix = join('/', @common);
my $inst = "$base/pg";
my %copy;
foreach my $k (sort keys %dir)
{
	(my $rel = $dir{$k}) =~ s/^\Q$prefix\E//;
	$copy{$k} = "$inst$rel";
	make_path(dirname($copy{$k}));
	system('cp', '-a', $dir{$k}, $copy{$k}) == 0
	  or BAIL_OUT("cp -a $dir{$k} $copy{$k} failed");
}
my $ext_dir = "$copy{sharedir}/extension";
unlink glob("$copy{pkglibdir}/rlock.so $ext_dir/rlock.control $ext_dir/rlock--*.sql");

# Install a file as dpkg does: written beside the old one, renamed over it
# (the old file's inode lives on in the processes that mapped it).
sub install_file
{
	my ($from, $to, $mode) = @_;
	copy($from, "$to.dpkg-new") or die "copy $from: $!";
	chmod($mode, "$to.dpkg-new") or die "chmod $to.dpkg-new: $!";
	rename("$to.dpkg-new", $to) or die "rename to $to: $!";
}
install_file("$src01/rlock.so", "$copy{pkglibdir}/rlock.so", 0755);
install_file("$src01/$_", "$ext_dir/$_", 0644) foreach ('rlock.control', 'rlock--0.1.sql');

# The server runs the copy's programs (PATH works on every version's test
# modules; install_path exists only from PostgreSQL 15's).
$ENV{PATH} = "$copy{bindir}:$ENV{PATH}";

my $redis = RlockTest::Redis->new;
my $node = PostgreSQL::Test::Cluster->new('upgrade');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'rlock'\n"
	  . "rlock.redis_url = '" . $redis->url . "'\n"
	  . "rlock.watchdog_timeout = '2s'\n"
	  . "log_min_messages = 'debug1'\n"
	  . "log_line_prefix = '%m [%p] %q%a '\n");
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE db2');
$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql($_, 'CREATE EXTENSION rlock') foreach ('postgres', 'db2');
# db2's administrator took rlock_stats from PUBLIC and built a view on it:
# the update keeps both (the postgres database is compared with a fresh
# install, so it keeps the defaults)
$node->safe_psql('db2', 'REVOKE SELECT ON rlock_stats FROM PUBLIC');
$node->safe_psql('db2',
	'CREATE VIEW app_stats AS SELECT acquisitions, stats_reset FROM rlock_stats');

is($node->safe_psql('postgres',
		"SELECT extversion, (SELECT count(*) FROM pg_proc WHERE proname = 'rlock_version')
		   FROM pg_extension WHERE extname = 'rlock'"),
	'0.1|0', 'the server runs rlock 0.1 (its catalog, its library)');

# ---- phase 1: locks held under 0.1 -----------------------------------------

sub q1
{
	my ($s, $sql) = @_;
	my ($out, $err) = RlockTest::query_err($s, $sql);
	return $out;
}
sub session { return $node->background_psql($_[0], on_error_stop => 0); }

my $s1 = session('postgres');
my $s2 = session('db2');
my $s3 = session('postgres');
my $s4 = session('db2');
my %holder = map { $_->[0] => RlockTest::holder_of($_->[1]) }
  ([ s1 => $s1 ], [ s2 => $s2 ], [ s3 => $s3 ], [ s4 => $s4 ]);
my ($instance) = $holder{s1} =~ /^([^:]+):/;

# The Java client: a lock (10 min lease) and a permit without lease.
my $java = '11111111-2222-3333-4444-555555555555:77';
is(RlockTest::Redisson::try_lock($redis, 'up_java', 600000, $java), '', 'the Java client holds up_java');
is(RlockTest::Redisson::try_lock($redis, 'up_wait', 600000, $java), '', 'the Java client holds up_wait');
RlockTest::Redisson::sem_try_set_permits($redis, 'up_sem', 3);
my ($java_permits) = RlockTest::Redisson::sem_try_acquire($redis, 'up_sem', 1, undef);
is(scalar(@$java_permits), 1, 'the Java client holds a permit of up_sem');

is( q1($s1,
		"SELECT rlock_acquire('up_a'), rlock_acquire('up_b', '10 minutes'),
		        rlock_fenced_acquire('up_fenced') > 0, rlock_acquire('up_lost'),
		        rlock_multi_acquire(ARRAY['up_m1', 'up_m2'])"),
	'||t||', 's1: exclusive (watchdog and fixed lease), fenced, multi locks');
is(q1($s2, "SELECT rlock_read_acquire('up_r'), rlock_fair_acquire('up_fair'), rlock_write_acquire('up_w')"),
	'||', 's2 (db2): read, fair and write locks');
q1($s3, 'BEGIN');
is(q1($s3, "SELECT rlock_xact_acquire('up_x'), rlock_read_acquire('up_r')"),
	'|', 's3: a transaction lock in an open transaction, and a read lock beside s2');
RlockTest::start_bg($s4, "SELECT rlock_acquire('up_wait')");
ok(RlockTest::wait_until(sub { $redis->cli('PUBSUB', 'NUMSUB', 'redisson_lock__channel:{up_wait}') =~ /\n1$/ }, 30),
	's4 waits for up_wait (held by the Java client)');

my @held = qw(up_a up_b up_fenced up_lost up_m1 up_m2 up_r up_fair up_w up_x);
is($node->safe_psql('postgres', "SELECT count(DISTINCT name) FROM rlock_locks WHERE state = 'held'"),
	scalar(@held), 'rlock_locks lists every lock held');

# ---- phase 2: the package upgrade, the server still running ----------------

my $old_ino = (stat("$copy{pkglibdir}/rlock.so"))[1];
my @new_sql = map { basename($_) } glob('extension/rlock--*.sql');
install_file("$dir{pkglibdir}/rlock.so", "$copy{pkglibdir}/rlock.so", 0755);
install_file("$dir{sharedir}/extension/$_", "$ext_dir/$_", 0644) foreach ('rlock.control', @new_sql);
isnt((stat("$copy{pkglibdir}/rlock.so"))[1], $old_ino, 'the new library is a new file (renamed over the old one)');
is($node->safe_psql('postgres', "SELECT default_version FROM pg_available_extensions WHERE name = 'rlock'"),
	slurp_file('rlock.control') =~ /^default_version\s*=\s*'([^']+)'/m ? $1 : '?',
	'the server sees the new control file');

# Running sessions go on: the watchdog renews their locks...
my ($renewed) = RlockTest::all_renewed_on([ [ $redis, 'up_a' ], [ $redis, 'up_r' ], [ $redis, 'up_x' ] ], 30);
ok($renewed, 'locks held before the upgrade are renewed after it');
is(q1($s1, "SELECT rlock_hold_count('up_a'), rlock_is_held('up_b'), rlock_hold_count('up_m1')"),
	'1|t|1', 's1 still holds its locks');
# ... a waiter is woken by the Java client's release ...
is(RlockTest::Redisson::unlock($redis, 'up_wait', $java), '1', 'the Java client releases up_wait');
ok(RlockTest::wait_until(sub { RlockTest::bg_done($s4) }, 30), 's4 gets up_wait');
my ($w_out, $w_err) = RlockTest::bg_result($s4);
is($w_err // '', '', 's4 got it without an error');
# ... a lock deleted from Redis is reported lost ...
$redis->cli('DEL', 'up_lost');
ok( RlockTest::wait_until(
		sub { $node->safe_psql('postgres', "SELECT state FROM rlock_locks WHERE name = 'up_lost'") eq 'lost' },
		30),
	'a lock deleted from Redis is reported lost (the watchdog of 0.1 runs on)');
# ... the transaction lock is released at COMMIT ...
is(q1($s3, "SELECT rlock_is_held('up_x')"), 't', 's3 holds up_x in its transaction');
q1($s3, 'COMMIT');
is($redis->cli('EXISTS', 'up_x'), '0', 's3 COMMIT released up_x');

# A new session (a new backend) runs the library the postmaster loaded, not
# the new file: the memory map shows the old file, deleted.
my $s5 = session('postgres');
my $s5_pid = q1($s5, 'SELECT pg_backend_pid()');
is(q1($s5, "SELECT rlock_try_acquire('up_new'), rlock_is_locked('up_a'), rlock_try_acquire('up_a')"),
	't|t|f', 'a new session takes a lock, sees and is refused one held before the upgrade');
# (up_x was released at COMMIT; up_wait and up_new are new)
is(q1($s5, "SELECT count(DISTINCT name) FROM rlock_locks"), scalar(@held) - 1 + 2,
	'... and sees every lock of the server in rlock_locks');
SKIP:
{
	skip 'no /proc', 1 unless -r "/proc/$s5_pid/maps";
	my @maps = grep { m{/rlock\.so} } split /\n/, slurp_file("/proc/$s5_pid/maps");
	ok(@maps && !grep({ !/ \(deleted\)$/ } @maps), 'the new session maps the old rlock.so (deleted), not the new one')
	  or diag(join("\n", @maps));
}
is(q1($s5, "SELECT rlock_release('up_new')"), 't', 'and releases it');
$s5->quit;

# Until the restart the new SQL needs the new library, which is not loaded:
# CREATE EXTENSION and ALTER EXTENSION UPDATE fail, changing nothing.
my ($rc, $out, $err) = $node->psql('fresh', 'CREATE EXTENSION rlock');
like($err, qr/could not find function "rlock_\w+" in file/,
	'before the restart, CREATE EXTENSION of the new version fails (a function the loaded library lacks)');
($rc, $out, $err) = $node->psql('postgres', 'ALTER EXTENSION rlock UPDATE');
like($err, qr/could not find function "rlock_\w+" in file/, '... so does ALTER EXTENSION UPDATE');
is($node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'rlock'")
	  . $node->safe_psql('fresh', "SELECT count(*) FROM pg_extension WHERE extname = 'rlock'"),
	'0.10', '... and nothing changed');

# ---- phase 3: restart on the new library -----------------------------------

# What the old sessions have in Redis: every key, and what names a holder.
sub redis_dump
{
	my %d;
	foreach my $k (split /\n/, $redis->cli('--scan') // '')
	{
		my $type = $redis->cli('TYPE', $k);
		my $v =
			$type eq 'hash' ? $redis->cli('HGETALL', $k)
		  : $type eq 'zset' ? $redis->cli('ZRANGE', $k, 0, -1)
		  : $type eq 'list' ? $redis->cli('LRANGE', $k, 0, -1)
		  : $type eq 'set' ? $redis->cli('SMEMBERS', $k)
		  : $type eq 'string' ? $redis->cli('GET', $k)
		  : $type;
		$d{$k} = $v // '';
	}
	return \%d;
}
my $before = redis_dump();
my @sessions_keys = grep { index("$_ $before->{$_}", $instance) >= 0 } sort keys %$before;
ok(scalar(@sessions_keys) >= scalar(@held) - 2, 'before the restart, the sessions\' locks are in Redis')
  or diag(join(', ', @sessions_keys));

$node->restart;
$_->quit foreach ($s1, $s2, $s3, $s4);

my $after = redis_dump();
my @orphans = grep { index("$_ $after->{$_}", $instance) >= 0 } sort keys %$after;
is(join(', ', @orphans), '', 'after the restart, no key of the old sessions is left in Redis (none forgotten)');
is($redis->cli('HGET', 'up_java', $java), '1', 'the Java client still holds up_java');
ok(exists RlockTest::Redisson::sem_permits($redis, 'up_sem')->{ $java_permits->[0] },
	'... and its permit of up_sem');

is($node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'rlock'"),
	'0.1', 'after the restart the catalog is still 0.1');
my $c_functions = "SELECT p.oid FROM pg_proc p
	  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
	  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'rlock'
	 WHERE p.prolang = (SELECT oid FROM pg_language WHERE lanname = 'c')";
my ($n_c) = $node->safe_psql('postgres', "SELECT count(*) FROM ($c_functions) f");
($rc, $out, $err) = $node->psql('postgres',
	"SELECT count(fmgr_c_validator(oid)::text) FROM ($c_functions) f");
is("$out$err", $n_c, "every C function of the 0.1 catalog ($n_c) resolves in the new library");
is( $node->safe_psql('postgres',
		"SELECT count(*), bool_and(stats_reset > now() - interval '1 hour') FROM rlock_stats"),
	'1|t', "rlock_stats of the 0.1 catalog (0.1's columns) works on the new library");

my $s6 = session('postgres');
my $s7 = session('db2');
is(q1($s6, "SELECT rlock_acquire('up_c'), rlock_read_acquire('up_r2'), rlock_try_acquire('up_java')"),
	'||f', 'on the 0.1 catalog: locks are taken; the Java client\'s is refused');
is(q1($s7, "SELECT rlock_fenced_acquire('up_f2') > 0, rlock_multi_try_acquire(ARRAY['up_m3', 'up_m4'])"),
	't|t', '... in db2 too');

# ---- phase 4: ALTER EXTENSION UPDATE, a session holding locks ---------------

$node->safe_psql('postgres', 'ALTER EXTENSION rlock UPDATE');
($rc, $out, $err) = $node->psql('db2', 'ALTER EXTENSION rlock UPDATE');
is($rc, 0, 'db2 is updated though a view of its own depends on rlock_stats') or diag($err);
is( $node->safe_psql('db2',
		"SELECT count(*), bool_and(stats_reset IS NOT NULL) FROM app_stats")
	  . '/' . $node->safe_psql('db2',
		"SELECT has_table_privilege('public', 'rlock_stats', 'SELECT'), "
		  . "(SELECT open_connections >= 0 FROM rlock_stats)"),
	'1|t/f|t', '... the view still works, PUBLIC still may not read rlock_stats, which has 0.2\'s columns');
$node->safe_psql('fresh', 'CREATE EXTENSION rlock');
my $version = $node->safe_psql('postgres', 'SELECT rlock_version()');
is( $node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'rlock'")
	  . '/' . $node->safe_psql('fresh', "SELECT extversion FROM pg_extension WHERE extname = 'rlock'"),
	"$version/$version", "updated to the library's version ($version), as a fresh install is");

is(q1($s6, "SELECT rlock_hold_count('up_c'), rlock_is_held('up_r2')"), '1|t',
	'the session that held locks during the update still holds them');
($renewed) = RlockTest::all_renewed_on([ [ $redis, 'up_c' ], [ $redis, 'up_f2' ] ], 30);
ok($renewed, '... and they are renewed');
is(q1($s6, "SELECT rlock_semaphore_try_acquire('up_sem')"), 't',
	'... and it uses 0.2\'s functions at once');
is(q1($s6, "SELECT rlock_semaphore_available('up_sem'), open_connections > 0 FROM rlock_stats"),
	'1|t', '... (the Java client\'s permit still counted; rlock_stats has 0.2\'s columns)');
is(q1($s6, "SELECT rlock_semaphore_release('up_sem'), rlock_release('up_c'), rlock_read_release('up_r2')"),
	't|t|t', 'and gives everything back');
$s6->quit;
$s7->quit;

# The catalogs: every member of the extension, described in full.
my $catalog = q{
SELECT replace(line, E'\n', ' ') FROM (
SELECT 'extension ' || e.extname || ' ' || e.extversion || ' relocatable ' || e.extrelocatable
       || ' schema ' || e.extnamespace::regnamespace || ' config ' || coalesce(e.extconfig::text, '-')
       || ' comment ' || coalesce(obj_description(e.oid, 'pg_extension'), '-')
  FROM pg_extension e WHERE e.extname = 'rlock'
UNION ALL
SELECT pg_describe_object(d.classid, d.objid, d.objsubid) || ': ' ||
       CASE d.classid
       WHEN 'pg_proc'::regclass THEN
         (SELECT concat_ws(' | ', pg_get_functiondef(p.oid), 'acl ' || coalesce(p.proacl::text, '-'),
                 'comment ' || coalesce(obj_description(p.oid, 'pg_proc'), '-'),
                 p.provolatile, p.proisstrict, p.prosecdef, p.proparallel, p.procost, p.prorows,
                 p.proleakproof, p.proowner::regrole)
            FROM pg_proc p WHERE p.oid = d.objid)
       WHEN 'pg_class'::regclass THEN
         (SELECT concat_ws(' | ', c.relkind, pg_get_viewdef(c.oid), 'acl ' || coalesce(c.relacl::text, '-'),
                 'comment ' || coalesce(obj_description(c.oid, 'pg_class'), '-'), c.relowner::regrole,
                 (SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
                                    || coalesce(' comment ' || col_description(c.oid, a.attnum), ''),
                                    ', ' ORDER BY a.attnum)
                    FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped))
            FROM pg_class c WHERE c.oid = d.objid)
       WHEN 'pg_type'::regclass THEN
         (SELECT concat_ws(' | ', format_type(t.oid, NULL), t.typtype, 'acl ' || coalesce(t.typacl::text, '-'),
                 'comment ' || coalesce(obj_description(t.oid, 'pg_type'), '-'))
            FROM pg_type t WHERE t.oid = d.objid)
       ELSE 'a member of a kind this test does not describe'
       END
       || ' | initial privileges ' || coalesce(
         (SELECT string_agg(i.privtype::text || ' ' || i.initprivs::text, ', ' ORDER BY i.objsubid)
            FROM pg_init_privs i WHERE i.classoid = d.classid AND i.objoid = d.objid), '-')
  FROM pg_depend d JOIN pg_extension e ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid
 WHERE e.extname = 'rlock' AND d.deptype = 'e'
) members(line) ORDER BY 1};

# The rlock_stats view is kept by the update from 0.1 (its privileges, the
# views built on it), which so appends its new column: its definition and
# the order of its columns differ from a fresh install's, not its columns.
sub catalog_of
{
	return [
		map {
			my @f = split / \| /, $_;
			if ($f[0] =~ /^view rlock_stats: / && @f >= 6)
			{
				$f[1] = '<definition>';
				$f[5] = join(', ', sort split /, /, $f[5]);
			}
			join(' | ', @f);
		} split /\n/, $node->safe_psql($_[0], $catalog)
	];
}
sub differences
{
	my ($got, $want) = @_;
	my %g = map { $_ => 1 } @$got;
	my %w = map { $_ => 1 } @$want;
	return join("\n",
		(map { "only after the update: $_" } grep { !$w{$_} } @$got),
		(map { "only in a fresh install: $_" } grep { !$g{$_} } @$want));
}
my $fresh = catalog_of('fresh');
cmp_ok(scalar(@$fresh), '>', 50, 'the fresh install\'s catalog lists its objects (' . scalar(@$fresh) . ')');
is(differences(catalog_of('postgres'), $fresh), '', 'after ALTER EXTENSION UPDATE the catalog equals a fresh install\'s');
# Every function and view has its COMMENT after the update too (SPEC 12: the
# upgrade script comments the objects of 0.1 to 0.3 as well), not only in a
# fresh install (regress comments).
my $uncommented = q{
SELECT pg_describe_object(d.classid, d.objid, 0)
  FROM pg_depend d JOIN pg_extension e ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid
 WHERE e.extname = 'rlock' AND d.deptype = 'e'
   AND (d.classid = 'pg_proc'::regclass
        OR (d.classid = 'pg_class'::regclass AND (SELECT relkind FROM pg_class WHERE oid = d.objid) = 'v'))
   AND coalesce(obj_description(d.objid, d.classid::regclass::name), '') = ''
 ORDER BY 1};
is($node->safe_psql('postgres', $uncommented), '', 'after the update, every function and view of rlock has a comment');
is($node->safe_psql('db2', $uncommented), '', '... in db2 too');
# (db2's own revoke, seen to survive above, put back for the comparison)
$node->safe_psql('db2', 'GRANT SELECT ON rlock_stats TO PUBLIC');
is(differences(catalog_of('db2'), $fresh), '', '... in db2 too');

is($redis->cli('HGET', 'up_java', $java), '1', 'the Java client holds up_java throughout');
$node->stop;
note(sprintf('upgrade test: %.1f s in all', time() - $t0));

done_testing();
