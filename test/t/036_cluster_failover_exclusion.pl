
# Copyright (c) 2026, rlock developers
#
# Failover exclusion in a Redis Cluster (issue 21, section 2): committed
# critical sections never overlap across two databases and two PostgreSQL
# servers while the master of the lock's slot is paused (SIGSTOP) and
# resumed (SIGCONT) as its replica's promotion completes, and then killed
# (SIGKILL).  Four sessions (servers A and B, two databases each) take one
# transaction lock in a loop around a recorded section
# (RlockTest::Exclusion).  Server A's round trips wait out a pause
# (rlock.command_timeout 30 s), so its sessions carry on with the resumed
# old master, which believes it still owns the slot until the cluster's
# gossip reaches it; B's time out and follow the new one.  After each fault
# the loops run until every session has committed again (after the kill,
# once the killed node is back: until then the promoted master has no
# replica to acknowledge acquisitions); at the end: zero overlaps among
# the committed sections, and the counts.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use RlockTest;

# processes this file stops (SIGSTOP): let them go on whatever happens, or
# the clean-up at exit would wait for them
my @paused;
END { kill 'CONT', @paused if @paused; }

my $t_begin = time();
my $c = RlockTest::Cluster->new(masters => 3, replicas => 1,
	node_timeout_ms => 2000);

my $node_a = RlockTest::new_node('ca', undef,
	url => $c->url,
	dbs => [ 'postgres', 'db2' ],
	extra_conf => "rlock.command_timeout = '30s'\n");
my $node_b = RlockTest::new_node('cb', undef,
	url => $c->url,
	dbs => [ 'postgres', 'db2' ]);

my $excl = 'excl';
my $slot = $c->slot_of($excl);
my $ex = RlockTest::Exclusion->new(
	sessions => [ map { my $n = $_; map { [ $n, $_ ] } 'postgres', 'db2' } $node_a, $node_b ],
	lock => $excl,
	lease => '10s',
	lock_timeout => '25s',
	timeout_s => 150);


# Whether a node other than $port serves the slot (asked at most every
# 200 ms).
my $last_ask = 0;
sub slot_moved_from
{
	my ($port) = @_;
	return 0 if time() - $last_ask < 0.2;
	$last_ask = time();
	my $m = $c->master_of($slot);
	return $m && $m->port != $port;
}

$ex->drive_until_each(0, 3, 'four sessions on two servers take turns');

# ---- 1. the master of the slot paused, resumed as the promotion completes ----

my $paused = $c->master_of($slot);
my $pid = $paused->pid;
my $paused_at = time();
push @paused, $pid;
kill 'STOP', $pid;
$paused->{running} = 0;    # the harness asks the other nodes meanwhile
note 'master ' . $paused->where . " of slot $slot paused (pid $pid)";
my $moved = $ex->drive(sub { slot_moved_from($paused->port) }, 60);
kill 'CONT', $pid;
$paused->{running} = 1;
my $resumed_at = time();
ok($moved, '1: the replica is promoted while the master is paused');
note sprintf('1: %s paused, resumed %.3f s later as %s took slot %d over',
	$paused->where, $resumed_at - $paused_at,
	($c->master_of($slot) // $paused)->where, $slot);
$ex->drive_until_each($resumed_at, 2, '1: every session commits again after the resume');
ok($c->wait_settled(60), '1: the cluster settles, the old master a replica');

# ---- 2. the master of the slot killed ----

my $killed = $c->master_of($slot);
my $killed_at = $c->kill_master($killed);
$moved = $ex->drive(sub { slot_moved_from($killed->port) }, 60);
ok($moved, '2: the replica is promoted after the kill');
my $named_at = time();
note sprintf('2: %s killed, slot %d served elsewhere %.3f s later',
	$killed->where, $slot, $named_at - $killed_at);
# the promoted master has no replica until the killed node comes back,
# and acquisitions wait for one (rlock.replica_acks; SPEC 10)
$c->revive($killed);
$ex->drive_until_each($named_at, 2,
	'2: every session commits again after the kill and the revival');

$ex->finish;
$ex->note_summary($t_begin);
$ex->check;

$node_a->stop;
$node_b->stop;
done_testing();
