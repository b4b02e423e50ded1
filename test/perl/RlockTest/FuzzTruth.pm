
# Copyright (c) 2026, rlock developers

#
# The reply fuzzer's view of Redis's truth (test/t/053_reply_fuzz.pl),
# read from Redis itself, not through the proxy: which names hold records
# of a holder, and the workload's keys cleared between rounds.
#
package RlockTest::FuzzTruth;

use strict;
use warnings;

use RlockTest;

our $REDIS;    # the RlockTest::Redis the proxy stands in front of

sub redis_conn
{
	my ($db) = @_;
	my $r = RlockTest::Resp->connect($REDIS->port, password => $REDIS->password)
	  or die "cannot reach Redis: $@";
	$r->request('SELECT', $db);
	return $r;
}

sub all_keys
{
	my ($r) = @_;
	my ($cursor, %keys) = (0);
	do
	{
		my ($v) = $r->request('SCAN', $cursor, 'COUNT', 1000);
		$cursor = $v->[0];
		$keys{$_} = 1 for @{ $v->[1] };
	} while ($cursor ne '0');
	return sort keys %keys;
}

# The names whose hold records in Redis name $holder: a hash field
# "<holder>" or "<holder>:write" (exclusive, fenced, fair, read/write and
# Redlock locks), a permit "<holder>:<k>" in a semaphore's {name}:timeout.
# A Redlock hold (database 1) with a lease is marked 'lease': rlock gives
# back what an acquire that failed left on a master, and releases, only
# on a master it can reach (the handshake of a mutated round may be
# refused: lock_redlock.c, "what a master that does not answer keeps
# expires with its lease"); one it does not list is not renewed (the
# watchdog renews what rlock_locks lists), so it goes with its lease.
sub truth
{
	my ($holder) = @_;
	my %names;
	for my $db (0, 1)
	{
		my $r = redis_conn($db);
		for my $k (all_keys($r))
		{
			my ($type) = $r->request('TYPE', $k);
			if ($type eq 'hash')
			{
				my ($f) = $r->request('HKEYS', $k);
				next unless grep { $_ eq $holder || $_ eq "$holder:write" } @$f;
				my ($pttl) = $db == 1 ? $r->request('PTTL', $k) : (-1);
				$names{$k} = $pttl > 0 ? 'lease' : 1;
			}
			elsif ($type eq 'zset' && $k =~ /^\{(.+)\}:timeout$/)
			{
				my $name = $1;
				my ($m) = $r->request('ZRANGE', $k, 0, -1);
				$names{$name} = 1 if grep { index($_, "$holder:") == 0 } @$m;
			}
		}
		$r->close;
	}
	return \%names;
}

# Every key of the workload's names gone, in both databases.
sub clean_redis
{
	for my $db (0, 1)
	{
		my $r = redis_conn($db);
		$r->request('DEL', $_) for grep { /fz:/ } all_keys($r);
		$r->close;
	}
	return;
}

1;
