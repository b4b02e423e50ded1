# Copyright (c) 2026, rlock developers
#
# rlock.redlock_urls as a setting, and a Redlock whose majority fails
# (issue 21, items 4, 10 and 11; SPEC.md sections 7 and 8).
#
#   a) Passwords never show: SHOW, pg_settings (setting, reset_val,
#      boot_val) as superuser and as a pg_monitor member, the "parameter
#      changed" LOG line of a reload, the error of a refused value.
#   b) One server named twice is refused when the setting is made: the same
#      URL twice, 127.0.0.1 and localhost for one port, the same server
#      with another database.  ALTER SYSTEM fails with an ERROR naming both
#      entries; a reload of such a file keeps the old value (SHOW) and logs
#      why.  A Redlock held at transaction level then commits (no PANIC, the
#      postmaster is the same process, no backend "terminated by signal").
#      One server behind a TCP port and a Unix socket, which no setting can
#      tell apart, is caught by the masters' run_id at the first
#      acquisition: an ERROR (22023), nothing left on the server.  So is a
#      master's name that comes to lead to another master's server (a
#      proxy retargeted, its link cut): an acquisition retried over it on a
#      fresh connection does not count that server twice (not acquired,
#      nothing left), the next one fails with that ERROR, and a lock the
#      watchdog renews is reported lost rather than renewed on one server
#      counted twice.
#   c) A majority that fails (a wrong password on two of three masters;
#      two of three stopped): try_acquire raises an ERROR with the SQLSTATE
#      of the failure (28P01, 08001) naming the lock, with each master's
#      cause in the DETAIL; a blocking acquire with a wait of 2 s raises it
#      when its wait ends, having connected to each failing master a
#      bounded number of times (INFO stats of the masters this file
#      started), and shows in pg_stat_activity as an Extension wait while
#      it pauses.  A minority failing with the majority free still
#      acquires; a majority held by another client is still a plain false.
#   d) Nothing ERRORs out of COMMIT: a session out of file descriptors
#      (prlimit) at the COMMIT of a transaction-level Redlock gets a WARNING,
#      the COMMIT stands and the server does not restart.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use RlockTest;
use RlockTest::Proxy;
use RlockTest::Redlock;

my $secret = 'rl-secret-8c1f';
my $foreign = '6f1c2b9e-3d4a-4e5f-8a7b-9c0d1e2f3a4b:57';

my $rl = RlockTest::Redlock->new(
	masters => [ {}, { password => $secret }, { password => $secret } ]);
my ($m0, $m1, $m2) = $rl->masters;
my $home = RlockTest::Redis->new;
my $good = $rl->urls;

my $node = RlockTest::new_node('redlock_config', $home,
	extra_conf => "rlock.redlock_urls = '$good'\n"
	  . "rlock.command_timeout = '1s'\n"
	  . "rlock.connect_timeout = '1s'\n");
sub postmaster_pid
{
	open my $fh, '<', $node->data_dir . '/postmaster.pid' or die $!;
	my $l = <$fh>;
	close $fh;
	chomp $l;
	return $l;
}
my $pm_pid = postmaster_pid();

sub sq { return $node->safe_psql('postgres', $_[0]); }

sub reload_with
{
	my ($urls) = @_;
	my $before = sq('SELECT pg_conf_load_time()');
	$node->append_conf('postgresql.conf', "rlock.redlock_urls = '$urls'\n");
	$node->reload;
	$node->poll_query_until('postgres',
		"SELECT pg_conf_load_time() > '$before'::timestamptz")
	  or die 'no reload';
	return;
}

# ---- a) passwords never show -------------------------------------------
my $shown = sq('SHOW rlock.redlock_urls');
unlike($shown, qr/\Q$secret\E/, 'SHOW hides the masters\' passwords');
like($shown, qr/:\*{8}\@/, 'SHOW masks them');
is(scalar(split /,/, $shown), 3, 'SHOW lists the three masters');
my $settings = sq(
	"SELECT concat_ws('|', setting, reset_val, boot_val) FROM pg_settings WHERE name = 'rlock.redlock_urls'"
);
unlike($settings, qr/\Q$secret\E/,
	'pg_settings setting, reset_val, boot_val hide them');
