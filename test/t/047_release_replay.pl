# Copyright (c) 2026, rlock developers
#
# rlock_release after a lost reply.  A command sent on a connection that
# had worked before and broke before answering is sent again on a fresh one
# (connection.c).  A release lowers a count: sent again after it had run,
# it would release one hold too many, or find the lock gone (and another
# holder in it) and report a lock lost that this session released itself.
# The release's unlock latch, written before anything else the request
# changes, makes the replay answer as the first time and change nothing.
# Here the release runs in Redis, its reply is held by the proxy, and the
# connection is cut: for a release that leaves a hold, and for the last
# release with a Redisson client taking the lock before the replay.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use RlockTest;

my $redis = RlockTest::Redis->new;
my $proxy = RlockTest::Proxy->new($redis);
# (no replicas: a new connection needs no ROLE before its first command)
my $node = RlockTest::new_node('replay', $proxy,
	extra_conf => "rlock.replica_acks = 0\n");
my $s = $node->background_psql('postgres', on_error_stop => 0);
my $me = RlockTest::holder_of($s);

# the Redisson client that takes the lock once it is free
my $next = '0b7e4c1a-9d2f-4a6b-8c3e-5f1a2b3c4d5e:31';

# The session waits for replies for as long as it is allowed to: the steps
# below must all happen while the first attempt is still waiting.
RlockTest::run_sql($s, "SET rlock.command_timeout = '1min'");
RlockTest::run_sql($s, "SET rlock.connect_timeout = '1min'");
# (and Redis has the scripts cached: EVALSHA runs them at once)
my ($out, $err) = RlockTest::run_sql($s,
	"SELECT rlock_try_acquire('warm_up'), rlock_release('warm_up')");
is("$out/$err", 't|t/', 'the session has a working connection to Redis');

for my $case ([ 'rr_partial', 2 ], [ 'rr_last', 1 ])
{
	my ($name, $holds) = @$case;
	my $what = $holds > 1 ? 'a release that leaves a hold' : 'the last release';

	for (1 .. $holds)
	{
		my ($o, $e, $st) = RlockTest::run_sql($s,
			"SELECT rlock_acquire('$name', '10 min')");
		is($st, '00000', "$what: the session takes $name") or diag($e);
	}
	is($redis->cli('HGET', $name, $me), "$holds",
		"$what: Redis counts $holds hold(s)");

	# the release runs in Redis and its reply is lost: it goes again
	my ($o, $e, $st) = $proxy->lose_reply(
		$redis, $s,
		"SELECT rlock_release('$name')",
		qr/"EVALSHA" "\w+" "4" "$name"/i,
		$what,
		sub {
			if ($holds > 1)
			{
				is($redis->cli('HGET', $name, $me), $holds - 1,
					"$what: Redis counts one hold fewer");
			}
			else
			{
				is($redis->cli('EXISTS', $name), '0', "$what: the lock is gone");
				# the next holder takes the lock
				$redis->cli('HSET', $name, $next, '1');
				$redis->cli('PEXPIRE', $name, '600000');
			}
		});
	is("$o/$st", 't/00000', "$what: it answers as the first time it ran")
	  or diag("stderr: $e");
	unlike($e, qr/WARNING/, "$what: no warning (nothing reported lost)");

	if ($holds > 1)
	{
		is($redis->cli('HGET', $name, $me), $holds - 1,
			"$what: the replay released nothing more");
		my ($c) = RlockTest::run_sql($s, "SELECT rlock_hold_count('$name')");
		is($c, $holds - 1, "$what: the session counts the hold it kept");
		RlockTest::run_sql($s, "SELECT rlock_release_all()");
	}
	else
	{
		is($redis->cli('HGET', $name, $next), '1',
			"$what: the next holder's lock is still there");
	}
	$redis->cli('DEL', $name);
}

$s->quit;
$node->stop;
$proxy->stop;
$redis->stop;
done_testing();
