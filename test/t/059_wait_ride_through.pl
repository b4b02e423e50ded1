# Copyright (c) 2026, rlock developers
#
# A waiter keeps waiting through a Redis outage (SPEC 6: "a waiter keeps
# waiting until its own wait ends"; wait_outage.c): session A holds a
# lock, session B waits for it with a budget, and Redis goes away under
# B's wait.
#
#   a) Redis stopped with its data saved (SHUTDOWN SAVE), down about 1 s,
#      then about 3 s, started again: B is still waiting when Redis comes
#      back, and B ends up holding the lock (A releases once Redis answers,
#      or A's lock is gone with the outage), with a 30 s budget.  The same
#      (1 s) for a fair lock, a write lock, a multi-lock, a semaphore's
#      permits and a latch's await.  A demoted master (REPLICAOF) that
#      answers READONLY, a master again later: the same.
#   b) the budget ends while Redis is still down: B fails with 08006 naming
#      the lock and saying since when Redis was unreachable, after its
#      budget (5 s: room for the test to see it wait and stop Redis) and
#      within a second of its end; with lock_timeout as the budget, the
#      same (not a lock timeout).
#   c) Sentinel: the master stops (SIGSTOP) under the wait and the waiter
#      is made to attempt at once (its attempt times out on the stopped
#      master); the sentinels fail over, and the waiter acquires from the
#      new master.
#
# Before wait_outage.c, B failed within milliseconds of the shutdown with
# "could not connect to Redis" (08001).  How long Redis stays down is the
# scenario (a sleep of 1 s or 3 s while it is down); nothing waits for
# something to happen but with wait_until and generous limits.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

use RlockTest;

my $redis = RlockTest::Redis->new;
my $node = RlockTest::new_node('ridethrough', $redis);

my $a = $node->background_psql('postgres', on_error_stop => 0);
my $b = $node->background_psql('postgres', on_error_stop => 0);

sub sql
{
	my ($sess, $q) = @_;
	my ($out, $err, $state) = RlockTest::run_sql($sess, $q);
	return wantarray ? ($out, $err, $state) : $out;
}

# Run $q in $sess until it succeeds (Redis answers again; a call that
# finds its connection gone may fail once); its output.
sub once_redis_answers
{
	my ($sess, $q) = @_;
	my $out;
	RlockTest::wait_until(
		sub {
			my ($o, $e, $st) = RlockTest::run_sql($sess, $q);
			$out = $o;
			return defined $st && $st eq '00000';
		},
		60) or diag("'$q' did not succeed once Redis was back");
	return $out;
}

