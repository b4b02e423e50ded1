# Copyright (c) 2026, rlock developers
#
# Semaphores and count-down latches on Redis Sentinel (rlock.redis_url =
# 'redis-sentinel://...#mastername'): a master, 2 replicas (each through
# its own RlockTest::Proxy, so that replication can be stalled) and 3
# sentinels; rlock.replica_acks = 2 (every acquisition waits for both
# replicas).  What SPEC 6 and 10 say of locks, asserted for permits:
#
#   a) through the sentinels: permits taken in session and transaction
#      scope are on the master, acknowledged (WAIT behind the script: both
#      replicas have the ids when the call returns), renewed by the watchdog
#      (renewed_at moves, the scores go up), given back at COMMIT and on
#      release; a waiter is woken by that COMMIT; a latch await is woken by
#      the count-down to zero.
#   b) the replication links stalled: an acquisition of permits no replica
#      acknowledges is refused (08006) and undone (no id out, the permits
#      available as before, an earlier hold of the session kept); with
#      rlock.replica_acks = 0 it is granted, and after the master is killed
#      and a replica promoted it is reported lost (LOG line, rlock_locks)
#      and its transaction cannot COMMIT: permits that did not survive the
#      failover are lost, loudly.
#   c) the master killed while permits are held (replicated), a waiter
#      waits and a latch is awaited: afterwards the permits are on the new
#      master, held there in rlock_locks and renewed there, the transaction
#      holding one commits (the check before COMMIT asks the new master),
#      which wakes the waiter; the await ends at the count-down to zero; new
#      acquisitions work on the new master.
#
# Nothing here depends on timing: every wait is wait_until with a generous
# limit.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use RlockTest;

my $s = RlockTest::Sentinel->new(
	replicas => 2,
	sentinels => 3,
	replica_proxies => 1);
my $mname = $s->master_name;

# Permits without a lease get 15 s, renewed every 5 s: one renewed just
# before the master dies is given up (fail closed) 12 s after that renewal
# at the earliest, later than a failover (about 3 s) plus the worker's next
# look at the sentinels and its next renewal.
my $node = RlockTest::new_node('syncsent', undef,
	url => $s->url,
	watchdog_timeout => '15s',
	extra_conf => "rlock.replica_acks = 2\nrlock.replica_ack_timeout = '1s'\n");
$node->safe_psql('postgres', 'CREATE TABLE guarded (v int)');

my @sessions;
sub session
{
	my $sess = $node->background_psql('postgres', on_error_stop => 0);
	push @sessions, $sess;
	return $sess;
}

sub sql
{
	my ($sess, $q) = @_;
	my ($out, $err, $state) = RlockTest::run_sql($sess, $q);
	return wantarray ? ($out, $err, $state) : $out;
}

