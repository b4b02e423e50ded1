# Copyright (c) 2026, rlock developers
#
# A DISCARD ALL cancelled while its releases are in flight (issue 21, item
# 14): the session's table no longer counts the locks, so the watchdog must
# stop renewing them at once.  Before, the registry still showed them held
# and the worker renewed them forever, while no session tracked them.  What
# Redis could not be told expires with its lease; the session's next call
# gives back what is left.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use RlockTest;

my $redis = RlockTest::Redis->new;
my $proxy = RlockTest::Proxy->new($redis);
# 6 s leases renewed every 2 s: a renewal keeps a lock alive well past
# the 20 s the test waits for it to go; the DISCARD ALL's round trip waits
# up to 60 s, long enough to be cancelled while it waits.
# (DISCARD ALL resets the session's settings first: the timeout is the
# server's.)
my $node = RlockTest::new_node('discard', $proxy, watchdog_timeout => '6s',
	extra_conf => "rlock.replica_acks = 0\nrlock.command_timeout = '60s'\n");
my $s = $node->background_psql('postgres', on_error_stop => 0);

my ($out, $err, $state) = RlockTest::run_sql($s,
	"SELECT rlock_acquire('dc1'), rlock_acquire('dc2'), rlock_acquire('dc2')");
is($state, '00000', 'a session holds dc1 and dc2 (twice), renewed by the watchdog')
  or diag($err);
my $pid = $s->query_safe('SELECT pg_backend_pid()');
chomp $pid;

$proxy->stall;
RlockTest::start_bg($s, 'DISCARD ALL');
ok( RlockTest::wait_until(
		sub {
			$node->safe_psql('postgres',
				"SELECT count(*) FROM pg_stat_activity WHERE pid = $pid AND query LIKE 'DISCARD ALL%' AND state = 'active' AND wait_event IS NOT NULL"
			) eq '1';
		},
		30),
	'DISCARD ALL waits for Redis (its releases are stalled)');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
ok(RlockTest::wait_until(sub { RlockTest::bg_done($s) }, 30), 'the cancel ends it');
(undef, $err, $state) = RlockTest::bg_result($s);
is($state, '57014', 'DISCARD ALL was cancelled') or diag($err);
# the releases never reach Redis: drop them with the connections
$proxy->cut;
$proxy->resume;

is( $node->safe_psql('postgres',
		"SELECT count(*) FROM rlock_locks WHERE pid = $pid AND state = 'held'"),
	'0',
	'rlock_locks no longer shows the session holding anything');
my $t0 = time();
ok(RlockTest::wait_until(sub { $redis->cli('EXISTS', 'dc1') eq '0' && $redis->cli('EXISTS', 'dc2') eq '0' }, 20),
	'the watchdog stopped renewing them: both expire in Redis within their lease');
note sprintf('the locks were gone %.1f s after the cancel', time() - $t0);

($out, $err, $state) = RlockTest::run_sql($s,
	"SELECT rlock_is_held('dc1'), rlock_hold_count('dc2'), rlock_try_acquire('dc1')");
is($out, 'f|0|t', 'the session holds nothing and takes dc1 afresh') or diag($err);
RlockTest::run_sql($s, 'SELECT rlock_release_all()');

$s->quit;
done_testing();
