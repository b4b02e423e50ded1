# Copyright (c) 2026, rlock developers
#
# rlock.max_locks counts held locks.  A lock the watchdog found lost stays
# in the registry until its session hears of it (its next call on the
# name), and must not keep others from locking meanwhile: before, such
# lingering entries filled the registry and another session's acquisition
# failed with 53200, even after waiting for its lock (issue 21, item 15).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use RlockTest;

my $redis = RlockTest::Redis->new;
my $node = RlockTest::new_node('room', $redis, extra_conf => "rlock.max_locks = 16\n");
my $a = $node->background_psql('postgres', on_error_stop => 0);
my $b = $node->background_psql('postgres', on_error_stop => 0);
my $c = $node->background_psql('postgres', on_error_stop => 0);

my ($out, $err, $state) = RlockTest::run_sql($a,
	"SELECT count(rlock_acquire('room' || i, '300 ms')) FROM generate_series(1, 16) i");
is($state, '00000', 'a session takes 16 locks (rlock.max_locks) with short fixed leases') or diag($err);
ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 16 FROM rlock_locks WHERE name LIKE 'room%' AND state = 'lost'"),
	'all run out and are marked lost; the session has not heard of it yet');

($out, $err, $state) = RlockTest::run_sql($b, "SELECT rlock_acquire('held1')");
is($state, '00000', 'another session still takes a lock') or diag($err);
RlockTest::start_bg($c, "SELECT rlock_acquire('held1')");
RlockTest::wait_for_rlock_waiters($node, 'postgres', 1);
RlockTest::run_sql($b, "SELECT rlock_release('held1')");
ok(RlockTest::wait_until(sub { RlockTest::bg_done($c) }, 60), 'a waiter for it wakes');
($out, $err, $state) = RlockTest::bg_result($c);
is($state, '00000', 'and gets it, with the lost entries still there') or diag($err);
($out, $err, $state) = RlockTest::run_sql($b, "SELECT count(rlock_acquire('held' || i)) FROM generate_series(2, 16) i");
is($state, '00000', '16 locks held: rlock.max_locks') or diag($err);
($out, $err, $state) = RlockTest::run_sql($b, "SELECT rlock_acquire('held17')");
is($state, '53200', 'a 17th held lock is refused: max_locks still counts held locks');
is($redis->cli('EXISTS', 'held17'), '0', 'and given back to Redis');

($out, $err) = RlockTest::run_sql($a, "SELECT count(rlock_release('room' || i)) FROM generate_series(1, 16) i");
like($err, qr/was lost/, 'the first session hears of its losses');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM rlock_locks WHERE name LIKE 'room%'"),
	'0', 'and their entries go');
RlockTest::run_sql($b, 'SELECT rlock_release_all()');
RlockTest::run_sql($c, 'SELECT rlock_release_all()');
$_->quit for ($a, $b, $c);
done_testing();
