# Copyright (c) 2026, rlock developers
#
# Redis Sentinel (rlock.redis_url = 'redis-sentinel://...#mastername'), on
# loopback: a master, 2 replicas (each replicating through its own
# RlockTest::Proxy, so that replication can be stalled) and 3 sentinels,
# with passwords on the data nodes (in the URL) and on the sentinels
# (rlock.sentinel_password_file); two PostgreSQL servers, two databases each.
#
#   a) rlock finds the master through the sentinels, also with the first
#      sentinel of the URL stopped; a wrong master name is a clear 08001.
#   c) unreplicated locks (done first: it needs the proxied replication
#      links of the first master): with the links stalled, an acquisition
#      that no replica acknowledges is refused with 08006 and leaves
#      nothing behind (rlock.replica_acks = 1); with rlock.replica_acks = 0
#      it is granted, and after the master is killed and a replica
#      promoted it is reported lost and its transaction cannot COMMIT.
#   b) the master is killed while sessions hold replicated locks and others
#      wait: new acquisitions work through the new master within a second
#      of the sentinels naming it, the held locks are still held there and
#      renewed there, and the waiters get the locks when they are released.
#   d) sessions of two databases on two servers take one lock in a loop
#      while the master is killed: no two committed critical sections
#      overlap.
#   e) the watchdog worker survives a sentinel restart and a failover: the
#      same process renews the locks on the new master.
#
# Failover times and the gap between the sentinels naming the new master
# and the first acquisition through it are reported with note().
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use RlockTest;

my $data_pw = 'data-secret';
my $sentinel_pw = 'sentinel-secret';

my $s = RlockTest::Sentinel->new(
	replicas => 2,
	sentinels => 3,
	replica_proxies => 1,
	password => $data_pw,
	sentinel_password => $sentinel_pw);
my $name = $s->master_name;

# the sentinels' password, in a file only the server's OS user can read
my $pwfile = PostgreSQL::Test::Utils::tempdir('sentinelpw') . '/sentinel.pw';
{
	open my $fh, '>', $pwfile or die "$pwfile: $!";
	print $fh "$sentinel_pw\n";
	close $fh;
	chmod 0600, $pwfile or die "chmod $pwfile: $!";
}

# Locks without a lease get 15 s, renewed every 5 s: a lock renewed just
# before the master dies counts as lost (fail closed) 12 s after that
# renewal, at the earliest 7 s after the kill: later than a failover (about
# 3 s with down-after 2 s) plus the worker's next look at the sentinels
# (about 1 s) and its next renewal.
my %conf = (
	url => $s->url,
	watchdog_timeout => '15s',
	dbs => [ 'postgres', 'db2' ],
	extra_conf => "rlock.sentinel_password_file = '$pwfile'\n");
my $node = RlockTest::new_node('sentinel_a', undef, %conf);
my $node_b = RlockTest::new_node('sentinel_b', undef, %conf);
foreach my $n ($node, $node_b)
{
	foreach my $db ('postgres', 'db2')
	{
		$n->safe_psql($db, 'CREATE TABLE guarded (v int)');
		RlockTest::create_probe_acquire($n, $db);
	}
}

my ($out, $err, $state, $t0, $elapsed);

