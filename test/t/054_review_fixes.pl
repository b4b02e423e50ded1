
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

$s->quit;
$b->quit;
done_testing();