sq("CREATE ROLE monitor LOGIN; GRANT pg_monitor TO monitor");
my $as_monitor = $node->safe_psql('postgres',
	"SHOW rlock.redlock_urls; SELECT concat_ws('|', setting, reset_val, boot_val) FROM pg_settings WHERE name = 'rlock.redlock_urls'",
	extra_params => [ '-U', 'monitor' ]);
like($as_monitor, qr/127\.0\.0\.1/, 'a pg_monitor member sees the setting');
unlike($as_monitor, qr/\Q$secret\E/, '... without the passwords');

my $log_offset = -s $node->logfile;
my $changed = join(',',
	$m0->url, $m1->url(db => 1), $m2->url);
reload_with($changed);
ok( RlockTest::wait_until(
		sub {
			slurp_file($node->logfile, $log_offset) =~
			  /parameter "rlock.redlock_urls" changed to/;
		},
		30),
	'a reload that changes the setting is logged');
like(sq('SHOW rlock.redlock_urls'), qr{:\d+/1,}, 'the new value is in effect');

# other forms (not connected to): a user, a Unix socket, an escaped '@'
my $forms = "unix://rl:$secret\@/tmp/rlock-none.sock?db=2, "
  . "redis://rl:$secret%40x\@127.0.0.1:1/0,rediss://:$secret\@[::1]:2/3";
reload_with($forms);
$shown = sq('SHOW rlock.redlock_urls');
note "SHOW: $shown";
is( $shown,
	'unix://rl:********@/tmp/rlock-none.sock?db=2,'
	  . 'redis://rl:********@127.0.0.1:1/0,rediss://:********@[::1]:2/3',
	'SHOW masks the password of every URL form');
reload_with($changed);

# ---- b) one server named twice -------------------------------------------
my $psql = $node->background_psql('postgres', on_error_stop => 0);
my @dups = (
	[ 'the same URL twice', join(',', $m0->url, $m0->url, $m1->url) ],
	[
		'127.0.0.1 and localhost',
		join(',', $m0->url, $m0->url(host => 'localhost'), $m1->url)
	],
	[
		'the same server with another database',
		join(',', $m1->url, $m0->url, $m1->url(db => 2))
	],);
foreach my $d (@dups)
{
	my ($what, $urls) = @$d;
	my ($out, $err, $state) = RlockTest::run_sql($psql,
		"ALTER SYSTEM SET rlock.redlock_urls = '$urls'");
	is($state, '22023', "ALTER SYSTEM refuses $what");
	like($err, qr/master \d+ \(.*\) and master \d+ \(.*\).*same Redis server/,
		"... naming both entries");
	unlike($err, qr/\Q$secret\E/, '... without a password');
}
# (where ALTER SYSTEM took one, postgresql.auto.conf would hide the file)
RlockTest::run_sql($psql, 'ALTER SYSTEM RESET rlock.redlock_urls');
# the file: a reload keeps the value in effect and says why
$log_offset = -s $node->logfile;
my $before = sq('SHOW rlock.redlock_urls');
reload_with($dups[1][1]);
is(sq('SHOW rlock.redlock_urls'), $before,
	'a reload naming one server twice keeps the old value');
ok( RlockTest::wait_until(
		sub {
			slurp_file($node->logfile, $log_offset) =~
			  /invalid value for parameter "rlock.redlock_urls".*\n.*same Redis server/;
		},
		30),
	'... and logs why');
reload_with($dups[0][1]);
is(sq('SHOW rlock.redlock_urls'), $before, '... the same URL twice too');
my ($dup_rc, $dup_out, $dup_err) = $node->psql('postgres',
	"BEGIN; SELECT rlock_redlock_xact_acquire('dup1', '30 seconds'); COMMIT;");
is($dup_err, '', 'a Redlock at transaction level commits, no ERROR');

# one server behind a TCP port and a Unix socket: no setting can tell, the
# masters' run_id can; the third master is down, so one live server would
# otherwise make a "majority" of three
my $sock = PostgreSQL::Test::Utils::tempdir_short() . '/twin.sock';
my $twin = RlockTest::Redis->new(
	args => [ '--unixsocket', $sock, '--unixsocketperm', '700' ]);