sub zcard { return $_[0]->cli('ZCARD', '{jobs}:timeout') // ''; }

# Kill the master, wait for the failover; returns (the old master, the
# new one).  Ends the file if no failover happens.
sub fail_over
{
	my ($why) = @_;
	my $old = $s->master;
	my $killed_at = $s->kill_master;
	my $secs = $s->wait_failover($old->port, 60);
	RlockTest::stop_file("no failover after the master was killed ($why)")
	  unless defined $secs;
	my $new = $s->master;
	note sprintf('%s: master %s killed, %s named %.3f s after the kill',
		$why, $old->where, $new->where, time() - $killed_at);
	return ($old, $new);
}

my ($out, $err, $state);

# ---- a) through the sentinels ----

my $m = $s->master;
my $s1 = session();
my $s2 = session();
my $s3 = session();
my $h1 = RlockTest::holder_of($s1);
my $h2 = RlockTest::holder_of($s2);

($out, $err) = sql($s1, "SELECT rlock_semaphore_set_permits('jobs', 3)");
is("$out/$err", 't/', 'three permits set through the sentinels');
is($m->cli('GET', 'jobs'), '3', 'on the master the sentinels name');

my $waits0 = RlockTest::command_calls($m, 'wait');
($out, $err) = sql($s1, "SELECT rlock_semaphore_acquire('jobs', 2)");
is($err, '', 'a session takes two permits (NULL lease)');
is(join(',', map { zcard($_) } $s->replicas), '2,2',
	'both replicas have the two permit ids when the call returns (rlock.replica_acks = 2)');
cmp_ok(RlockTest::command_calls($m, 'wait'), '>', $waits0,
	'the master ran WAIT behind the acquisition');
is(sql($s1, "SELECT kind, scope, hold_count, state, node FROM rlock_locks WHERE name = 'jobs'"),
	'semaphore|session|2|held|' . $m->where,
	'rlock_locks: two session permits held on that master');

sql($s2, 'BEGIN');
($out, $err) = sql($s2, "SELECT rlock_semaphore_xact_acquire('jobs', 1)");
is($err, '', 'a transaction takes the third');
sql($s2, 'INSERT INTO guarded VALUES (1)');
is(join(',', map { zcard($_) } $s->replicas), '3,3', 'acknowledged by both replicas too');
is(sql($s3, "SELECT rlock_semaphore_available('jobs')"), '0', 'none left');
is(sql($s2, "SELECT scope, hold_count FROM rlock_locks WHERE name = 'jobs' AND pid = pg_backend_pid()"),
	'transaction|1', 'rlock_locks: a transaction permit');

# renewed by the watchdog (every 5 s)
my $score1 = $m->cli('ZSCORE', '{jobs}:timeout', "$h1:1");
my $score2 = $m->cli('ZSCORE', '{jobs}:timeout', "$h2:1");
ok( RlockTest::wait_until(
		sub {
			sql($s3, "SELECT count(*) FROM rlock_locks WHERE name = 'jobs' AND renewed_at > acquired_at")
			  eq '2';
		},
		30),
	'the watchdog renews both sessions\' permits (renewed_at moves)');
ok( RlockTest::wait_until(
		sub {
			($m->cli('ZSCORE', '{jobs}:timeout', "$h1:1") // 0) > $score1 + 1000
			  && ($m->cli('ZSCORE', '{jobs}:timeout', "$h2:1") // 0) > $score2 + 1000;
		},
		30),
	'their scores (expiries) went up on the master');

# a waiter, woken by the COMMIT that gives the transaction's permit back
RlockTest::start_bg($s3,
	"SET lock_timeout = '60s'; SELECT rlock_semaphore_acquire('jobs', 1, '1 minute')");
RlockTest::wait_for_rlock_waiters($node, 'postgres', 1, '%rlock_semaphore_acquire%');
ok(1, 'a waiter waits for a permit');
($out, $err, $state) = sql($s2, 'COMMIT');
is("$state/$err", '00000/', 'the transaction commits (its permit checked on the master)');
ok(RlockTest::wait_until(sub { RlockTest::bg_done($s3) }, 60), 'the waiter is woken');
($out, $err, $state) = RlockTest::bg_result($s3);
is($state, '00000', 'and has the permit') or diag($err);
is(sql($s3, "SELECT rlock_semaphore_release('jobs')"), 't', 'which it gives back');

# a latch await, woken by the count-down to zero
is(sql($s1, "SELECT rlock_latch_set_count('gate', 2)"), 't', 'a latch of 2');
RlockTest::start_bg($s3, "SELECT rlock_latch_await('gate', '60 s')");
ok( RlockTest::wait_until(
		sub {
			($m->cli('PUBSUB', 'NUMSUB', 'redisson_countdownlatch__channel__{gate}') // '') =~ /\n1$/;
		},
		30),
	'an await listens on the latch channel on the master');
is(sql($s1, "SELECT rlock_latch_count_down('gate')"), '1', 'counted down once');
is(sql($s1, "SELECT rlock_latch_count_down('gate')"), '0', 'and to zero');
ok(RlockTest::wait_until(sub { RlockTest::bg_done($s3) }, 60), 'the await ends');
($out, $err, $state) = RlockTest::bg_result($s3);
is("$out/$state", 't/00000', 'returning true') or diag($err);

is(sql($s1, "SELECT rlock_semaphore_release('jobs', 2)"), 't', 'the session gives its two back');
is($m->cli('GET', 'jobs') . '/' . zcard($m), '3/0', 'all three available, none out');
ok(RlockTest::wait_until(sub { join(',', map { zcard($_) . '/' . ($_->cli('GET', 'jobs') // '') } $s->replicas) eq '0/3,0/3' }, 30),
	'the replicas have that too');

# ---- b) replication stalled: refused and undone, or granted and lost ----

my @links = $s->replica_links;
my $s4 = session();
my $h4 = RlockTest::holder_of($s4);
($out, $err) = sql($s1, "SELECT rlock_semaphore_try_acquire('jobs', 1, '10 minutes')");
is("$out/$err", 't/', 'a permit held before the stall (a lease of 10 minutes)');
ok(RlockTest::wait_until(sub { join(',', map { zcard($_) } $s->replicas) eq '1,1' }, 30),
	'on both replicas');
$_->stall for @links;
note 'both replication links stalled';

my $refusals0 = RlockTest::stat_of($node, 'replica_ack_refusals');
($out, $err, $state) = sql($s1, "SELECT rlock_semaphore_try_acquire('jobs', 1, '10 minutes')");
is($state, '08006', 'no replica acknowledges: the acquisition is refused (08006)');
like($err, qr/ERROR:  permits of semaphore "jobs" were not acknowledged by enough Redis replicas/,
	'the error names the semaphore');
like($err, qr/0 of the 2 replica acknowledgements/, 'the detail says none of 2 acknowledged');
is($m->cli('GET', 'jobs') . '/' . zcard($m), '2/1',
	'undone: the permits available as before, only the earlier permit out');
isnt($m->cli('ZSCORE', '{jobs}:timeout', "$h1:1") // '', '',
	'the earlier permit of the session is still out');
is(sql($s1, "SELECT hold_count, state FROM rlock_locks WHERE name = 'jobs'"), '1|held',
	'and the session holds it alone');
sql($s4, 'BEGIN');
($out, $err, $state) = sql($s4, "SELECT rlock_semaphore_xact_try_acquire('jobs', 2, wait => '2 s')");
is($state, '08006', 'a transaction try with a wait fails loudly too, not with false');
sql($s4, 'ROLLBACK');
is($m->cli('GET', 'jobs') . '/' . zcard($m), '2/1', 'and leaves nothing behind');
is(RlockTest::stat_of($node, 'replica_ack_refusals') - $refusals0, 2,
	'rlock_stats.replica_ack_refusals counts both');
is(sql($s1, "SELECT rlock_semaphore_release('jobs')"), 't',
	'a release does not wait for the replicas');

RlockTest::set_gucs($node, 'rlock.replica_acks' => '0');
sql($s4, 'BEGIN');
($out, $err) = sql($s4, "SELECT rlock_semaphore_xact_acquire('jobs', 2)");
is($err, '', 'replica_acks = 0: two transaction permits granted without acknowledgement');
sql($s4, 'INSERT INTO guarded VALUES (2)');
is(zcard($m), '2', 'their ids are on the master');
is(join(',', map { zcard($_) } $s->replicas), '1,1',
	'and on no replica (which still have the released permit out)');

my $log0 = -s $node->logfile;
my ($old, $new) = fail_over('b');
ok( RlockTest::wait_until(
		sub { sql($s1, "SELECT state FROM rlock_locks WHERE name = 'jobs'") eq 'lost' }, 60),
	'after the failover the unreplicated permits are reported lost in rlock_locks');
ok( RlockTest::wait_until(
		sub {
			RlockTest::log_has($node, $log0,
				qr/LOG:  rlock watchdog: permits of semaphore "jobs" held by \Q$h4\E \(pid \d+\) were lost\n.*DETAIL:  Redis no longer had the lock/);
		},
		30),
	'with a LOG line naming the holder: found missing on the new master (not given up for want of renewal)')
  or diag(slurp_file($node->logfile, $log0) =~ /^(.*semaphore "jobs".*\n.*)$/m ? $1 : 'no line');
($out, $err) = RlockTest::query_err($s4, 'COMMIT');
like($err, qr/ERROR:  cannot commit: permits of semaphore "jobs" held by this transaction were lost/,
	'the transaction holding them cannot COMMIT');
is($node->safe_psql('postgres', 'SELECT array_agg(v ORDER BY v) FROM guarded'), '{1}',
	'its write is rolled back');
is(sql($s4, "SELECT count(*) FROM rlock_locks WHERE name = 'jobs'"), '0',
	'and nothing of them is left in rlock_locks');
ok( RlockTest::wait_until(
		sub { sql($s1, 'SELECT node FROM rlock_nodes()') eq $new->where }, 30),
	'rlock_nodes() names the new master');
# the new master has the replica's state: the lost permits were never
# taken there, and the release made during the stall never reached it
# (releases do not wait for replicas): that permit is out again there,
# held by no session
is($new->cli('GET', 'jobs') . '/' . zcard($new), '2/1',
	'the new master never saw the lost permits taken');
is($new->cli('ZSCORE', '{jobs}:timeout', "$h4:1") // '', '', 'nor their ids');
isnt($new->cli('ZSCORE', '{jobs}:timeout', "$h1:1") // '', '',
	'the permit released during the stall is out again on the new master');
cmp_ok(RlockTest::stat_of($node, 'failovers'), '>=', 1, 'rlock_stats.failovers counts it');

$_->stop for @links;
$s->revive($old);
RlockTest::set_gucs($node, 'rlock.replica_acks' => '2');
ok( RlockTest::wait_until(
		sub { sql($s1, 'SELECT replicas FROM rlock_nodes()') eq '2' }, 30),
	'the old master, back as a replica: two replicas again');

is(sql($s1, "SELECT rlock_semaphore_available('jobs')"), '2',
	'two permits available on the new master');

# ---- c) permits held (replicated) across a failover ----

$m = $new;
my $s5 = session();
($out, $err) = sql($s1, "SELECT rlock_semaphore_acquire('jobs', 2)");
is($err, '', 'a session takes two permits on the new master (acknowledged by both replicas)');
is($m->cli('GET', 'jobs') . '/' . zcard($m), '1/2',
	'its stale permit (Redis had one, the session none) was given back first: two out, one left');
sql($s2, 'BEGIN');
($out, $err) = sql($s2, "SELECT rlock_semaphore_xact_acquire('jobs', 1)");
is($err, '', 'a transaction takes the third');
sql($s2, 'INSERT INTO guarded VALUES (3)');
is(join(',', map { zcard($_) } $s->replicas), '3,3', 'both replicas have the three ids');
RlockTest::start_bg($s3,
	"SET lock_timeout = '120s'; SELECT rlock_semaphore_acquire('jobs', 1, '1 minute')");
RlockTest::wait_for_rlock_waiters($node, 'postgres', 1, '%rlock_semaphore_acquire%');
ok(1, 'a waiter waits for a permit');
is(sql($s4, "SELECT rlock_latch_set_count('gate', 1)"), 't', 'a latch of 1');
ok(RlockTest::wait_until(sub { join(',', map { $_->cli('GET', 'gate') // '' } $s->replicas) eq '1,1' }, 30),
	'on both replicas');
RlockTest::start_bg($s5, "SELECT rlock_latch_await('gate', '120 s')");
ok( RlockTest::wait_until(
		sub {
			($m->cli('PUBSUB', 'NUMSUB', 'redisson_countdownlatch__channel__{gate}') // '') =~ /\n1$/;
		},
		30),
	'an await listens');

my $failovers0 = RlockTest::stat_of($node, 'failovers');
($old, $new) = fail_over('c');
ok( RlockTest::wait_until(
		sub {
			sql($s4, "SELECT string_agg(scope || ':' || hold_count || ':' || state || ':' || node, ',' ORDER BY scope) "
				  . "FROM rlock_locks WHERE name = 'jobs'") eq
			  'session:2:held:' . $new->where . ',transaction:1:held:' . $new->where;
		},
		60),
	'rlock_locks: the session and transaction permits held on the new master')
  or diag(sql($s4, "SELECT * FROM rlock_locks WHERE name = 'jobs'"));
is(join(',', map { ($new->cli('ZSCORE', '{jobs}:timeout', $_) // '') ne '' ? 1 : 0 } "$h1:1", "$h1:2", "$h2:1"),
	'1,1,1', 'the new master has all three permit ids');
is($new->cli('GET', 'jobs'), '0', 'and none available');
$score1 = $new->cli('ZSCORE', '{jobs}:timeout', "$h1:1");
$score2 = $new->cli('ZSCORE', '{jobs}:timeout', "$h2:1");
ok( RlockTest::wait_until(
		sub {
			($new->cli('ZSCORE', '{jobs}:timeout', "$h1:1") // 0) > $score1 + 1000
			  && ($new->cli('ZSCORE', '{jobs}:timeout', "$h2:1") // 0) > $score2 + 1000;
		},
		40),
	'they are renewed there (their scores went up)');
cmp_ok(RlockTest::stat_of($node, 'failovers'), '>', $failovers0,
	'rlock_stats.failovers counts this failover');
ok(!RlockTest::bg_done($s3), 'the waiter still waits while the permits are held');

$s->revive($old);
ok( RlockTest::wait_until(
		sub { sql($s1, 'SELECT replicas FROM rlock_nodes()') eq '2' }, 30),
	'the old master, back as a replica: two replicas for replica_acks = 2');

($out, $err, $state) = sql($s2, 'COMMIT');
is("$state/$err", '00000/',
	'the transaction holding a permit commits (checked on the new master)');
is($node->safe_psql('postgres', 'SELECT array_agg(v ORDER BY v) FROM guarded'), '{1,3}',
	'its write is there');
ok(RlockTest::wait_until(sub { RlockTest::bg_done($s3) }, 90), 'its permit wakes the waiter');
($out, $err, $state) = RlockTest::bg_result($s3);
is($state, '00000', 'which has it, on the new master') or diag($err);
my $h3 = RlockTest::holder_of($s3);
isnt($new->cli('ZSCORE', '{jobs}:timeout', "$h3:1") // '', '', 'its permit id is on the new master');

is(sql($s1, "SELECT rlock_latch_count_down('gate')"), '0', 'the latch counted down to zero on the new master');
ok(RlockTest::wait_until(sub { RlockTest::bg_done($s5) }, 90), 'the await ends');
($out, $err, $state) = RlockTest::bg_result($s5);
is("$out/$state", 't/00000', 'returning true') or diag($err);

($out, $err) = sql($s3, "SELECT rlock_semaphore_release('jobs')");
is("$out/$err", 't/', 'the waiter gives its permit back, no warning');
($out, $err) = sql($s4, "SELECT rlock_semaphore_try_acquire('jobs', 1, '1 minute')");
is("$out/$err", 't/', 'a new acquisition works on the new master');
is(join(',', map { zcard($_) } $s->replicas), '3,3', 'acknowledged by both replicas');
($out, $err) = sql($s1, "SELECT rlock_semaphore_release('jobs', 2)");
is("$out/$err", 't/', 'the session gives its two back on the new master, no warning');
($out, $err) = sql($s4, "SELECT rlock_semaphore_release('jobs')");
is("$out/$err", 't/', 'and so does the new one');
is($new->cli('GET', 'jobs') . '/' . zcard($new), '3/0', 'all three available, none out');

$_->quit for @sessions;
done_testing();
