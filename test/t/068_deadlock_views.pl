# Copyright (c) 2026, rlock developers
#
# rlock_waits and rlock_blocking_pids across two servers, and a waiter
# killed with SIGKILL (SPEC.md section 5.6, issue 42).  Two PostgreSQL
# servers, "alpha" and "beta", on one Redis.
#
#   5. A session of alpha holds vw_x; four sessions wait for it, two on each
#      server.  rlock_waits, read on either server, lists the four waiters
#      (server, pid, database, name, kind) each blocked by alpha's holder
#      (its server, pid and holder id); rlock_blocking_pids of an alpha
#      waiter is {holder pid}, of a beta waiter {} (its holder is not on
#      beta); a session blocked on a row lock shows the row's locker.  A
#      lock held with an owner token shows its holder as '<owner token>' to
#      a superuser and as '<insufficient privilege>' to a plain role, never
#      the token or the digest Redis keeps.
#   4. A waiter of alpha (K: holds kw_1, waits for kw_2 held by H of beta)
#      is killed with SIGKILL.  After the crash restart its wait disappears
#      from rlock_waits on both servers within its record's TTL (6 s; polled
#      for 20), and the record from Redis; the crash clean-up releases kw_1.
#      A new session N of alpha takes K's role (holds kw_1) and H waits for
#      kw_1, checking every 20 ms: that would be a cycle only if K's wait
#      (K waits for kw_2, held by H) were still believed and taken for N's.
#      H waits 0.5 s and more, then gets kw_1 when N lets go: no 40P01.  The
#      same again with K's wait record put back (as it is in the 6 s before
#      it expires) and a twin of it with N's pid (a dead waiter whose pid a
#      new session got): neither is N's wait.
#
# Without src/sql/waits.c and src/locks/wait_read.c, part 5 fails (no
# rlock_waits, no rlock_blocking_pids); without the record's expiry or the
# reading that leaves out expired records (scripts_wait.c), part 4's rows
# never vanish; a check that matched a waiter to a holder by server name
# and pid rather than by holder id would raise 40P01 in part 4's last case.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use RlockTest;

my $redis = RlockTest::Redis->new;
my $one = RlockTest::new_node('dv_alpha', $redis,
	extra_conf => "rlock.server_name = 'alpha'\nrestart_after_crash = on\n");
my $two = RlockTest::new_node('dv_beta', $redis,
	extra_conf => "rlock.server_name = 'beta'\n");
$one->safe_psql('postgres',
	'CREATE TABLE rows_t (id int PRIMARY KEY, v int); INSERT INTO rows_t VALUES (1, 0)');
$two->safe_psql('postgres', 'CREATE ROLE plain LOGIN');

sub sess
{
	my ($node) = @_;
	my $s = $node->background_psql('postgres', on_error_stop => 0);
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	chomp $pid;
	return ($s, $pid);
}

sub q1
{
	my ($s, $sql) = @_;
	my ($out, $err, $st) = RlockTest::run_sql($s, $sql);
	note "$sql: $err" if $err ne '';
	$out =~ s/^\s+|\s+$//g;
	return $out;
}

# ---------------------------------------------------------------------------
# 5. the views under contention
# ---------------------------------------------------------------------------
my ($h, $hpid) = sess($one);
q1($h, "SELECT rlock_acquire('vw_x')");
my $hholder = RlockTest::holder_of($h);
my (@w, %wpid);
for my $i (0 .. 3)
{
	my ($node, $srv) = $i % 2 ? ($two, 'beta') : ($one, 'alpha');
	my ($s, $pid) = sess($node);
	RlockTest::start_bg($s, "SELECT rlock_acquire('vw_x')");
	push @w, { s => $s, pid => $pid, srv => $srv };
}
my @want = sort map { "$_->{srv}|$_->{pid}|postgres|vw_x" } @w;
my $rows_sql =
  "SELECT server || '|' || pid || '|' || database || '|' || name FROM rlock_waits "
  . "WHERE name = 'vw_x' ORDER BY 1";
foreach my $n ($one, $two)
{
	my $got = '';
	RlockTest::wait_until(
		sub { $got = RlockTest::sql($n, $rows_sql); $got eq join("\n", @want) }, 30);
	is($got, join("\n", @want),
		'part 5: rlock_waits on ' . $n->name . ' lists the four waiters of both servers');
	is( RlockTest::sql($n,
			"SELECT count(*) FROM rlock_waits WHERE name = 'vw_x' AND kind = 'exclusive' "
			  . "AND blocking_servers = ARRAY['alpha'] AND blocking_pids = ARRAY[$hpid] "
			  . "AND blocking_holders = ARRAY['$hholder'] AND waiting_since <= now()"),
		'4',
		'part 5: on ' . $n->name . ', each is blocked by alpha\'s holder (server, pid, holder id)')
	  or diag(RlockTest::sql($n, "SELECT * FROM rlock_waits"));
}
is(RlockTest::sql($one, "SELECT rlock_blocking_pids($w[0]{pid})"),
	"{$hpid}", 'part 5: rlock_blocking_pids of an alpha waiter is {alpha\'s holder}');