my $down = RlockTest::Redis->new;
my $down_url = $down->url;
$down->stop;
reload_with(join(',', $twin->url, "unix://$sock", $down_url));
like(sq('SHOW rlock.redlock_urls'), qr/twin\.sock/,
	'a TCP port and a Unix socket of one server pass the setting');
my ($out, $err, $state) =
  RlockTest::run_sql($psql, "SELECT rlock_redlock_try_acquire('twin1', '30 seconds')");
is($state, '22023', 'a Redlock on them fails closed');
like($err, qr/two of its masters are one Redis server.*\n.*DETAIL:.*[Mm]aster 1 .* master 2 /,
	'... naming the two masters');
is($twin->cli('EXISTS', 'twin1'), '0', '... and leaves nothing on that server');

# the same two names for one server, through a Redis user INFO is refused
# to: the run_id is not told, so the masters cannot be told apart, and the
# Redlock fails closed, naming the master that does not tell
$twin->cli('ACL', 'SETUSER', 'noinfo', 'on', '>nopw', '~*',
	RlockTest::redis_version() >= 60200 ? ('&*') : (),
	'+@all', '-info');
reload_with(join(',', 'redis://noinfo:nopw@127.0.0.1:' . $twin->port,
		"unix://noinfo:nopw\@$sock", $down_url));
($out, $err, $state) =
  RlockTest::run_sql($psql, "SELECT rlock_redlock_try_acquire('untold1', '30 seconds')");
is($state, '22023', 'masters that do not tell their run_id (INFO refused): fails closed');
like($err, qr/master 1 does not tell which Redis server it is.*\n.*DETAIL:.*[Mm]aster 1 /,
	'... naming the master');
like($err, qr/HINT:.*\+info/, '... and what to allow');
is($twin->cli('EXISTS', 'untold1'), '0', '... and leaves nothing on that server');
for my $round (1 .. 3)
{
	($out, $err, $state) = RlockTest::run_sql($psql,
		"SELECT rlock_redlock_try_acquire('untold1', '30 seconds')");
	is($state, '22023', "... and again, once the master is known not to tell ($round)");
}
is($twin->cli('EXISTS', 'untold1'), '0', '... leaving nothing');

# a master known not to tell, then stopped: its answer never comes (two
# others grant), and the acquisition is refused all the same; it does not
# depend on which answer comes first
{
	my ($ua, $ub, $uc) = map { RlockTest::Redis->new } 1 .. 3;
	$uc->cli('ACL', 'SETUSER', 'noinfo', 'on', '>nopw', '~*',
		RlockTest::redis_version() >= 60200 ? ('&*') : (),
		'+@all', '-info');
	reload_with(join(',', $ua->url, $ub->url,
			'redis://noinfo:nopw@127.0.0.1:' . $uc->port));
	my $us = $node->background_psql('postgres', on_error_stop => 0);
	RlockTest::run_sql($us, "SET rlock.command_timeout = '1s'");
	($out, $err, $state) = RlockTest::run_sql($us,
		"SELECT rlock_redlock_try_acquire('untold2', '30 seconds')");
	is($state, '22023', 'two telling masters and one that does not: refused');
	CORE::kill 'STOP', $uc->pid or die "SIGSTOP: $!";
	($out, $err, $state) = RlockTest::run_sql($us,
		"SELECT rlock_redlock_try_acquire('untold2', '30 seconds')");
	is($state, '22023', '... also when that master, stopped, answers no more');
	CORE::kill 'CONT', $uc->pid or die "SIGCONT: $!";
	is(join(',', map { scalar $_->cli('EXISTS', 'untold2') } $ua, $ub), '0,0',
		'... leaving nothing on the other two');
	$us->quit;
	$_->stop for ($ua, $ub, $uc);
}
reload_with($good);

# a master's name that leads to another master's server once its round
# trip is retried on a fresh connection (a proxy retargeted, then the link
# cut while the acquisition waits): that answer was not identified and must
# not count, so A alone (once as master 1, once as master 3) is no majority
my ($ra, $rb, $rc) = map { RlockTest::Redis->new } 1 .. 3;
my $px = RlockTest::Proxy->new($rc);
reload_with(join(',', $ra->url, $rb->url, $px->url));
my $rs = $node->background_psql('postgres', on_error_stop => 0);
($out, $err) = RlockTest::run_sql($rs,
	"SELECT rlock_redlock_try_acquire('idn1', '30 seconds'), rlock_redlock_release('idn1')");
