
# Copyright (c) 2026, rlock developers
#
# Review findings of issue 40 (10-13) that need no fault to be seen.
#
# Rollback to a savepoint does no Redis I/O (holds_xact.c): a PL/pgSQL
# block whose EXCEPTION clause catches an error rolls back the block's
# subtransaction, and the transaction-level locks taken in it.  The session
# lets go of them there, Redis is told later (the next rlock call, or the
# end of the transaction); the handler sees the error it caught, and
# nothing is left behind.  Each step is observed at a barrier (an advisory
# lock the test holds), not after a delay.
#
# A plain lock and a Redlock of one name take turns in different queues of
# the server's waiters (waitqueue.c, lock_wait.c): their channels have the
# same name, but their messages come from different servers.  Seen in the
# subscriptions Redis reports (PUBSUB NUMSUB), not in elapsed time.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use RlockTest;
use RlockTest::Redlock;

my $redis = RlockTest::Redis->new;
my $rl = RlockTest::Redlock->new(masters => [ {}, {}, {} ]);
my $node = RlockTest::new_node('review', $redis,
	extra_conf => "rlock.redlock_urls = '" . $rl->urls . "'\n");
my $s = $node->background_psql('postgres', on_error_stop => 0);
my $b = $node->background_psql('postgres', on_error_stop => 0);

# Whether backend $pid waits for advisory lock $key.
sub waits_for_advisory
{
	my ($pid, $key) = @_;
	my ($o) = RlockTest::run_sql($b,
		"SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
		  . "AND objid = $key AND NOT granted AND pid = $pid");
	return $o eq '1';
}

# rlock_locks rows of $name (any backend).
sub registry_rows
{
	my ($name) = @_;
	my ($o) = RlockTest::run_sql($b,
		"SELECT count(*) FROM rlock_locks WHERE name = '$name'");
	return $o;
}

my ($spid) = RlockTest::run_sql($s, 'SELECT pg_backend_pid()');

# ---------------------------------------------------------------------
# 11. A savepoint with rlock transaction holds rolls back in an EXCEPTION
# clause.  $with_call: the handler makes an rlock call before the barrier
# (which settles the entry first).
for my $case ([ 'sp_end', 0 ], [ 'sp_call', 1 ])
{
	my ($name, $with_call) = @$case;
	my $call = $with_call
	  ? "PERFORM rlock_try_acquire('${name}_other'); PERFORM rlock_release('${name}_other');"
	  : '';

	RlockTest::run_sql($b, 'SELECT pg_advisory_lock(4211)');
	RlockTest::start_bg($s, qq{DO \$\$
DECLARE st text; msg text;
BEGIN
  BEGIN
    PERFORM rlock_xact_acquire('$name');
    PERFORM rlock_xact_acquire('$name');
    RAISE EXCEPTION 'inner failure' USING ERRCODE = 'P0042';
  EXCEPTION WHEN others THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
    RAISE NOTICE 'caught % %', st, msg;
    $call
    PERFORM pg_advisory_lock(4211);
    PERFORM pg_advisory_unlock(4211);
  END;
END \$\$});
	ok(RlockTest::wait_until(sub { waits_for_advisory($spid, 4211) }, 60),
		"$name: the handler runs, at the barrier");
	if ($with_call)
	{
		is($redis->cli('EXISTS', $name), '0',
			"$name: the handler's next rlock call gave the holds back");
	}
	else
	{
		# no round trip at the rollback: Redis still has the holds...
		is($redis->cli('HVALS', $name), '2',
			"$name: the rollback to the savepoint sent nothing to Redis");
	}
	# ... but the session holds nothing any more, as the registry says
	is(registry_rows($name), '0', "$name: rlock_locks lists no hold");

	RlockTest::run_sql($b, 'SELECT pg_advisory_unlock(4211)');
	ok(RlockTest::wait_until(sub { RlockTest::bg_done($s) }, 60),
		"$name: the block ends");
	my ($o, $e, $st) = RlockTest::bg_result($s);
	is($st, '00000', "$name: the block succeeds") or diag($e);
	like($e, qr/caught P0042 inner failure/,
		"$name: the handler saw the error it caught");
	unlike($e, qr/WARNING/, "$name: no warning") or diag($e);
	is($redis->cli('EXISTS', $name), '0', "$name: nothing left in Redis");
	is(registry_rows($name), '0', "$name: nothing left in rlock_locks");
	my ($held) = RlockTest::run_sql($s,
		"SELECT rlock_try_acquire('$name') AND rlock_release('$name')");
	is($held, 't', "$name: the lock can be taken again");
}

