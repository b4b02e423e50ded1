# Copyright (c) 2026, rlock developers
#
# rlock_force_release after a lost reply (issue 21, item 14).  A command
# sent on a connection that had worked before and broke before answering
# is sent again on a fresh one (connection.c).  Force release deletes the
# lock whoever holds it, so sent again blindly after it had run it would
# delete the lock of the next holder.  Here the force release runs in
# Redis, its reply is held by the proxy, the next holder (a Redisson
# client) takes the lock, and the connection is cut: the replay must find
# the request's latch and delete nothing.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use RlockTest;

my $redis = RlockTest::Redis->new;
my $proxy = RlockTest::Proxy->new($redis);
# (no replicas: a new connection needs no ROLE before its first command)
my $node = RlockTest::new_node('force', $proxy,
	extra_conf => "rlock.replica_acks = 0\n");
my $s = $node->background_psql('postgres', on_error_stop => 0);

# Two Redisson clients' holder identities: the holder the force release is
# aimed at, and the one that takes the lock once it is free.
my $first = '6f1c2b9e-3d4a-4e5f-8a7b-9c0d1e2f3a4b:57';
my $next = '0b7e4c1a-9d2f-4a6b-8c3e-5f1a2b3c4d5e:31';

# The session waits for replies for as long as it is allowed to: the steps
# below must all happen while the first attempt is still waiting.
RlockTest::run_sql($s, "SET rlock.command_timeout = '1min'");
RlockTest::run_sql($s, "SET rlock.connect_timeout = '1min'");
# (and Redis has the script cached: EVALSHA runs it at once)
my ($out, $err) = RlockTest::run_sql($s, "SELECT rlock_force_release('warm_up')");
is("$out/$err", 'f/', 'the session has a working connection to Redis');

for my $case ([ 'fr_held', 1 ], [ 'fr_free', 0 ])
{
	my ($name, $held) = @$case;
	my $what = $held ? 'a held lock' : 'a free lock';

	if ($held)
	{
		$redis->cli('HSET', $name, $first, '1');
		$redis->cli('PEXPIRE', $name, '600000');
	}
	# the force release runs in Redis and its reply is lost: it goes again
	my ($o, $e, $st) = $proxy->lose_reply(
		$redis, $s,
		"SELECT rlock_force_release('$name')",
		qr/"EVALSHA" "\w+" "\d+" "$name"/i,
		$what,
		sub {
			is($redis->cli('EXISTS', $name), '0', "$what: the lock is gone");
			# the next holder takes the lock
			$redis->cli('HSET', $name, $next, '1');
			$redis->cli('PEXPIRE', $name, '600000');
		});
	is("$o/$st", ($held ? 't' : 'f') . '/00000',
		"$what: it answers as the first time it ran")
	  or diag("stderr: $e");
	is($redis->cli('HGET', $name, $next), '1',
		"$what: the next holder's lock is still there");
	$redis->cli('DEL', $name);
}

$s->quit;
$node->stop;
$proxy->stop;
$redis->stop;
done_testing();