is("$out/$err", 't|t/', 'three masters, one behind a proxy, identified');
# (a command timeout that leaves this test 5 s to act while the session
# waits for master 2)
RlockTest::run_sql($rs, "SET rlock.command_timeout = '5s'");
$px->stall;
CORE::kill 'STOP', $rb->pid or die "SIGSTOP: $!";
RlockTest::start_bg($rs, "SELECT rlock_redlock_try_acquire('idn2', '30 seconds')");
ok( RlockTest::wait_until(
		sub {
			RlockTest::bg_done($rs) || sq(
				"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Extension' AND query LIKE '%rlock_redlock_try_acquire(''idn2''%'"
			) eq '1';
		},
		30),
	'an acquisition waits for master 2 (stopped) and master 3 (stalled)');
$px->retarget($ra);
$px->cut;
$px->resume;
ok(RlockTest::wait_until(sub { RlockTest::bg_done($rs) }, 60), '... and returns');
($out, $err) = RlockTest::bg_result($rs);
isnt($out, 't', '... not acquired on one server counted twice');
CORE::kill 'CONT', $rb->pid or die "SIGCONT: $!";
RlockTest::run_sql($rs, 'RESET rlock.command_timeout');
is(join(',', map { scalar $_->cli('EXISTS', 'idn2') } $ra, $rc), '0,0',
	'... and nothing left on master 1 or behind the proxy (master 2 keeps what it ran late until its lease ends)');
($out, $err, $state) = RlockTest::run_sql($rs,
	"SELECT rlock_redlock_try_acquire('idn3', '30 seconds')");
is($state, '22023', 'the next acquisition identifies master 3 as master 1: ERROR');
like($err, qr/[Mm]aster 1 .* master 3 /, '... naming them');
is(scalar $ra->cli('EXISTS', 'idn3'), '0', '... and leaves nothing');

# the same for a lock the watchdog renews: once master 2 lost it and master
# 3's name leads to master 1's server, master 1 must not count twice: the
# lock is lost (fail closed), not renewed on one server for ever
my $rd = RlockTest::Redis->new;
my $px2 = RlockTest::Proxy->new($rd);
$node->append_conf('postgresql.conf', "rlock.watchdog_timeout = '3s'\n");
reload_with(join(',', $ra->url, $rb->url, $px2->url));
($out, $err) = RlockTest::run_sql($rs, "SELECT rlock_redlock_acquire('idn4')");
is("$out/$err", '/', 'a Redlock the watchdog renews (3 s), master 3 behind a proxy');
is(join(',', map { scalar $_->cli('EXISTS', 'idn4') } $ra, $rb, $rd), '1,1,1',
	'... held on the three servers');
$rb->cli('DEL', 'idn4');
$px2->retarget($ra);
$px2->cut;
ok( RlockTest::wait_until(
		sub { sq("SELECT state FROM rlock_locks WHERE name = 'idn4'") eq 'lost' },
		60),
	'master 2 lost it, master 3 now leads to master 1: rlock_locks says lost');
($out, $err) = RlockTest::run_sql($rs, "SELECT rlock_redlock_release('idn4')");
is($out, 'f', '... and its release returns false');
$rs->quit;
$_->stop for $px, $px2;
$_->stop for $ra, $rb, $rc, $rd;
$node->append_conf('postgresql.conf', "rlock.watchdog_timeout = '30s'\n");
reload_with($good);

# ---- c) a majority that fails ------------------------------------------
sub connections
{
	my ($i) = @_;
	my $info = $rl->cli($i, 'INFO', 'stats');
	return ($info =~ /total_connections_received:(\d+)/)[0];
}

# wrong password on masters 2 and 3
my $wrong = join(',', $m0->url, $m1->url(password => 'nope'),
	$m2->url(password => 'nope'));