# ---------------------------------------------------------------------
# 12. Eight sessions wait for the Redlock wq (listening on a master); then
# a session waits for the plain lock wq.  Sharing their queue, it was the
# ninth waiter of the channel: not subscribed at all (only the first eight
# are), it never heard its lock's release and looked every 5 s only.
{
	my $chan = 'redisson_lock__channel:{wq}';
	RlockTest::run_sql($b, "SELECT rlock_redlock_acquire('wq', '10 min')");
	my @rw = map { $node->background_psql('postgres', on_error_stop => 0) } 1 .. 8;
	for my $w (@rw)
	{
		RlockTest::start_bg($w, "SELECT rlock_redlock_acquire('wq')");
	}
	RlockTest::wait_for_rlock_waiters($node, 'postgres', 8,
		'SELECT rlock_redlock_acquire%');
	my $h = $node->background_psql('postgres', on_error_stop => 0);
	my ($o, $e, $st) = RlockTest::run_sql($h,
		"SELECT rlock_acquire('wq', '10 min')");
	is($st, '00000', 'the plain lock wq is taken') or diag($e);
	RlockTest::start_bg($s, "SELECT rlock_acquire('wq')");
	RlockTest::wait_for_rlock_waiters($node, 'postgres', 1,
		'SELECT rlock_acquire(%');
	ok(RlockTest::wait_until(
			sub { ($redis->cli('PUBSUB', 'NUMSUB', $chan) =~ /(\d+)\s*$/)[0] eq '1' }, 60),
		'the plain waiter is subscribed to its channel behind eight Redlock waiters');
	RlockTest::run_sql($h, "SELECT rlock_release('wq')");
	ok(RlockTest::wait_until(sub { RlockTest::bg_done($s) }, 60),
		'the plain waiter takes the lock');
	($o, $e, $st) = RlockTest::bg_result($s);
	is($st, '00000', 'the plain waiter got wq') or diag($e);
	RlockTest::run_sql($s, "SELECT rlock_release('wq')");

	# the Redlock waiters: cancelled
	RlockTest::run_sql($b, "SELECT pg_cancel_backend(pid) FROM pg_stat_activity "
		  . "WHERE query LIKE 'SELECT rlock_redlock_acquire%' AND pid <> pg_backend_pid()");
	for my $w (@rw)
	{
		RlockTest::wait_until(sub { RlockTest::bg_done($w) }, 60);
		RlockTest::bg_result($w);
		$w->quit;
	}
	RlockTest::run_sql($b, "SELECT rlock_redlock_release('wq')");
	$h->quit;
}

# ---------------------------------------------------------------------
# 13. rlock_locks may do Redis I/O (its node column): never in a parallel
# worker.
is(RlockTest::sql($node, "SELECT proparallel FROM pg_proc WHERE proname = 'rlock_locks'"),
	'r', 'rlock_locks is PARALLEL RESTRICTED');

# The renew script names a semaphore's {N}:timeout among its KEYS (it built
# the name inside Lua: a key a Cluster or an ACL never saw declared).
{
	my ($mon, $monout) = $redis->cli_bg('MONITOR');
	ok(RlockTest::wait_until(sub { $mon->pump_nb; $$monout =~ /^OK/m }, 30),
		'a client monitors Redis');
	my ($o, $e, $st) = RlockTest::run_sql($s,
		"SELECT rlock_semaphore_set_permits('rn_sem', 2), rlock_semaphore_acquire('rn_sem')");
	is($st, '00000', 'a permit of rn_sem is held, renewed by the watchdog') or diag($e);
	ok( RlockTest::wait_until(
			sub {
				$mon->pump_nb;
				$$monout =~ /"EVALSHA" "[0-9a-f]{40}" "1" "\{rn_sem\}:timeout" "[^"]+" "s" "\d+"/;
			},
			60),
		'the renewal declares {rn_sem}:timeout as its key');
	$mon->kill_kill;
	RlockTest::run_sql($s, "SELECT rlock_semaphore_release('rn_sem')");
}

# A blocking semaphore acquire asking for more permits than the semaphore
# has in all, for now, waits for them to be added (it raised 22023).
{
	RlockTest::run_sql($b, "SELECT rlock_semaphore_set_permits('grow_sem', 1)");
	RlockTest::start_bg($s, "SELECT rlock_semaphore_acquire('grow_sem', 2)");
	RlockTest::wait_for_rlock_waiters($node, 'postgres', 1,
		'SELECT rlock_semaphore_acquire(%');
	my ($o, $e, $st) = RlockTest::run_sql($b,
		"SELECT rlock_semaphore_add_permits('grow_sem', 1)");
	is($st, '00000', 'a permit is added') or diag($e);
	ok(RlockTest::wait_until(sub { RlockTest::bg_done($s) }, 60),
		'the waiter ends');
	($o, $e, $st) = RlockTest::bg_result($s);
	is($st, '00000', 'it took the two permits it waited for') or diag($e);
	($o) = RlockTest::run_sql($s,
		"SELECT rlock_hold_count('grow_sem'), rlock_semaphore_release('grow_sem', 2)");
	is($o, '2|t', 'it holds them, and gives them back');
}