sub watchdog_pid
{
	my ($n) = @_;
	return RlockTest::sql($n,
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'rlock watchdog'");
}

# Kill the master, wait for the failover; returns (the new master, the
# time the sentinels named it, the failover time in s).  Ends the file if
# no failover happens.
sub fail_over
{
	my ($why) = @_;
	my $old = $s->master;
	my $killed_at = $s->kill_master;
	my $t_call = time();
	my $secs = $s->wait_failover($old->port, 60);
	RlockTest::stop_file("no failover after the master was killed ($why)")
	  unless defined $secs;
	my $named_at = $t_call + $secs;
	my $new = $s->master;
	note sprintf('%s: master %s killed, %s named by a sentinel %.3f s later',
		$why, $old->where, $new->where, $named_at - $killed_at);
	return ($old, $new, $named_at, $named_at - $killed_at);
}

# the watchdog workers, which must live through everything below
my %wd_start = map { $_->name => watchdog_pid($_) } $node, $node_b;

# ---- a) the master through the sentinels ----

my $m = $s->master;
my $sa = $node->background_psql('postgres', on_error_stop => 0);
($out, $err) = RlockTest::run_sql($sa, "SELECT rlock_try_acquire('a1', '1 minute')");
is("$out/$err", 't/', 'rlock finds the master through the sentinels');
my $holder_a = RlockTest::holder_of($sa);
is($m->cli('HGET', 'a1', $holder_a), '1',
	'the lock is on the master the sentinels name');
is(RlockTest::sql($node, "SELECT node, state FROM rlock_locks WHERE name = 'a1'"),
	$m->where . '|held', 'rlock_locks.node names that master');
is(RlockTest::sql($node, 'SELECT node, role, replicas, round_trip IS NOT NULL FROM rlock_nodes()'),
	$m->where . '|master|2|t',
	'rlock_nodes(): one row, the master and its two replicas');
($out, $err) = RlockTest::run_sql($sa, "SELECT rlock_release('a1')");
is("$out/$err", 't/', 'and the lock is released there');
is($m->cli('EXISTS', 'a1'), '0', 'nothing is left on the master');

$s->stop_sentinel(0);
($out, $err, $state) = RlockTest::fresh_sql($node, 'postgres',
	"SELECT rlock_try_acquire('a2', '10s'), rlock_release('a2')");
is("$out/$err", 't|t/',
	'the first sentinel of the URL stopped: a new session still works');

RlockTest::set_gucs($node, 'rlock.redis_url' => $s->url(master_name => 'nosuch'));
$t0 = time();
($out, $err, $state) = RlockTest::fresh_sql($node, 'postgres', "SELECT rlock_try_acquire('a3', '10s')");
$elapsed = time() - $t0;
is($state, '08001', 'a master name the sentinels do not know: SQLSTATE 08001');
like($err, qr/ERROR:  .*"nosuch"/s, 'the error names the master name');
note "wrong master name: $err";
note sprintf('the error came after %.3f s', $elapsed);
unlike($err, qr/\Q$data_pw\E|\Q$sentinel_pw\E/, 'and shows no password');

RlockTest::set_gucs($node, 'rlock.redis_url' => $s->url);
($out, $err, $state) = RlockTest::fresh_sql($node, 'postgres',
	"SELECT rlock_try_acquire('a4', '10s'), rlock_release('a4')");
is("$out/$err", 't|t/',
	'the right name again: the master is found with the first sentinel stopped');
($out, $err) = RlockTest::run_sql($sa, 'SELECT rlock_ping() IS NOT NULL');
is("$out/$err", 't/', 'an older session follows the reload by itself');
$s->start_sentinel(0);

# ---- c) unreplicated locks: refused up front, or lost at the failover ----

my @links = $s->replica_links;
my $sc = $node->background_psql('postgres', on_error_stop => 0);
# a blocking acquisition that retried for ever would end here, not hang
RlockTest::run_sql($sc, "SET lock_timeout = '10s'");
my $holder_c = RlockTest::holder_of($sc);
$_->stall for @links;
note 'both replication links stalled';

my $refusals0 = RlockTest::stat_of($node, 'replica_ack_refusals');
RlockTest::run_sql($sc, 'BEGIN');
$t0 = time();
($out, $err, $state) = RlockTest::run_sql($sc, "SELECT rlock_xact_acquire('unrepl')");
$elapsed = time() - $t0;
is($state, '08006', 'replica_acks = 1, no replica answers: SQLSTATE 08006');
like($err, qr/ERROR:  lock "unrepl" was not acknowledged by enough Redis replicas/,
	'the error says the lock was not acknowledged by enough replicas');
note sprintf('refused after %.3f s (replica_ack_timeout 1 s)', $elapsed);
cmp_ok($elapsed, '<', 1 + 2, 'after replica_ack_timeout, not hanging');
RlockTest::run_sql($sc, 'ROLLBACK');
is($m->cli('EXISTS', 'unrepl'), '0', 'nothing is left on the master');
($out, $err) = RlockTest::run_sql($sc,
	"SELECT rlock_is_held('unrepl'), rlock_hold_count('unrepl')");
is("$out/$err", 'f|0/', 'the session holds nothing');
is(RlockTest::sql($node, "SELECT count(*) FROM rlock_locks WHERE name = 'unrepl'"),
	'0', 'rlock_locks shows nothing');

($out, $err, $state) = RlockTest::run_sql($sc, "SELECT rlock_try_acquire('unrepl_s')");
is($state, '08006', 'a session-level acquisition is refused the same way');
is($m->cli('EXISTS', 'unrepl_s'), '0', 'and leaves nothing on the master');
is(RlockTest::stat_of($node, 'replica_ack_refusals') - $refusals0, 2,
	'rlock_stats.replica_ack_refusals counts both refusals');

RlockTest::set_gucs($node, 'rlock.replica_acks' => 0);
RlockTest::run_sql($sc, 'BEGIN');
($out, $err) = RlockTest::run_sql($sc, "SELECT rlock_xact_acquire('unrepl')");
is($err, '', 'replica_acks = 0: the same acquisition is granted without acknowledgement');
RlockTest::run_sql($sc, 'INSERT INTO guarded VALUES (1)');
is($m->cli('HGET', 'unrepl', $holder_c), '1', 'the lock is on the master');
is(join(',', map { scalar $_->cli('EXISTS', 'unrepl') } $s->replicas), '0,0',
	'and on no replica');

my $log_a = -s $node->logfile;
my $log_b = -s $node_b->logfile;
my ($old, $new, $named_at, $failover_s) = fail_over('c');
ok( RlockTest::wait_until(
		sub {
			RlockTest::sql($node, "SELECT state FROM rlock_locks WHERE name = 'unrepl'") eq 'lost';
		},
		30),
	'after the failover the lock no replica had is reported lost');
ok( RlockTest::wait_until(
		sub { RlockTest::log_has($node, $log_a, qr/LOG:  rlock watchdog: lock "unrepl" held by \S+ \(pid \d+\) was lost/) },
		10),
	'with a LOG line');
unlike(slurp_file($node->logfile, $log_a),
	qr/lock "unrepl".*\n.*DETAIL:  Its lease could not be renewed for too long/,
	'found missing on the new master, not given up for want of renewal');
($out, $err) = RlockTest::query_err($sc, 'COMMIT');
like($err, qr/ERROR:  .*lock "unrepl"/, 'the transaction holding it cannot COMMIT');
is(RlockTest::sql($node, 'SELECT count(*) FROM guarded'), '0',
	'and its write is rolled back');
is($new->cli('EXISTS', 'unrepl'), '0', 'the new master has no such lock');

foreach my $n ($node, $node_b)
{
	my $off = $n == $node ? $log_a : $log_b;
	my $where = quotemeta $new->where;
	ok( RlockTest::wait_until(
			sub { RlockTest::log_has($n, $off, qr/LOG:  rlock: Redis master "$name" is now $where\b/) },
			10),
		$n->name . ': the LOG says the master is now ' . $new->where);
	ok(RlockTest::wait_until(sub { RlockTest::stat_of($n, 'failovers') >= 1 }, 10),
		$n->name . ': rlock_stats.failovers counts the failover');
}
ok( RlockTest::wait_until(
		sub {
			RlockTest::sql($node, 'SELECT node, role, replicas FROM rlock_nodes()') eq
			  $new->where . '|master|1';
		},
		10),
	'rlock_nodes() names the new master with its one replica');

RlockTest::set_gucs($node, 'rlock.replica_acks' => 1);
$_->stop for @links;
$s->revive($old);
ok( RlockTest::wait_until(
		sub {
			RlockTest::sql($node, 'SELECT replicas FROM rlock_nodes()') eq '2';
		},
		10),
	'the old master, back as a replica, counts in rlock_nodes()');

# ---- b) replicated locks, waiters, and new acquisitions over a failover ----

my $h1 = $node->background_psql('postgres', on_error_stop => 0);
my $h2 = $node_b->background_psql('postgres', on_error_stop => 0);
my $w1 = $node->background_psql('db2', on_error_stop => 0);
my $w2 = $node_b->background_psql('db2', on_error_stop => 0);
my $p1 = $node->background_psql('postgres', on_error_stop => 0);
my $p2 = $node_b->background_psql('postgres', on_error_stop => 0);
($out, $err) = RlockTest::run_sql($h1, "SELECT rlock_acquire('held1')");
is($err, '', 'a session of server A holds "held1" (no lease, replica_acks = 1)');
($out, $err) = RlockTest::run_sql($h2, "SELECT rlock_acquire('held2')");
is($err, '', 'a session of server B holds "held2"');
my %holder = (held1 => RlockTest::holder_of($h1), held2 => RlockTest::holder_of($h2));
ok( RlockTest::wait_until(
		sub {
			foreach my $r ($s->replicas)
			{
				foreach my $k (keys %holder)
				{
					return 0 unless ($r->cli('HGET', $k, $holder{$k}) // '') eq '1';
				}
			}
			return 1;
		},
		10),
	'both locks are on both replicas');
RlockTest::start_bg($w1, "SELECT rlock_try_acquire('held1', wait => '90s')");
RlockTest::start_bg($w2, "SELECT rlock_try_acquire('held2', wait => '90s')");
RlockTest::wait_for_rlock_waiters($node, 'db2', 1, "%'held1'%");
RlockTest::wait_for_rlock_waiters($node_b, 'db2', 1, "%'held2'%");
note 'a session of each server waits for the other lock';
my %renewals0 = map { $_->name => RlockTest::stat_of($_, 'renewals') } $node, $node_b;
my %failovers0 = map { $_->name => RlockTest::stat_of($_, 'failovers') } $node, $node_b;

# the probes start right after the kill and try every 10 ms
RlockTest::run_sql($_, "SET rlock.connect_timeout = '500ms'") for $p1, $p2;
$m = $s->master;
my $killed_at = $s->kill_master;
RlockTest::start_bg($p1, "SELECT * FROM probe_acquire('probe1', '60s')");
RlockTest::start_bg($p2, "SELECT * FROM probe_acquire('probe2', '60s')");
my $t_call = time();
my $secs = $s->wait_failover($m->port, 60);
RlockTest::stop_file('no failover after the master was killed (b)')
  unless defined $secs;
$named_at = $t_call + $secs;
$new = $s->master;
$old = $m;
note sprintf('b: master %s killed, %s named by a sentinel %.3f s later',
	$old->where, $new->where, $named_at - $killed_at);
foreach my $p ([ 'A', $p1 ], [ 'B', $p2 ])
{
	my ($srv, $sess) = @$p;
	ok(RlockTest::wait_until(sub { RlockTest::bg_done($sess) }, 70),
		"server $srv: the probe ended");
	($out, $err, $state) = RlockTest::bg_result($sess);
	my ($ok_at, $errors, $last) = split /\|/, $out, 4;
	ok(defined $ok_at && $ok_at ne '',
		"server $srv: a new acquisition works through the new master, no setting changed")
	  or diag("probe: $out / $err");
	next unless defined $ok_at && $ok_at ne '';
	my $gap = $ok_at - $named_at;
	note sprintf('server %s: first acquisition %.3f s after the sentinel named the new master '
		  . '(%.3f s after the kill), %d failed attempts before, the last: %s',
		$srv, $gap, $ok_at - $killed_at, $errors, $last // '');
	cmp_ok($gap, '<', 1.0 + 0.5,
		"server $srv: within 1 s (+ 0.5 s margin) of the sentinel naming the new master");
}

foreach my $k (sort keys %holder)
{
	is($new->cli('HGET', $k, $holder{$k}), '1', "\"$k\" is still held on the new master");
	my ($renewed, $low) = RlockTest::renewed_on($new, $k, 20);
	ok($renewed, "\"$k\" is renewed there (its PTTL went up from $low ms)");
}
foreach my $n ($node, $node_b)
{
	my $k = $n == $node ? 'held1' : 'held2';
	ok( RlockTest::wait_until(
			sub {
				RlockTest::sql($n, "SELECT state, node FROM rlock_locks WHERE name = '$k'") eq
				  'held|' . $new->where;
			},
			10),
		$n->name . ": rlock_locks shows \"$k\" held on the new master");
	cmp_ok(RlockTest::stat_of($n, 'renewals'), '>', $renewals0{ $n->name },
		$n->name . ': rlock_stats.renewals grew');
	cmp_ok(RlockTest::stat_of($n, 'failovers'), '>', $failovers0{ $n->name },
		$n->name . ': rlock_stats.failovers counts this failover');
}

ok(!RlockTest::bg_done($w1) && !RlockTest::bg_done($w2), 'the waiters still wait while the locks are held');
foreach my $c ([ $h1, $w1, 'held1' ], [ $h2, $w2, 'held2' ])
{
	my ($h, $w, $k) = @$c;
	($out, $err) = RlockTest::run_sql($h, "SELECT rlock_release('$k')");
	is("$out/$err", 't/', "the holder releases \"$k\" on the new master, no warning");
	$t0 = time();
	my $done = RlockTest::wait_until(sub { RlockTest::bg_done($w) }, 30);
	$elapsed = time() - $t0;
	($out, $err, $state) = RlockTest::bg_result($w);
	is("$out/$state", 't/00000', "the waiter for \"$k\" gets it")
	  or diag("waiter: $out / $err");
	note sprintf('the waiter for "%s" got it %.3f s after the release', $k, $elapsed);
	cmp_ok($elapsed, '<', 3,
		'woken by the release message on the new master, not by a recheck (lease 15 s)');
	($out, $err) = RlockTest::run_sql($w, "SELECT rlock_release('$k')");
	is("$out/$err", 't/', 'and releases it');
}
$s->revive($old);

# ---- d) exclusion over a failover: 4 sessions, 2 servers, 2 databases each ----

# Each loop: take "excl" for the transaction (a 10 s lease), note when,
# write the interval in its own database, COMMIT (RlockTest::Exclusion).
# Errors (during the failover) roll the transaction back and the next
# iteration begins.
my $ex = RlockTest::Exclusion->new(
	sessions => [ map { my $n = $_; map { [ $n, $_ ] } 'postgres', 'db2' } $node, $node_b ],
	lock => 'excl',
	lease => '10s',
	timeout_s => 120);

ok($ex->drive(sub { $ex->sections >= 20 }, 60),
	'four sessions on two servers take turns at "excl"');
my $before_kill = $ex->sections;
($old, $new, $named_at, $failover_s) = fail_over('d');
ok($ex->drive(sub { $ex->sections($named_at) >= 20 }, 60),
	'after the failover they take turns through the new master');
$ex->finish;
foreach my $sess ($ex->session_names)
{
	my @errs = @{ $ex->errors->{$sess} };
	note "$sess: " . scalar(@errs) . ' errors'
	  . (@errs ? ", e.g. $errs[0]" : '');
}
my @intervals = @{ $ex->intervals };
my %by_sess = %{ $ex->by_sess };
my $after_failover = grep { $_->[0] > $named_at } @intervals;
my $killed_d = $named_at - $failover_s;
my $across = grep { $_->[0] < $killed_d && $_->[1] > $killed_d } @intervals;
note sprintf('%d critical sections committed (%d before the kill, %d across it, %d after the new master was named), '
	  . '%d errors; per session: %s',
	scalar(@intervals), $before_kill, $across, $after_failover, $ex->error_count,
	join(', ', map { "$_ $by_sess{$_}" } sort keys %by_sess));
$ex->check;
$s->revive($old);

# ---- e) the watchdog survives a sentinel restart and a failover ----

my %wd = map { $_->name => watchdog_pid($_) } $node, $node_b;
my $se = $node->background_psql('postgres', on_error_stop => 0);
($out, $err) = RlockTest::run_sql($se,
	"SELECT count(*) FROM generate_series(1, 100) i WHERE rlock_try_acquire('e:' || i)");
is("$out/$err", '100/', 'a session holds 100 locks without a lease');
my $holder_e = RlockTest::holder_of($se);
ok( RlockTest::wait_until(
		sub { !grep { ($_->cli('EXISTS', 'e:100') // '') ne '1' } $s->replicas },
		10),
	'they are on both replicas');

$s->stop_sentinel(0);
# two cycles, so that one began after the stop
my $r0 = RlockTest::stat_of($node, 'renewals');
ok(RlockTest::wait_until(sub { RlockTest::stat_of($node, 'renewals') >= $r0 + 200 }, 30),
	'with the first sentinel stopped the watchdog keeps renewing');
$s->start_sentinel(0);
$r0 = RlockTest::stat_of($node, 'renewals');
ok(RlockTest::wait_until(sub { RlockTest::stat_of($node, 'renewals') >= $r0 + 100 }, 30),
	'and after it is back');
# kill the master right as a renewal cycle has begun
my $c0 = RlockTest::stat_of($node, 'renewal_cycles');
RlockTest::wait_until(sub { RlockTest::stat_of($node, 'renewal_cycles') > $c0 }, 30);
($old, $new, $named_at, $failover_s) = fail_over('e');
my ($renewed, $low) = RlockTest::renewed_on($new, 'e:1', 20);
ok($renewed, "the locks are renewed on the new master (PTTL of e:1 went up from $low ms)");
$r0 = RlockTest::stat_of($node, 'renewals');
ok(RlockTest::wait_until(sub { RlockTest::stat_of($node, 'renewals') >= $r0 + 100 }, 20),
	'every one of them, again and again');
is(RlockTest::sql($node,
		"SELECT count(*) FROM rlock_locks WHERE name LIKE 'e:%' AND state = 'held' AND node = '"
		  . $new->where . "'"),
	'100', 'rlock_locks shows all 100 held on the new master');
foreach my $n ($node, $node_b)
{
	is(watchdog_pid($n), $wd{ $n->name },
		$n->name . ': the same watchdog process did all that (pid ' . $wd{ $n->name } . ')');
}
foreach my $n ($node, $node_b)
{
	is(watchdog_pid($n), $wd_start{ $n->name },
		$n->name . ': and the same since the start of this file, through four failovers');
}
is($new->cli('HGET', 'e:50', $holder_e), '1', 'e:50 is held on the new master');
($out, $err) = RlockTest::run_sql($se, 'SELECT rlock_release_all()');
is("$out/$err", '100/', 'the holder releases them all, no warning');

$_->quit for $sa, $sc, $h1, $h2, $w1, $w2, $p1, $p2, $se;
done_testing();