reload_with($wrong);
$psql->quit;
$psql = $node->background_psql('postgres', on_error_stop => 0);
($out, $err, $state) =
  RlockTest::run_sql($psql, "SELECT rlock_redlock_try_acquire('rf1')");
is($state, '28P01', 'try_acquire on a majority with a wrong password: 28P01');
like($err, qr/Redlock "rf1".*2 of its 3 masters failed/,
	'... naming the lock');
like($err, qr/DETAIL:.*master 2 \(.*master 3 \(/s, '... each master\'s cause');
unlike($err, qr/\Q$secret\E|nope/, '... no password');

my @c0 = map { connections($_) } 1, 2;
my $t0 = time;
($out, $err, $state) = RlockTest::run_sql($psql,
	"SELECT rlock_redlock_try_acquire('rf2', wait => '2 seconds')");
my $took = time - $t0;
my @c1 = map { connections($_) } 1, 2;
is($state, '28P01', 'a wait of 2 s on it ends with the same ERROR');
cmp_ok($took, '>=', 1.9, '... once the wait is over');
cmp_ok($took, '<', 2 + 10, '... not much later');
foreach my $k (0, 1)
{
	my $made = $c1[$k] - $c0[$k];
	note "master " . ($k + 2) . ": $made connections during the 2 s wait";
	cmp_ok($made, '<=', 30, "master " . ($k + 2) . ": at most 30 connections in 2 s");
}

# a blocking acquire ended by lock_timeout: the same, as many connections
@c0 = map { connections($_) } 1, 2;
$t0 = time;
($out, $err, $state) = RlockTest::run_sql($psql,
	"SET lock_timeout = '3s'; SELECT rlock_redlock_acquire('rf2b')");
$took = time - $t0;
RlockTest::run_sql($psql, 'RESET lock_timeout');
@c1 = map { connections($_) } 1, 2;
is($state, '28P01', 'a blocking acquire with lock_timeout 3 s ends with that ERROR');
cmp_ok($took, '>=', 2.9, '... once lock_timeout is over');
foreach my $k (0, 1)
{
	my $made = $c1[$k] - $c0[$k];
	note "master " . ($k + 2) . ": $made connections during the 3 s blocking acquire";
	cmp_ok($made, '<=', 30, "master " . ($k + 2) . ": at most 30 connections in 3 s");
}

# the pauses show in pg_stat_activity
my $bg = $node->background_psql('postgres', on_error_stop => 0);
my $bg_pid = $bg->query_safe('SELECT pg_backend_pid()');
chomp $bg_pid;
$bg->query_until(qr/start/, "\\echo start\nSELECT rlock_redlock_acquire('rf3');\n");
ok( RlockTest::wait_until(
		sub {
			sq("SELECT wait_event_type FROM pg_stat_activity WHERE pid = $bg_pid")
			  eq 'Extension'
			  && sq("SELECT state FROM pg_stat_activity WHERE pid = $bg_pid") eq 'active';
		},
		30),
	'a blocking acquire on a failing majority shows as an Extension wait');
sq("SELECT pg_cancel_backend($bg_pid)");
ok( RlockTest::wait_until(
		sub {
			sq("SELECT state FROM pg_stat_activity WHERE pid = $bg_pid") eq 'idle';
		},
		30),
	'... and cancel ends it');
$bg->quit;

# two of three stopped: 08001
reload_with($good);
$psql->quit;
$psql = $node->background_psql('postgres', on_error_stop => 0);
$m1->stop;
$m2->stop;
($out, $err, $state) =
  RlockTest::run_sql($psql, "SELECT rlock_redlock_try_acquire('rf4')");
is($state, '08001', 'try_acquire with two of three masters down: 08001');
like($err, qr/Redlock "rf4"/, '... naming the lock');
$m1->start;
$m2->start;

# no master answers: two of three stalled (no answer within
# rlock.command_timeout), the third down (refused): no master to listen on
# while waiting, so a wait of 2 s ends with an ERROR and the session goes on
$psql->quit;
$psql = $node->background_psql('postgres', on_error_stop => 0);
$rl->pause(0);
$rl->pause(1);
$m2->stop;
($out, $err, $state) = RlockTest::run_sql($psql,
	"SELECT rlock_redlock_try_acquire('rf4b', wait => '2 seconds')");
like($state, qr/^08/,
	"two masters stalled, one down, a wait of 2 s: an ERROR ($state)");
like($err, qr/Redlock "rf4b"/, '... naming the lock');
$rl->resume(0);
$rl->resume(1);
$m2->start;
is($psql->query_safe('SELECT 1'), '1', '... and the session goes on');

# a minority failing, the majority free: acquired
reload_with(join(',', $m0->url, $m1->url(password => 'nope'), $m2->url));
$psql->quit;
$psql = $node->background_psql('postgres', on_error_stop => 0);
($out, $err, $state) =
  RlockTest::run_sql($psql, "SELECT rlock_redlock_try_acquire('rf5', '30 seconds')");
is($out, 't', 'one master of three failing, two free: acquired');
# a majority held by another client (not failing): false, as before
$rl->try_lock(0, 'rf6', 30000, $foreign);
$rl->try_lock(2, 'rf6', 30000, $foreign);
($out, $err, $state) =
  RlockTest::run_sql($psql, "SELECT rlock_redlock_try_acquire('rf6')");
is($out, 'f', 'held by another on the two that answer: false');
is($state, '00000', '... and no ERROR');
$psql->quit;

# ---- d) nothing may ERROR out of COMMIT ---------------------------------
# A session whose file descriptors run out (prlimit lowers its soft limit
# to 3, so that no new descriptor can be made) while it holds a Redlock at
# transaction level, one master down: at COMMIT the masters' round trip
# needs a new wait set (epoll_create1 fails with EMFILE).  The COMMIT
# stands, with a WARNING; the server does not restart; the session goes on.
SKIP:
{
	my $prlimit = `command -v prlimit 2>/dev/null`;
	chomp $prlimit;
	skip 'no prlimit', 6 unless $prlimit;
	reload_with($good);
	my $s = $node->background_psql('postgres', on_error_stop => 0);
	my $spid = $s->query_safe('SELECT pg_backend_pid()');
	chomp $spid;
	# the WAL segment this session writes its commit record to, opened now
	$s->query_safe('BEGIN; SELECT txid_current(); COMMIT');
	$m2->stop;
	($out, $err, $state) = RlockTest::run_sql($s,
		"SET rlock.verify_on_commit = off; BEGIN; SELECT txid_current() > 0; SELECT rlock_redlock_xact_acquire('fd1', '30 seconds')");
	is($state, '00000', 'a Redlock at transaction level, two masters of three up');
	my ($soft) = `$prlimit --pid $spid --nofile --noheadings --output SOFT` =~ /(\d+)/;
	system($prlimit, '--pid', $spid, '--nofile=3:') == 0 or die 'prlimit';
	($out, $err, $state) = RlockTest::run_sql($s, 'COMMIT');
	system($prlimit, '--pid', $spid, "--nofile=$soft:") == 0 or die 'prlimit';
	note "COMMIT: $err";
	is($state, '00000', 'COMMIT without a file descriptor to spare: no ERROR');
	like($err, qr/WARNING:/, '... a WARNING');
	is($s->query_safe('SELECT 1'), '1', '... and the session goes on');
	is( $s->query_safe(
			"SELECT count(*) FROM rlock_locks WHERE name = 'fd1' AND pid = pg_backend_pid()"),
		'0',
		'... believing nothing held');
	$m2->start;
	($out, $err, $state) = RlockTest::run_sql($s,
		"SELECT rlock_redlock_try_acquire('fd2', '30 seconds'), rlock_redlock_release('fd2')");
	is($out, 't|t', '... and takes a Redlock again');
	$s->quit;
}

# ---- nothing restarted, no password logged -------------------------------
my $log = slurp_file($node->logfile);
# (the statements this file sends are logged as sent: log_statement)
my @leaks = grep { /\Q$secret\E/ && !/ (LOG:  statement|STATEMENT): / }
  split /\n/, $log;
is(join("\n", @leaks), '', 'no log line of the server shows a password');
unlike($log, qr/terminated by signal|PANIC/, 'no backend crashed, no PANIC');
my $pid_now = postmaster_pid();
is($pid_now, $pm_pid, 'the postmaster is the same process');

$node->stop;
done_testing();