# ---------------------------------------------------------------------
# 10. A permit taken with a fixed lease is believed for its lease less a
# clock margin (100 ms + 1 %: a Redisson client whose clock runs ahead takes
# it back early), and COMMIT asks for that margin on top of its 1000 ms: a
# permit of 1050 ms, committed at once, has less than 1110 ms left (it had
# enough for the 1000 ms alone).
{
	RlockTest::run_sql($b, "SELECT rlock_semaphore_set_permits('clock_sem', 2)");
	my ($o, $e, $st) = RlockTest::run_sql($s,
		"BEGIN; SELECT rlock_semaphore_xact_acquire('clock_sem', 1, '1050 ms'); COMMIT");
	is($st, '40000', 'COMMIT with a 1050 ms permit is refused') or diag($e);
	like($e, qr/too little lease left.*less than the 1110 ms a commit is given/s,
		'... for want of the clock margin') or diag($e);
	($o, $e, $st) = RlockTest::run_sql($s,
		"BEGIN; SELECT rlock_semaphore_xact_acquire('clock_sem', 1, '5 s'); COMMIT");
	is($st, '00000', 'COMMIT with a 5 s permit succeeds') or diag($e);
	is($redis->cli('ZCARD', '{clock_sem}:timeout'), '0', 'no permit is left out');
	$redis->cli('DEL', 'clock_sem', '{clock_sem}:timeout', '{clock_sem}:rlock_semaphore');
}

# A long wait woken often does not grow (lock_wait.c: what a round of the
# wait allocates goes with it).  A latch await is woken by a message ("5":
# not zero), reads the count (one EVALSHA), and waits again; the next
# message is published once Redis has counted that EVALSHA (messages that
# arrive together wake it once).  After N wake-ups, "0" opens it.
# Measured: the backend's peak resident memory (VmHWM), which without the
# fix grew with every wake-up (a command and its reply, in the call's
# context, until the call ended).
SKIP:
{
	my $n = 3000;
	skip 'no /proc', 7 unless -r "/proc/$spid/status";
	my $hwm = sub {
		my ($kb) = slurp_file("/proc/$spid/status") =~ /^VmHWM:\s+(\d+)/m;
		return $kb;
	};
	my $r = RlockTest::Resp->connect($redis->port) or die $@;
	my $evalshas = sub {
		my ($info) = $r->request('INFO', 'commandstats');
		my ($calls) = ($info // '') =~ /^cmdstat_evalsha:calls=(\d+)/m;
		return $calls // 0;
	};
	my $chan = 'redisson_countdownlatch__channel__{mem_latch}';
	for my $round (1, 2)
	{
		my $wakeups = $round == 1 ? 20 : $n;
		RlockTest::run_sql($s, "SELECT rlock_latch_set_count('mem_latch', 1)");
		my $before = $hwm->();
		RlockTest::start_bg($s, "SELECT rlock_latch_await('mem_latch', '10 min')");
		ok(RlockTest::wait_until(
				sub { ($r->request('PUBSUB', 'NUMSUB', $chan))[0][1] eq '1' }, 60),
			"round $round: the session awaits the latch");
		my $woken = 0;
		for (1 .. $wakeups)
		{
			my $was = $evalshas->();
			$r->request('PUBLISH', $chan, '5');
			# (polled every millisecond: the wait takes one round trip)
			my $t = time() + 60;
			usleep(1000) while $evalshas->() <= $was && time() < $t;
			last if time() >= $t;
			$woken++;
		}
		is($woken, $wakeups, "round $round: the await was woken $wakeups times");
		$r->request('DEL', 'mem_latch');
		$r->request('PUBLISH', $chan, '0');
		ok(RlockTest::wait_until(sub { RlockTest::bg_done($s) }, 60),
			"round $round: the await ends");
		my ($o, $e, $st) = RlockTest::bg_result($s);
		is($o, 't', "round $round: the latch opened") or diag($e);
		my $grew = $hwm->() - $before;
		note "round $round: VmHWM grew by $grew kB";
		cmp_ok($grew, '<', 512,
			"$n wake-ups in one wait: the backend's peak memory grew by $grew kB (< 512 kB)")
		  if $round == 2;
	}
	$r->close;
}

$s->quit;
$b->quit;
done_testing();