# Wait until what start_bg started in $sess ended; its (out, err, state).
sub bg_end
{
	my ($sess, $limit) = @_;
	RlockTest::wait_until(sub { RlockTest::bg_done($sess) }, $limit // 60)
	  or return ('', 'never ended', '');
	return RlockTest::bg_result($sess);
}

# Redis goes down for $secs seconds, its data saved, and comes back;
# whether what start_bg started in $sess was still under way just before
# Redis came back (it cannot have acquired anything meanwhile).
sub outage
{
	my ($secs, $sess) = @_;
	$redis->stop_save;
	sleep($secs);
	my $waiting = !RlockTest::bg_done($sess);
	$redis->start;
	return $waiting;
}

# ---- a) waits through a restart ----

foreach my $secs (1, 3)
{
	my $name = "blip$secs";
	is(sql($a, "SELECT rlock_try_acquire('$name', '10 min')"), 't',
		"$name: A holds it (a 10 min lease: it outlives the outage)");
	my $log_at = -s $node->logfile;
	RlockTest::start_bg($b,
		"SELECT rlock_try_acquire('$name', wait => '30 seconds')");
	RlockTest::wait_for_rlock_waiters($node, 'postgres', 1, "%$name%");

	ok(outage($secs, $b),
		"$name: B is still waiting after Redis was down $secs s");

	once_redis_answers($a, "SELECT rlock_release('$name')");
	my ($out, $err, $st) = bg_end($b);
	is("$out/$st", 't/00000',
		"$name: B acquires after Redis was down $secs s and A let go")
	  or diag($err);
	ok(RlockTest::log_has($node, $log_at,
			qr/LOG:  rlock: waiting for lock "$name" through a Redis outage/),
		"$name: the server log says the wait rode through an outage");
	is(sql($b, "SELECT count(*) FROM rlock_locks WHERE name = '$name' AND pid = pg_backend_pid() AND state = 'held'"),
		'1', "$name: B's hold is recorded once");
	is(sql($b, "SELECT rlock_release('$name')"), 't', "$name: B releases it");
	is($redis->cli('EXISTS', $name), '0', "$name: no key left in Redis");
}

# the other kinds of lock: fair, write, multi (A holds the fair lock, the
# write lock, one name of the multi-lock)
foreach my $k (
	[ 'fair', "rlock_fair_try_acquire('k_fair')",
		"rlock_fair_try_acquire('k_fair', wait => '30 seconds')",
		"rlock_fair_release('k_fair')", "rlock_fair_release('k_fair')" ],
	[ 'write', "rlock_write_try_acquire('k_rw')",
		"rlock_write_try_acquire('k_rw', wait => '30 seconds')",
		"rlock_write_release('k_rw')", "rlock_write_release('k_rw')" ],
	[ 'multi', "rlock_try_acquire('k_m2')",
		"rlock_multi_try_acquire(ARRAY['k_m1', 'k_m2'], NULL, '30 seconds')",
		"rlock_release('k_m2')",
		"rlock_multi_release(ARRAY['k_m1', 'k_m2'])" ])
{
	my ($kind, $take, $wait, $a_rel, $b_rel) = @$k;
	is(sql($a, "SELECT $take"), 't', "$kind: A holds it");
	RlockTest::start_bg($b, "SELECT $wait");
	RlockTest::wait_for_rlock_waiters($node, 'postgres', 1, '%k\_%');
	ok(outage(1, $b), "$kind: B is still waiting when Redis comes back");
	once_redis_answers($a, "SELECT $a_rel");
	my ($out, $err, $st) = bg_end($b);
	is("$out/$st", 't/00000', "$kind: B acquires after the restart")
	  or diag($err);
	is(sql($b, "SELECT $b_rel"), 't', "$kind: B releases");
}

# a semaphore's permits
is(sql($a, "SELECT rlock_semaphore_set_permits('sem', 1)"), 't',
	'semaphore: one permit');
is(sql($a, "SELECT rlock_semaphore_try_acquire('sem', 1)"), 't',
	'semaphore: A takes it');
RlockTest::start_bg($b,
	"SELECT rlock_semaphore_try_acquire('sem', 1, NULL, '30 seconds')");
RlockTest::wait_for_rlock_waiters($node, 'postgres', 1, '%sem%');
ok(outage(1, $b), 'semaphore: B is still waiting when Redis comes back');
once_redis_answers($a, "SELECT rlock_semaphore_release('sem', 1)");
my ($out, $err, $st) = bg_end($b);
is("$out/$st", 't/00000', 'semaphore: B takes the permit after the restart')
  or diag($err);
is(sql($b, "SELECT rlock_semaphore_release('sem', 1)"), 't',
	'semaphore: B gives it back');

# a latch's await
is(sql($a, "SELECT rlock_latch_set_count('gate', 1)"), 't', 'latch: count 1');
RlockTest::start_bg($b, "SELECT rlock_latch_await('gate', '30 seconds')");
RlockTest::wait_for_rlock_waiters($node, 'postgres', 1, '%gate%');
ok(outage(1, $b), 'latch: B still awaits when Redis comes back');
once_redis_answers($a, "SELECT rlock_latch_count_down('gate')");
($out, $err, $st) = bg_end($b);
is("$out/$st", 't/00000', 'latch: the await ends at zero after the restart')
  or diag($err);

SKIP:
{
	# (the READONLY answers are counted in INFO errorstats: Redis 6.2 and later)
	skip 'Redis before 6.2 has no errorstats', 6
	  if RlockTest::redis_version() < 60200;
	# a demoted master: Redis turned into a replica (of an empty master: A's
	# lock goes with the sync) answers B's attempts READONLY (25006) until it
	# is a master again
	my $empty = RlockTest::Redis->new;
	is(sql($a, "SELECT rlock_try_acquire('demoted', '10 min')"), 't',
		'demoted: A holds it');
	RlockTest::start_bg($b,
		"SELECT rlock_try_acquire('demoted', wait => '60 seconds')");
	RlockTest::wait_for_rlock_waiters($node, 'postgres', 1, '%demoted%');
	$redis->cli('REPLICAOF', '127.0.0.1', $empty->port);
	my $readonly = sub {
		my $info = $redis->cli('INFO', 'errorstats') // '';
		return $info =~ /errorstat_READONLY:count=(\d+)/ ? $1 : 0;
	};
	# (once the replica has synced: A's lock went with its data; the READONLY
	# answers counted from then on, the worker's among them, until B's show)
	ok(RlockTest::wait_until(sub {
			($redis->cli('INFO', 'replication') // '') =~ /master_link_status:up/
			  && !$redis->cli('EXISTS', 'demoted') }, 60),
		'demoted: Redis is a replica of an empty master');
	my $readonly_at = $readonly->();
	ok(RlockTest::wait_until(sub { $readonly->() >= $readonly_at + 3 }, 60),
		'demoted: B\'s attempts are answered READONLY, again and again');
	ok(!RlockTest::bg_done($b), 'demoted: B is still waiting');
	$redis->cli('REPLICAOF', 'NO', 'ONE');
	($out, $err, $st) = bg_end($b);
	is("$out/$st", 't/00000', 'demoted: B acquires once Redis is a master again')
	  or diag($err);
	is(sql($b, "SELECT rlock_release('demoted')"), 't', 'demoted: B releases');
	sql($a, "SELECT rlock_release('demoted')");
	$empty->stop;
}

# ---- b) the budget ends while Redis is down ----

is(sql($a, "SELECT rlock_try_acquire('down', '10 min')"), 't',
	'down: A holds it');
my $t0 = time();
RlockTest::start_bg($b, "SELECT rlock_try_acquire('down', wait => '5 seconds')");
RlockTest::wait_for_rlock_waiters($node, 'postgres', 1, '%down%');
$redis->stop_save;
($out, $err, $st) = bg_end($b, 60);
my $took = time() - $t0;
is($st, '08006', 'down: the wait fails with 08006 (not false, not 08001)')
  or diag($err);
like($err, qr/lock "down".*Redis unreachable since/,
	'down: the message names the lock and since when Redis was unreachable');
cmp_ok($took, '>=', 4.9, 'down: not before its budget (5 s) ended');
cmp_ok($took, '<', 6, 'down: within a second of its end');
note sprintf('down: failed %.3f s after the call started (budget 5 s)', $took);

# lock_timeout as the budget (rlock_acquire waits without a limit of its own)
$redis->start;
sql($b, "SET lock_timeout = '5s'");
$t0 = time();
RlockTest::start_bg($b, "SELECT rlock_acquire('down')");
RlockTest::wait_for_rlock_waiters($node, 'postgres', 1, '%down%');
$redis->stop_save;
($out, $err, $st) = bg_end($b, 60);
$took = time() - $t0;
is($st, '08006', 'down, lock_timeout: 08006, not a lock timeout (55P03)')
  or diag($err);
like($err, qr/lock "down".*Redis unreachable since/,
	'down, lock_timeout: the message names the lock');
cmp_ok($took, '<', 6, 'down, lock_timeout: within a second of lock_timeout');
sql($b, 'RESET lock_timeout');

$redis->start;
once_redis_answers($a, "SELECT rlock_release('down')");
is(once_redis_answers($b, "SELECT rlock_try_acquire('down')"), 't',
	'down: B acquires once Redis is back');
sql($b, "SELECT rlock_release('down')");

$a->quit;
$b->quit;
$node->stop;

# ---- c) a Sentinel failover under the wait ----

my $s = RlockTest::Sentinel->new(replicas => 1, sentinels => 3);
# (rlock.replica_acks = 0: the new master has no replica left to acknowledge)
my $snode = RlockTest::new_node('ridesentinel', undef,
	url => $s->url,
	extra_conf => "rlock.replica_acks = 0\n");
my $sa = $snode->background_psql('postgres', on_error_stop => 0);
my $sb = $snode->background_psql('postgres', on_error_stop => 0);

is(sql($sa, "SELECT rlock_try_acquire('fo', '10 min')"), 't',
	'sentinel: A holds fo');
my $bpid = sql($sb, 'SELECT pg_backend_pid()');
RlockTest::start_bg($sb,
	"SELECT rlock_try_acquire('fo', wait => '2 minutes')");
RlockTest::wait_for_rlock_waiters($snode, 'postgres', 1, '%fo%');

# The master stops (SIGSTOP: its connections stay open, nothing answers),
# and B is made to look at once (SIGUSR1 sets a backend's latch, a turn
# passed on): its attempt goes to the stopped master and times out
# (rlock.command_timeout), well before the sentinels can name another.
my $old = $s->master;
my $old_pid = $old->pid;
my $killed_at = time();
kill 'STOP', $old_pid;
kill 'USR1', $bpid;
my $secs = $s->wait_failover($old->port, 60);
ok(defined $secs, 'sentinel: the sentinels failed over')
  or RlockTest::stop_file('no failover after the master was stopped');
kill 'KILL', $old_pid;
RlockTest::wait_until(sub { RlockTest::pid_gone($old_pid) }, 30);
$old->{running} = 0;
note sprintf('sentinel: new master %s named %.3f s after the SIGSTOP',
	$s->master->where, time() - $killed_at);
once_redis_answers($sa, "SELECT rlock_release('fo')");
($out, $err, $st) = bg_end($sb, 120);
is("$out/$st", 't/00000', 'sentinel: B acquires from the new master')
  or diag($err);
ok($s->master->cli('HEXISTS', 'fo', RlockTest::holder_of($sb)) eq '1',
	'sentinel: its hold is on the new master');
sql($sb, "SELECT rlock_release('fo')");

$sa->quit;
$sb->quit;
$snode->stop;
$s->stop;

done_testing();
