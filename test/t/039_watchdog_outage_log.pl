# Copyright (c) 2026, rlock developers
#
# The watchdog says "Redis answers again, renewals resumed" only when Redis
# answered.  A cycle with nothing to renew (the only lock was given up as
# lost while Redis stayed stopped) asks nothing: that is no news of the
# outage ending (issue 21, item 15: the line was logged while Redis was
# still stopped).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use RlockTest;

my $redis = RlockTest::Redis->new;
my $node = RlockTest::new_node('outage', $redis, watchdog_timeout => '2s');
my $s = $node->background_psql('postgres', on_error_stop => 0);

my ($out, $err, $state) = RlockTest::run_sql($s, "SELECT rlock_acquire('outage1')");
is($state, '00000', 'a session holds a lock renewed by the watchdog') or diag($err);
my $offset = -s $node->logfile;
$redis->stop;
ok( $node->poll_query_until('postgres',
		"SELECT state = 'lost' FROM rlock_locks WHERE name = 'outage1'"),
	'with Redis stopped, the watchdog gives the lock up (fail closed)');
# From here on the watchdog has nothing to renew; it wakes every 667 ms.
# Without the fix the line came at its next cycle; give it 5 s (seven
# cycles) to appear.
ok(!RlockTest::wait_until(sub { RlockTest::log_has($node, $offset, qr/Redis answers again/) }, 5),
	'"Redis answers again" is not logged while Redis is still stopped');

$redis->start;
($out, $err, $state) = RlockTest::run_sql($s, "SELECT rlock_release('outage1')");
like($err, qr/was lost/, 'the session hears of the loss at its next call');
($out, $err, $state) = RlockTest::run_sql($s, "SELECT rlock_acquire('outage2')");
is($state, '00000', 'and takes a new lock once Redis is back') or diag($err);
ok( RlockTest::wait_until(
		sub { RlockTest::log_has($node, $offset, qr/Redis answers again, renewals resumed/) },
		30),
	'the first renewal that Redis answers is logged as the end of the outage');
RlockTest::run_sql($s, 'SELECT rlock_release_all()');
$s->quit;
done_testing();
