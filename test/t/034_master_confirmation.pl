
# Copyright (c) 2026, rlock developers
#
# The check before COMMIT confirms the master (SPEC 6), and a master cut
# off from its replicas is still waited on (SPEC 10), deterministically:
#
#   - split brain across servers (issue 21, item 12): two PostgreSQL
#     servers on the same sentinels; the master is paused (SIGSTOP), the
#     sentinels fail over while it is stopped, and it is resumed.  It
#     cannot be demoted (its REPLICAOF is renamed away), and server A's
#     watchdog is stopped too, so that A's backend keeps talking to the old
#     master, which still says ROLE master.  B holds the lock on the new
#     master; A takes it as a transaction lock on the old one: its COMMIT
#     must fail with the lost-lock ERROR naming the new master, and its next
#     call must go to the new master (where B holds it);
#   - a COMMIT on the real master goes through; with every sentinel gone it
#     fails closed (nobody confirms the master);
#   - replica acknowledgement (item 13): a standalone master whose one
#     replica is cut off reports no replicas; a new session's acquisition
#     is refused (08006) and undone, not taken without a WAIT.

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

my ($out, $err, $state);

# ---- item 12: the old master, resumed after the failover ----

my $sent = RlockTest::Sentinel->new(
	replicas => 1,
	sentinels => 3,
	master_args => [
		'--rename-command', 'REPLICAOF', 'rlock_test_no_replicaof',
		'--rename-command', 'SLAVEOF', 'rlock_test_no_slaveof'
	]);
my $old = $sent->master;
my $old_port = $old->port;

my %conf = (
	url => $sent->url,
	watchdog_timeout => '30s',
	extra_conf => "rlock.replica_acks = 0\n");
my $node_a = RlockTest::new_node('a', undef, %conf);
my $node_b = RlockTest::new_node('b', undef, %conf);
my $sa = $node_a->background_psql('postgres', on_error_stop => 0);
my $sb = $node_b->background_psql('postgres', on_error_stop => 0);

($out, $err) = RlockTest::query_err($sa,
	"SELECT split_part(node, ':', 2) FROM rlock_nodes()");
is("$out/$err", "$old_port/", 'server A talks to the first master');

# server A's watchdog would re-point A (every process of A) to the new
# master within a second of the failover: stop it, so that A's backend
# follows the sentinels only as the check before COMMIT makes it
my $worker_a = $node_a->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'rlock watchdog'");
ok($worker_a =~ /^\d+$/, 'server A has a watchdog');
push @paused, $worker_a;
kill 'STOP', $worker_a;

my $old_pid = $old->pid;
push @paused, $old_pid;
kill 'STOP', $old_pid;
note "master $old_port paused (pid $old_pid)";
my $secs = $sent->wait_failover($old_port, 60);
ok(defined $secs, 'the sentinels fail over while the master is paused');
my $new = $sent->master;
my $new_port = $new->port;
kill 'CONT', $old_pid;
note "master $old_port resumed";
like($old->cli('ROLE') // '', qr/^master/,
	'the old master, resumed, still says it is a master');

($out, $err) = RlockTest::query_err($sb,
	"SELECT rlock_try_acquire('split', '30 seconds')");
is("$out/$err", 't/', 'server B holds the lock on the new master');
is($new->cli('EXISTS', 'split'), '1', '... which has it');

($out, $err, $state) = RlockTest::run_sql($sa,
	"BEGIN; SELECT rlock_xact_try_acquire('split', '30 seconds')");
is("$out/$err", 't/',
	'server A, still on the old master, takes it as a transaction lock');
is($old->cli('EXISTS', 'split'), '1', '... on the old master');
($out, $err, $state) = RlockTest::run_sql($sa, 'COMMIT');
is($state, '40000', 'its COMMIT fails (SQLSTATE 40000)');
like($err, qr/cannot commit: lock "split" held by this transaction was lost/,
	'... with the lost-lock ERROR');
like($err, qr/sentinels name 127\.0\.0\.1:$new_port as master/,
	'... whose DETAIL names the new master');

($out, $err) = RlockTest::query_err($sa,
	"SELECT rlock_try_acquire('split', '30 seconds')");
is("$out/$err", 'f/',
	'server A then asks the new master, where B holds the lock');
($out, $err) = RlockTest::query_err($sa,
	"SELECT split_part(node, ':', 2) FROM rlock_nodes()");
is("$out/$err", "$new_port/", 'server A now talks to the new master');

($out, $err, $state) = RlockTest::run_sql($sa,
	"BEGIN; SELECT rlock_xact_try_acquire('fine', '30 seconds'); COMMIT");
is("$out/$state", 't/00000',
	'a transaction lock on the confirmed master commits');

kill 'CONT', $worker_a;

# fail closed: nobody can confirm the master
$sent->stop_sentinel($_) for 0 .. 2;
($out, $err, $state) = RlockTest::run_sql($sa,
	"BEGIN; SELECT rlock_xact_try_acquire('closed', '30 seconds')");
is("$out/$err", 't/', 'with the sentinels gone, the master still grants');
($out, $err, $state) = RlockTest::run_sql($sa, 'COMMIT');
is($state, '40000', '... but COMMIT fails closed');
like($err, qr/No sentinel confirmed that 127\.0\.0\.1:$new_port/,
	'... saying no sentinel confirmed the master');

$sa->quit;
$sb->quit;
$node_a->stop;
$node_b->stop;

# ---- item 13: a master cut off from its replica is still waited on ----

my ($master, $link, $replica) = RlockTest::replica_behind_link();

my $node = RlockTest::new_node('acks', $master, watchdog_timeout => '30s',
	extra_conf => "rlock.replica_ack_timeout = '300ms'\n");
my $s1 = $node->background_psql('postgres', on_error_stop => 0);
($out, $err) = RlockTest::query_err($s1,
	"SELECT replicas FROM rlock_nodes()");
is("$out/$err", '1/', 'the master has one replica');
($out, $err) = RlockTest::query_err($s1,
	"SELECT rlock_try_acquire('before'), rlock_release('before')");
is("$out/$err", 't|t/', 'acknowledged acquisition');

$link->stop;
ok( RlockTest::wait_until(
		sub {
			($master->cli('INFO', 'replication') // '') =~
			  /^connected_slaves:0\r?$/m;
		}),
	'the replica is cut off: the master reports none');

# a new session learns the count afresh (ROLE at its handshake)
my $s2 = $node->background_psql('postgres', on_error_stop => 0);
($out, $err) = RlockTest::query_err($s2,
	"SELECT replicas FROM rlock_nodes()");
is("$out/$err", '0/', 'the new session sees no replica');
($out, $err, $state) = RlockTest::run_sql($s2,
	"SELECT rlock_try_acquire('cutoff')");
is($state, '08006', 'its acquisition is refused (08006)');
like($err, qr/was not acknowledged by enough Redis replicas/,
	'... for want of acknowledgements');
is($master->cli('EXISTS', 'cutoff'), '0', '... and undone in Redis');
($out, $err) = RlockTest::query_err($s2, "SELECT rlock_is_held('cutoff')");
is("$out/$err", 'f/', '... and in the session');
($out, $err, $state) = RlockTest::run_sql($s1,
	"SELECT rlock_try_acquire('cutoff1')");
is($state, '08006', 'the first session is refused too');

$s1->quit;
$s2->quit;
$node->stop;
done_testing();