is(RlockTest::sql($one, "SELECT rlock_blocking_pids($w[2]{pid})"),
	"{$hpid}", 'part 5: and of the other alpha waiter');
is(RlockTest::sql($two, "SELECT rlock_blocking_pids($w[1]{pid})"),
	'{}', 'part 5: rlock_blocking_pids of a beta waiter is {} (its holder is on alpha)');
is(RlockTest::sql($one, "SELECT rlock_blocking_pids($hpid)"),
	'{}', 'part 5: the holder is blocked by no one');

# a PostgreSQL row lock
my ($r1, $r1pid) = sess($one);
my ($r2, $r2pid) = sess($one);
q1($r1, 'BEGIN');
q1($r1, 'UPDATE rows_t SET v = v + 1 WHERE id = 1');
RlockTest::start_bg($r2, 'UPDATE rows_t SET v = v + 1 WHERE id = 1');
ok( RlockTest::wait_until(
		sub {
			RlockTest::sql($one,
				"SELECT wait_event_type FROM pg_stat_activity WHERE pid = $r2pid") eq 'Lock';
		},
		30),
	'part 5: a session waits for a row lock');
is(RlockTest::sql($one, "SELECT rlock_blocking_pids($r2pid)"),
	"{$r1pid}", 'part 5: rlock_blocking_pids shows the row\'s locker');
q1($r1, 'COMMIT');
ok(RlockTest::wait_until(sub { RlockTest::bg_done($r2) }, 30),
	'part 5: the row lock waiter goes on');
RlockTest::bg_result($r2);

# the holder lets go: the waiters take vw_x one by one, in any order
q1($h, "SELECT rlock_release('vw_x')");
my @left = @w;
while (@left)
{
	my $x;
	RlockTest::wait_until(
		sub { ($x) = grep { RlockTest::bg_done($_->{s}) } @left; defined $x }, 30)
	  or last;
	my ($o, $e, $st) = RlockTest::bg_result($x->{s});
	is($st, '00000', "part 5: waiter $x->{srv} $x->{pid} acquires") or diag($e);
	q1($x->{s}, "SELECT rlock_release('vw_x')");
	@left = grep { $_ != $x } @left;
}
is(scalar(@left), 0, 'part 5: every waiter acquired in turn');

# an owner token: masked
my $token = 'tok-secret-068';
q1($h, "SELECT rlock_acquire('vw_tok', lease => '10 minutes', owner => '$token')");
my @fields = grep { $_ ne '' } split /\n/, $redis->cli('HKEYS', 'vw_tok');
is(scalar(@fields), 1, 'part 5: the lock held with an owner token has one holder field');
my $digest = $fields[0] // 'none';
my ($tw, $twpid) = sess($two);
RlockTest::start_bg($tw, "SELECT rlock_acquire('vw_tok')");
my $tok_sql = "SELECT blocking_holders FROM rlock_waits WHERE name = 'vw_tok'";
ok(RlockTest::wait_until(sub { RlockTest::sql($two, $tok_sql) ne '' }, 30),
	'part 5: the token holder\'s waiter is listed');
is(RlockTest::sql($two, $tok_sql), '{"<owner token>"}',
	'part 5: a superuser sees the holder as <owner token>');
my ($rc, $plain, $perr) = $two->psql('postgres', $tok_sql, extra_params => [ '-U', 'plain' ]);
is($plain, '{"<insufficient privilege>"}',
	'part 5: a plain role sees it as <insufficient privilege>')
  or diag($perr);
($rc, my $all, $perr) = $two->psql('postgres', 'SELECT w::text FROM rlock_waits w',
	extra_params => [ '-U', 'plain' ]);
ok($all ne '' && index($all, $token) < 0 && index($all, $digest) < 0,
	'part 5: no row shows the plain role the token or its digest')
  or diag("$all $perr");
($rc, $all, $perr) = $two->psql('postgres', 'SELECT w::text FROM rlock_waits w');
ok($all ne '' && index($all, $token) < 0 && index($all, $digest) < 0,
	'part 5: nor the superuser');
q1($h, "SELECT rlock_release('vw_tok', owner => '$token')");
ok(RlockTest::wait_until(sub { RlockTest::bg_done($tw) }, 30),
	'part 5: the token holder\'s waiter acquires once it is released');
RlockTest::bg_result($tw);
q1($tw, 'SELECT rlock_release_all()');
$_->{s}->quit foreach @w;
$_->quit foreach ($h, $r1, $r2, $tw);

