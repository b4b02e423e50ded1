# Copyright (c) 2026, rlock developers
#
# Fair-lock interop with Redisson's deadline chain: each waiter's deadline
# is its predecessor's plus its own wait, and every acquisition moves the
# deadlines behind it in by the acquirer's wait.  A Redisson lock() waits
# 300 s, rlock's waiters 10 s, so when a Redisson waiter ahead of an rlock
# waiter takes the lock, the rlock waiter's deadline may lie in the past.
# A live rlock waiter must not lose its place for that: it refreshes its
# deadline along the chain and never drops itself as a stale head.  Driven
# with Redisson's own scripts (PROTOCOL.md); the Redisson waiter that has
# waited long is given an earlier clock (its scripts take the client's
# time), so that no test has to wait minutes.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use RlockTest;

my $redis = RlockTest::Redis->new;
my $node = RlockTest::new_node('chain', $redis);

sub q1
{
	my ($s, $sql) = @_;
	my ($out, $err) = RlockTest::query_err($s, $sql);
	return $out;
}

# Redisson's fair acquire (queueing) and release, from PROTOCOL.md.
my $java_acquire = $RlockTest::Redisson::fair_acquire;
my $java_release = $RlockTest::Redisson::fair_release;
my @fkeys = ('fc', 'redisson_lock_queue:{fc}', 'redisson_lock_timeout:{fc}',
	'redisson_lock__channel:{fc}');
my $j1 = '5e4d3c2b-1a09-4f8e-9d7c-6b5a4f3e2d1c:71';
my $j2 = '5e4d3c2b-1a09-4f8e-9d7c-6b5a4f3e2d1c:72';
sub now_ms { return int(time() * 1000); }
sub java_acquire
{
	my ($who, $now) = @_;
	return $redis->eval($java_acquire, [ @fkeys[0 .. 2] ], 60000, $who, 300000, $now);
}
sub queue { return join(' ', split(/\n/, $redis->cli('LRANGE', $fkeys[1], 0, -1))); }
sub deadline { return $redis->cli('ZSCORE', $fkeys[2], $_[0]); }

my $h = $node->background_psql('postgres', on_error_stop => 0);
my $r = $node->background_psql('postgres', on_error_stop => 0);
my $rid = q1($r, 'SELECT rlock_holder_id()');

q1($h, "SELECT rlock_fair_acquire('fc', '1 minute')");
# j1 has waited almost five minutes already (its clock says so)
java_acquire($j1, now_ms() - 295_000);
$r->query_until(qr/started\n/,
	"\\echo started\nSELECT rlock_fair_acquire('fc', '1 minute');\n\\echo done\n");
ok(RlockTest::wait_until(sub { queue() eq "$j1 $rid" }, 10),
	'the rlock waiter queues behind the Redisson waiter');
is(deadline($rid) - deadline($j1), 10000,
	"its deadline is the Redisson waiter's plus its own wait (10 s)");
java_acquire($j2, now_ms());
is(queue(), "$j1 $rid $j2", 'a second Redisson waiter queues behind it');

q1($h, "SELECT rlock_fair_release('fc')");
is(java_acquire($j1, now_ms()), '', 'the first Redisson waiter takes the lock at its turn');
cmp_ok(deadline($rid), '<', now_ms(),
	"which moved the rlock waiter's deadline 300 s in: it lies in the past now");

# the rlock waiter tries again (a message on its own channel wakes it)
$redis->cli('PUBLISH', "redisson_lock__channel:{fc}:$rid", '0');
ok(RlockTest::wait_until(sub { deadline($rid) ne '' && deadline($rid) > now_ms() }, 10),
	'the live rlock waiter refreshes its deadline');
is(queue(), "$rid $j2", 'and keeps its place at the head, ahead of the later Redisson waiter');

is($redis->eval($java_release, [@fkeys], '0', $j1), '1', 'the Redisson holder releases');
my $out = $r->query_until(qr/done\n/, '');
is($r->{stderr}, '', 'the rlock waiter, told on its own channel, gets the lock');
is($redis->cli('HGET', 'fc', $rid), '1', 'it holds it in Redis');
is(queue(), $j2, 'the second Redisson waiter is next');
q1($r, "SELECT rlock_fair_release('fc')");
is(java_acquire($j2, now_ms()), '', 'and gets it at its turn');

done_testing();
