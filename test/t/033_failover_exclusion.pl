
# Copyright (c) 2026, rlock developers
#
# Failover exclusion (issue 21, section 2): committed critical sections
# never overlap across two databases and two PostgreSQL servers while the
# Sentinel masters are paused (SIGSTOP), resumed (SIGCONT) and killed
# (SIGKILL).  Four sessions (servers A and B, two databases each) take one
# transaction lock in a loop around a recorded section
# (RlockTest::Exclusion); every fault below happens while they run:
#
#   1. split brain across servers (item 12): the first master is paused,
#      the sentinels fail over while it is stopped, it is resumed as the
#      failover completes and, its REPLICAOF renamed away, stays a second
#      master.  Server A follows the sentinels on its own schedule: its
#      watchdog is stopped meanwhile and its round trips wait out the pause
#      (rlock.command_timeout 30 s), so its sessions carry on with the old
#      master, without replica acknowledgement (rlock.replica_acks 0 on A,
#      so that only the check before COMMIT stands between them and B's);
#   2. the master is killed (SIGKILL), a replica promoted;
#   3. the master is paused and resumed as the failover completes (no help:
#      both servers follow as they do).
#
# After each fault the loops run until every session has committed again;
# at the end: zero overlaps among the committed sections, and the counts.

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
my $sent = RlockTest::Sentinel->new(
	replicas => 2,
	sentinels => 3,
	master_args => [
		'--rename-command', 'REPLICAOF', 'rlock_test_no_replicaof',
		'--rename-command', 'SLAVEOF', 'rlock_test_no_slaveof'
	]);
my $first = $sent->master;

my $node_a = RlockTest::new_node('a', undef,
	url => $sent->url,
	dbs => [ 'postgres', 'db2' ],
	extra_conf => "rlock.command_timeout = '30s'\nrlock.replica_acks = 0\n");
my $node_b = RlockTest::new_node('b', undef,
	url => $sent->url,
	dbs => [ 'postgres', 'db2' ]);

my $ex = RlockTest::Exclusion->new(
	sessions => [ map { my $n = $_; map { [ $n, $_ ] } 'postgres', 'db2' } $node_a, $node_b ],
	lock => 'excl',
	lease => '5s',
	lock_timeout => '10s',
	timeout_s => 150);

# Whether every running sentinel names a master other than port $old
# (asked at most every 200 ms; a paused node is never asked anything).
my $last_ask = 0;
sub sentinels_moved_from
{
	my ($old) = @_;
	return 0 if time() - $last_ask < 0.2;
	$last_ask = time();
	foreach my $i (0 .. 2)
	{
		my ($out, undef, $rc) = $sent->sentinel_cli($i, 'SENTINEL',
			'GET-MASTER-ADDR-BY-NAME', $sent->master_name);
		return 0 if $rc != 0 || !defined $out;
		my (undef, $p) = split /\n/, $out;
		return 0 unless defined $p && $p =~ /^\d+$/ && $p != $old;
	}
	return 1;
}

$ex->drive_until_each(0, 3, 'four sessions on two servers take turns');

# ---- 1. the first master paused; server A behind the sentinels ----

my $worker_a = $node_a->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'rlock watchdog'");
push @paused, $worker_a;
kill 'STOP', $worker_a;
my $old_pid = $first->pid;
my $paused_at = time();
push @paused, $old_pid;
kill 'STOP', $old_pid;
note 'master ' . $first->where . " paused (pid $old_pid)";
my $moved = $ex->drive(sub { sentinels_moved_from($first->port) }, 60);
kill 'CONT', $old_pid;
my $resumed_at = time();
ok($moved, 'the sentinels fail over while the first master is paused');
my $second = $sent->master;
note sprintf('1: %s paused, %s named %.3f s later; resumed: ROLE %s',
	$first->where, $second->where, $resumed_at - $paused_at,
	(split /\n/, $first->cli('ROLE') // '?')[0]);
$ex->drive_until_each($resumed_at, 1,
	'1: every session commits again after the resume');
kill 'CONT', $worker_a;

# heal: the first master becomes a replica of the new one (never promoted)
$first->cli('CONFIG', 'SET', 'replica-priority', '0');
$first->cli('rlock_test_no_replicaof', '127.0.0.1', $second->port);
ok( RlockTest::wait_until(
		sub {
			($first->cli('INFO', 'replication') // '') =~
			  /^master_link_status:up\r?$/m;
		}),
	'the first master is made a replica of the new one');

# ---- 2. the master killed ----

my $killed = $sent->master;
my $killed_at = $sent->kill_master;
$moved = $ex->drive(sub { sentinels_moved_from($killed->port) }, 60);
ok($moved, '2: the sentinels fail over from the killed master');
my $third = $sent->master;
my $named_at = time();
note sprintf('2: %s killed, %s named %.3f s later',
	$killed->where, $third->where, $named_at - $killed_at);
$ex->drive_until_each($named_at, 1, '2: every session commits again after the kill');
$sent->revive($killed);

# ---- 3. the master paused, resumed as the failover completes ----

my $pausing = $sent->master;
my $pid3 = $pausing->pid;
my $paused3 = time();
push @paused, $pid3;
kill 'STOP', $pid3;
$moved = $ex->drive(sub { sentinels_moved_from($pausing->port) }, 60);
kill 'CONT', $pid3;
my $resumed3 = time();
ok($moved, '3: the sentinels fail over while the master is paused');
note sprintf('3: %s paused, resumed %.3f s later as %s was named',
	$pausing->where, $resumed3 - $paused3, $sent->master->where);
$ex->drive_until_each($resumed3, 1, '3: every session commits again after the resume');

$ex->finish;
$ex->note_summary($t_begin);
$ex->check;

$node_a->stop;
$node_b->stop;
done_testing();
