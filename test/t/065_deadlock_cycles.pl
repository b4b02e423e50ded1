
# Copyright (c) 2026, rlock developers
#
# Deadlocks found across servers (SPEC.md section 5.6), between exclusive
# locks: two PostgreSQL servers, "alpha" and "beta", on one Redis, and two
# more, "gamma" and "delta", on a Redis Cluster; deadlock_timeout and
# rlock.deadlock_timeout are 1 s everywhere.
#   1. a 2-cycle across the two servers: the most recent waiter is the
#      victim, whichever server it is on (the cycle is made twice, each
#      server's session closing it once);
#   2. a 3-cycle over 3 sessions on 2 servers;
#   3. a cycle through a Redis Cluster's masters (the two locks' keys in
#      slots of different masters).
# In each case exactly one session fails, with SQLSTATE 40P01 "deadlock
# detected" (read from psql's verbose message and from :SQLSTATE), a DETAIL
# line per edge of the cycle naming the right pids and servers, within
# deadlock_timeout + 3 s of the cycle closing (the figure is noted); then
# the others acquire, once the victim's transaction has aborted and each
# one ahead of them has committed.  Every lock is transaction-level, so the
# victim's abort frees what it held.
#
# Without deadlock detection no session ever errors: each case would meet
# its 30 s wait bound and fail ("a session failed" is not ok).
#
# Read/write, fair, semaphore and mixed PostgreSQL/rlock cycles are in
# 066_deadlock_kinds.pl; the helpers of both files are in
# test/perl/RlockTest/Deadlock.pm.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use RlockTest;
use RlockTest::Deadlock;

my $redis = RlockTest::Redis->new;
my $alpha = RlockTest::Deadlock::node('alpha', $redis);
my $beta = RlockTest::Deadlock::node('beta', $redis);

my $a1 = RlockTest::Deadlock::session($alpha);
my $a2 = RlockTest::Deadlock::session($alpha);
my $b1 = RlockTest::Deadlock::session($beta);

# ---- 1. a 2-cycle across two servers ----

RlockTest::Deadlock::cycle(
	'2-cycle across two servers',
	hold => [
		[ $a1, "SELECT rlock_xact_acquire('c1x')" ],
		[ $b1, "SELECT rlock_xact_acquire('c1y')" ],
	],
	waits => [
		[ $a1, "SELECT rlock_xact_acquire('c1y')" ],
		[ $b1, "SELECT rlock_xact_acquire('c1x')" ],
	],
	# the most recent waiter, b1, first; edges round back to it
	lines => [
		[ $b1, 'rlock lock "c1x"', $a1 ],
		[ $a1, 'rlock lock "c1y"', $b1 ],
	]);

# the same with the other server's session waiting first: the victim is
# still the most recent waiter, now on alpha
RlockTest::Deadlock::cycle(
	'2-cycle across two servers, beta waiting first',
	hold => [
		[ $a1, "SELECT rlock_xact_acquire('c1x')" ],
		[ $b1, "SELECT rlock_xact_acquire('c1y')" ],
	],
	waits => [
		[ $b1, "SELECT rlock_xact_acquire('c1x')" ],
		[ $a1, "SELECT rlock_xact_acquire('c1y')" ],
	],
	lines => [
		[ $a1, 'rlock lock "c1y"', $b1 ],
		[ $b1, 'rlock lock "c1x"', $a1 ],
	]);

# ---- 2. a 3-cycle over 3 sessions on 2 servers ----

RlockTest::Deadlock::cycle(
	'3-cycle over 3 sessions on 2 servers',
	hold => [
		[ $a1, "SELECT rlock_xact_acquire('c2a')" ],
		[ $b1, "SELECT rlock_xact_acquire('c2b')" ],
		[ $a2, "SELECT rlock_xact_acquire('c2c')" ],
	],
	waits => [
		[ $a1, "SELECT rlock_xact_acquire('c2b')" ],
		[ $b1, "SELECT rlock_xact_acquire('c2c')" ],
		[ $a2, "SELECT rlock_xact_acquire('c2a')" ],
	],
	lines => [
		[ $a2, 'rlock lock "c2a"', $a1 ],
		[ $a1, 'rlock lock "c2b"', $b1 ],
		[ $b1, 'rlock lock "c2c"', $a2 ],
	]);

# ---- 3. a cycle through a Redis Cluster's two masters ----

my $c = RlockTest::Cluster->new(masters => 3, replicas => 0);
my $names = $c->names_on_each_master(1, 'dlc');
my @ports = sort keys %$names;
my ($kx, $ky) = ($names->{ $ports[0] }[0], $names->{ $ports[1] }[0]);
isnt($c->master_of($kx)->port, $c->master_of($ky)->port,
	"cluster: $kx and $ky are on different masters");
my $gamma = RlockTest::Deadlock::node('gamma', undef, url => $c->url, store => $c);
my $delta = RlockTest::Deadlock::node('delta', undef, url => $c->url, store => $c);
my $g1 = RlockTest::Deadlock::session($gamma);
my $d1 = RlockTest::Deadlock::session($delta);

RlockTest::Deadlock::cycle(
	'cycle through two masters of a Redis Cluster',
	hold => [
		[ $g1, "SELECT rlock_xact_acquire('$kx')" ],
		[ $d1, "SELECT rlock_xact_acquire('$ky')" ],
	],
	waits => [
		[ $g1, "SELECT rlock_xact_acquire('$ky')" ],
		[ $d1, "SELECT rlock_xact_acquire('$kx')" ],
	],
	lines => [
		[ $d1, "rlock lock \"$kx\"", $g1 ],
		[ $g1, "rlock lock \"$ky\"", $d1 ],
	]);
ok($c->call($kx, 'EXISTS', $kx) == 0 && $c->call($ky, 'EXISTS', $ky) == 0,
	'cluster: both locks are free after the commits');

$_->quit foreach ($a1, $a2, $b1, $g1, $d1);
done_testing();