# ---------------------------------------------------------------------------
# 4. a waiter killed with SIGKILL
# ---------------------------------------------------------------------------
my ($hb, $hbpid) = sess($two);
q1($hb, "SELECT rlock_acquire('kw_2')");
my ($k, $kpid) = sess($one);
my $kholder = RlockTest::holder_of($k);
q1($k, "SELECT rlock_acquire('kw_1')");
RlockTest::start_bg($k, "SELECT rlock_acquire('kw_2')");
my $krec = "{rlock:servers}:wait:$kholder";
my $k_rows = "SELECT count(*) FROM rlock_waits WHERE pid = $kpid";
ok( RlockTest::wait_until(
		sub {
			RlockTest::sql($two, $k_rows) eq '1' && RlockTest::sql($one, $k_rows) eq '1';
		},
		30),
	'part 4: K\'s wait is listed on both servers');
my %kfields = split /\n/, $redis->cli('HGETALL', $krec);
ok(exists $kfields{since}, 'part 4: K\'s wait record is in Redis')
  or diag(join ' ', %kfields);
# the crash clean-up releases what the holds file lists
my $file = $one->data_dir . '/pg_stat_tmp/rlock_holds';
ok( RlockTest::wait_until(
		sub { -e $file && index(slurp_file($file), 'kw_1') >= 0 }, 30),
	'part 4: alpha\'s worker lists K\'s hold in its holds file');

my $t_kill = time();
ok(RlockTest::kill_backend_and_wait_restart($one, $kpid),
	'part 4: alpha restarts after K is killed');
note sprintf('part 4: alpha accepts connections %.2f s after the kill', time() - $t_kill);
my $gone = RlockTest::wait_until(
	sub {
		RlockTest::sql($two, $k_rows) eq '0' && RlockTest::sql($one, $k_rows) eq '0';
	},
	20);
my $gone_s = time() - $t_kill;
ok($gone, 'part 4: K\'s wait is listed on neither server any more');
note sprintf('part 4: K\'s wait was gone from both views %.2f s after the kill', $gone_s);
cmp_ok($gone_s, '<', 15, 'part 4: within its record\'s TTL (6 s), give or take');
is($redis->cli('EXISTS', $krec), '0', 'part 4: K\'s wait record is gone from Redis');

my ($n, $npid) = sess($one);
ok( RlockTest::wait_until(sub { q1($n, "SELECT rlock_try_acquire('kw_1')") eq 't' }, 30),
	'part 4: the crash clean-up released kw_1; N takes it');
q1($hb, "SET rlock.deadlock_timeout = '20ms'");

# H waits for kw_1 (held by N) for 0.5 s and more, then N lets go
sub pattern
{
	my ($label) = @_;
	RlockTest::start_bg($hb, "SELECT rlock_acquire('kw_1')");
	ok( RlockTest::wait_until(
			sub {
				RlockTest::sql($two,
					"SELECT count(*) FROM rlock_waits WHERE pid = $hbpid AND server = 'beta' "
					  . "AND waiting_since < now() - interval '0.5 s'") eq '1'
				  || RlockTest::bg_done($hb);
			},
			30),
		"part 4, $label: H has waited 0.5 s for kw_1, checking every 20 ms");
	ok(!RlockTest::bg_done($hb), "part 4, $label: H still waits");
	q1($n, "SELECT rlock_release('kw_1')");
	ok(RlockTest::wait_until(sub { RlockTest::bg_done($hb) }, 30),
		"part 4, $label: H's wait ends once N lets go");
	my ($o, $e, $st) = RlockTest::bg_result($hb);
	is($st, '00000', "part 4, $label: H acquires kw_1, no 40P01") or diag($e);
	q1($hb, "SELECT rlock_release('kw_1')");
	return;
}
pattern('K\'s record expired');

# K's record put back, with a twin that has N's pid: still no cycle
ok( RlockTest::wait_until(sub { q1($n, "SELECT rlock_try_acquire('kw_1')") eq 't' }, 30),
	'part 4: N takes kw_1 again');
my ($old_uuid) = $kholder =~ /^(.*):\d+$/;
# (should N have K's very pid, K's record is the twin already)
my $twin = "$old_uuid:$npid";
my $nrec = $npid == $kpid ? 1 : 2;
my $far = (time() + 600) * 1000;
foreach my $rec ([ $kholder, $kpid ], [ $twin, $npid ])
{
	my %f = (%kfields, pid => $rec->[1]);
	$redis->cli('HSET', "{rlock:servers}:wait:$rec->[0]", %f);
	$redis->cli('PEXPIRE', "{rlock:servers}:wait:$rec->[0]", 120_000);
	$redis->cli('ZADD', '{rlock:servers}:waits', $far, $rec->[0]);
}
is( RlockTest::sql($two,
		"SELECT count(*) FROM rlock_waits WHERE pid IN ($kpid, $npid) AND name = 'kw_2'"),
	$nrec, 'part 4: the dead waiter\'s record and its twin with N\'s pid are read');
pattern('K\'s record and a twin with N\'s pid');
$redis->cli('DEL', "{rlock:servers}:wait:$kholder", "{rlock:servers}:wait:$twin");
$redis->cli('ZREM', '{rlock:servers}:waits', $kholder, $twin);
$_->quit foreach ($hb, $n);

done_testing();
