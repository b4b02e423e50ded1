# Copyright (c) 2026, rlock developers
#
# rlock_stats across sessions and faults: a contended acquisition counts as
# one contended acquisition with its wait, a wait given up counts as failed,
# the watchdog's cycles, batches and renewals are counted, so are locks it
# finds lost, renewals that could not reach Redis, Redis errors and
# reconnects; and nothing is forgotten when a session ends.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use RlockTest;

my $redis = RlockTest::Redis->new;
# watchdog_timeout 2 s: a renewal every 0.67 s, and almost a second of slack
# before a lock not renewed counts as lost (at 4/5 of its lease), so that a
# watchdog slowed down by a loaded machine loses nothing.
my $node = RlockTest::new_node('stats', $redis, watchdog_timeout => '2s');

my $a = $node->background_psql('postgres', on_error_stop => 0);
my $b = $node->background_psql('postgres', on_error_stop => 0);
my $obs = $node->background_psql('postgres', on_error_stop => 0);

sub q1
{
	my ($s, $sql) = @_;
	my ($out, $err) = RlockTest::query_err($s, $sql);
	return $out;
}

# The counters now, as a hash.
sub stats
{
	my $row = q1($obs,
		"SELECT row_to_json(s) FROM rlock_stats s");
	my %h = $row =~ /"(\w+)":("[^"]*"|[\d.eE+-]+)/g;
	return \%h;
}

sub delta
{
	my ($before, $after, $k) = @_;
	return $after->{$k} - $before->{$k};
}

# ---- one contended acquisition ----

q1($a, "SELECT rlock_acquire('st_hot', '1 minute')");
my $s0 = stats();
$b->query_until(qr/waiting\n/,
	"\\echo waiting\nSELECT rlock_acquire('st_hot', '1 minute');\n");
RlockTest::wait_for_rlock_waiters($node, 'postgres', 1,
	"%rlock_acquire('st_hot'%");
usleep(300_000);
q1($a, "SELECT rlock_release('st_hot')");
$b->query_until(qr/\n/, '');
is(q1($b, "SELECT rlock_hold_count('st_hot')"), '1', 'the waiter got the lock');
my $s1 = stats();
is(delta($s0, $s1, 'acquisitions'), 1, 'one acquisition');
is(delta($s0, $s1, 'contended_acquisitions'), 1,
	'one contended acquisition');
is(delta($s0, $s1, 'failed_acquisitions'), 0, 'nothing failed');
is(delta($s0, $s1, 'releases'), 1, 'one release');
my $waited = delta($s0, $s1, 'wait_time');
cmp_ok($waited, '>=', 300, "the wait is counted ($waited ms)");
cmp_ok($waited, '<', 5000, 'and only the wait');

# ---- a wait cut short by lock_timeout counts as failed ----

$s0 = stats();
my ($out, $err) = RlockTest::query_err($a,
	"SET lock_timeout = '200ms'; SELECT rlock_acquire('st_hot', '1 minute'); RESET lock_timeout;");
like($err, qr/canceling statement due to lock timeout/, 'lock_timeout ends the wait');
$s1 = stats();
is(delta($s0, $s1, 'failed_acquisitions'), 1,
	'a wait ended by lock_timeout is one failed acquisition');
is(delta($s0, $s1, 'acquisitions'), 0, 'and no acquisition');
cmp_ok(delta($s0, $s1, 'wait_time'), '>=', 200, 'its wait is counted');
q1($b, "SELECT rlock_release('st_hot')");

# ---- counters outlive their session ----

$s0 = stats();
$node->safe_psql('postgres',
	"SELECT rlock_try_acquire('st_short_' || i, '1 minute') FROM generate_series(1, 5) i");
$s1 = stats();
is(delta($s0, $s1, 'acquisitions'), 5,
	'acquisitions of a session that has ended are still counted');
# (its backend releases them as it exits, which may be after safe_psql
# has returned)
RlockTest::wait_until(sub { delta($s0, stats(), 'releases') >= 5 }, 10);
is(delta($s0, stats(), 'releases'), 5, 'so are the releases at its exit');

# ---- the watchdog ----

q1($a, "SELECT rlock_acquire('st_wd_' || i) FROM generate_series(1, 1500) i");
$s0 = stats();
ok( RlockTest::wait_until(sub { delta($s0, stats(), 'renewal_cycles') >= 3 }, 10),
	'renewal cycles are counted');
$s1 = stats();
my $cycles = delta($s0, $s1, 'renewal_cycles');
my $renewals = delta($s0, $s1, 'renewals');
my $batches = delta($s0, $s1, 'renewal_batches');
# the 1500 locks are renewed in two script calls (1000 keys each) per cycle;
# the cycle at the edge of the window may or may not be counted
cmp_ok($renewals, '>=', 1500 * ($cycles - 1), "renewals counted per lock ($renewals in $cycles cycles)");
cmp_ok($renewals, '<=', 1500 * ($cycles + 1), 'and only per held lock');
cmp_ok($batches, '>=', 2 * ($cycles - 1), "two script calls per cycle ($batches)");
cmp_ok($batches, '<=', 2 * ($cycles + 1), 'no more');
cmp_ok(delta($s0, $s1, 'renewal_time'), '>', 0, 'renewal time is counted');
is(delta($s0, $s1, 'renewal_failures'), 0, 'no renewal failed');

# a lock deleted behind the holder's back is found lost by the watchdog
$s0 = stats();
$redis->cli('DEL', 'st_wd_7');
ok( RlockTest::wait_until(
		sub { q1($obs, "SELECT state FROM rlock_locks WHERE name = 'st_wd_7'") eq 'lost' }, 10),
	'the watchdog marks the deleted lock lost');
$s1 = stats();
is(delta($s0, $s1, 'locks_lost'), 1, 'one lock lost');
($out, $err) = RlockTest::query_err($a, "SELECT rlock_release('st_wd_7')");
like($err, qr/was lost/, 'the holder is told');
is(delta($s1, stats(), 'locks_lost'), 0, 'which does not count it twice');

# ---- Redis down: renewal failures and errors; back: reconnects ----

$s0 = stats();
$redis->stop;
ok( RlockTest::wait_until(sub { delta($s0, stats(), 'renewal_failures') >= 2 }, 10),
	'renewals that cannot reach Redis are counted as renewal failures');
($out, $err) = RlockTest::query_err($b, "SELECT rlock_try_acquire('st_down', '1 minute')");
like($err, qr/ERROR:  (could not connect to|lost connection to) Redis/, 'a session call fails');
$s1 = stats();
cmp_ok(delta($s0, $s1, 'redis_errors'), '>=', 1 + delta($s0, $s1, 'renewal_failures'),
	'Redis errors count the session\'s failure and the watchdog\'s');
is(delta($s0, $s1, 'failed_acquisitions'), 0, 'a Redis error is not a failed acquisition');

$redis->start;
$s0 = stats();
is(q1($a, "SELECT rlock_try_acquire('st_back', '1 minute')"), 't',
	'the next call after Redis is back works');
$s1 = stats();
cmp_ok(delta($s0, $s1, 'reconnects'), '>=', 1, 'it reconnected, and that is counted');
# (the locks held before the restart are gone; take one to renew)
q1($b, "SELECT rlock_acquire('st_back_wd')");
ok( RlockTest::wait_until(
		sub { delta($s0, stats(), 'renewals') >= 1 }, 10),
	'the watchdog renews again');
cmp_ok(delta($s0, stats(), 'reconnects'), '>=', 2, 'after its own reconnect');

$a->quit;
$b->quit;
$obs->quit;
$node->stop;
$redis->stop;
done_testing();
