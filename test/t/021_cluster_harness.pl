# Copyright (c) 2026, rlock developers

# RlockTest::Cluster, the Redis Cluster the cluster tests run against: what
# those tests rely on.  It comes up settled with 3 masters that each serve
# slots and 1 replica each; slot_of is Redis's CRC16 hash-tag rule;
# Redisson's scripts reach a name's master through it; a slot moves (ASK
# while it migrates, MOVED after); a killed master fails over to its
# replica and comes back as a replica.  No PostgreSQL here.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use RlockTest;
use Test::More;

my $c = RlockTest::Cluster->new(masters => 3, replicas => 1,
	node_timeout_ms => 2000);
note sprintf('cluster of 6 nodes created in %.2fs', $c->created_in);

my @masters = $c->masters;
is(scalar $c->nodes, 6, 'six nodes');
is(scalar @masters, 3, 'three masters');
is(scalar $c->replicas, 3, 'three replicas');
my $total = 0;
foreach my $m (@masters)
{
	my $n = 0;
	$n += $_->[1] - $_->[0] + 1 foreach $c->slots_of($m);
	ok($n > 0, 'master ' . $m->port . " serves slots ($n)");
	$total += $n;
	is(scalar $c->replicas_of($m), 1, 'master ' . $m->port . ' has one replica');
}
is($total, 16384, 'the masters serve all 16384 slots between them');
like($c->cli('CLUSTER', 'INFO'), qr/^cluster_state:ok\r?$/m,
	'cli: cluster_state:ok');
is($c->url, 'redis-cluster://' . join(',', map { '127.0.0.1:' . $_->port } @masters),
	'url lists the masters as seeds');

# CRC16-XMODEM of the hash tag or the whole key, mod 16384
is($c->slot_of('123456789'), 12739, 'slot_of: the CRC16 check value');
is($c->slot_of('{user1000}.following'), $c->slot_of('user1000'),
	'slot_of: a hash tag decides');
is($c->slot_of('redisson_lock__channel:{orders}'), $c->slot_of('orders'),
	"slot_of: a lock's channel is in its name's slot");

my $names = $c->names_on_each_master(2, 'h');
is_deeply([ sort keys %$names ], [ sort map { $_->port } @masters ],
	'names_on_each_master: one entry per master');
my $placed = 1;
foreach my $p (keys %$names)
{
	$placed = 0 unless @{ $names->{$p} } == 2;
	foreach my $name (@{ $names->{$p} })
	{
		$placed = 0 unless $c->master_of($name)->port == $p;
	}
}
ok($placed, 'names_on_each_master: two names on each, master_of agrees');

# Redisson's lock through the cluster
my $m0 = $masters[0];
my $name = $names->{ $m0->port }[0];
is(RlockTest::Redisson::try_lock($c, $name, 30000, 'java:1'), '',
	'Redisson try_lock through the cluster');
is($m0->cli('HGET', $name, 'java:1'), '1', "the lock is on its slot's master");
is($c->cli('HGET', $name, 'java:1'), '1', 'cli -c finds it too');
like(RlockTest::Redisson::try_lock($c, $name, 30000, 'java:2'), qr/^\d+$/,
	'another holder gets the PTTL');

# a slot moves: ASK while migrating, MOVED after
my $slot = $c->slot_of($name);
my $to = $masters[1];
$c->begin_migration($slot, $to);
is($m0->cli('CLUSTER', 'COUNTKEYSINSLOT', $slot), '0',
	'begin_migration: the keys left the source');
like($m0->cli('HGET', $name, 'java:1'), qr/^ASK $slot 127\.0\.0\.1:${\ $to->port }$/,
	'the source answers ASK for them');
is($c->call($name, 'HGET', $name, 'java:1'), '1', 'call follows ASK');
is($c->master_of($slot)->port, $m0->port, 'the source still owns the slot');
$c->finish_migration($slot);
is($c->master_of($slot)->port, $to->port, 'finish_migration: the target owns it');
like($m0->cli('HGET', $name, 'java:1'), qr/^MOVED $slot 127\.0\.0\.1:${\ $to->port }$/,
	'the source answers MOVED');
is(RlockTest::Redisson::unlock($c, $name, 'java:1'), '1',
	'Redisson unlock (publish) where the slot went');
my $slot2 = $c->slot_of($names->{ $m0->port }[1]);
$c->move_slot($slot2, $masters[2]);
is($c->master_of($slot2)->port, $masters[2]->port, 'move_slot');

SKIP:
{
	skip 'SPUBLISH needs Redis 7', 2 if RlockTest::redis_version() < 70000;
	my $n2 = $names->{ $masters[2]->port }[0];
	is(RlockTest::Redisson::try_lock($c, $n2, 30000, 'java:1'), '',
		'try_lock for a sharded release');
	is(RlockTest::Redisson::unlock($c, $n2, 'java:1', 'spublish'), '1',
		'Redisson unlock with spublish');
}

# a master dies: its replica takes over
my $victim = $masters[2];
my ($heir) = $c->replicas_of($victim);
my @victim_slots = $c->slots_of($victim);
$c->kill_master($victim);
my $secs = $c->wait_failover($victim, 30);
ok(defined $secs, 'wait_failover: the killed master was failed over');
diag(sprintf('failover settled %.2fs after the kill (cluster-node-timeout %d ms)',
		$secs, $c->node_timeout_ms))
  if defined $secs;
is($c->master_of($victim_slots[0][0])->port, $heir->port,
	'its replica serves its slots');
is(scalar $c->masters, 3, 'three masters again');
ok(!grep({ $_->port == $victim->port } $c->masters), 'the dead one is not among them');
like($c->cli('CLUSTER', 'INFO'), qr/^cluster_state:ok\r?$/m, 'cluster_state:ok');

$c->revive($victim);
is_deeply([ map { $_->port } $c->replicas_of($heir) ], [ $victim->port ],
	'revive: the old master is a replica of its heir');

done_testing();
