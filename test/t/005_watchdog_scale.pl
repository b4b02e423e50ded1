# Copyright (c) 2026, rlock developers
#
# The watchdog at scale and under Redis restarts: 10 000 locks renewed in a
# handful of script calls per cycle; a Redis restart shorter than the lease
# is ridden out; a full registry refuses new locks with a clear ERROR.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use RlockTest;

my $redis = RlockTest::Redis->new;

sub q1
{
	my ($s, $sql) = @_;
	my ($out, $err) = RlockTest::query_err($s, $sql);
	return $out;
}

sub script_calls
{
	my $info = $redis->cli('INFO', 'commandstats');
	my $calls = 0;
	$calls += $1 while $info =~ /cmdstat_eval(?:sha)?:calls=(\d+)/g;
	return $calls;
}

# ---- 10 000 locks ----

my $node = RlockTest::new_node('scale', $redis, watchdog_timeout => '3s',
	extra_conf => "rlock.max_locks = 20000\n");
my $s = $node->background_psql('postgres', on_error_stop => 0);
my $t0 = time();
is(q1($s, "SELECT count(rlock_acquire('bulk:' || i)) FROM generate_series(1, 10000) i"),
	'10000', 'one session takes 10 000 locks without a lease');
note sprintf('took them in %.2f s', time() - $t0);
is(q1($s, 'SELECT count(*) FROM rlock_locks'), '10000', 'rlock_locks shows them all');

my $log_offset = -s $node->logfile;
$redis->cli('CONFIG', 'RESETSTAT');

# The renewal cycles the watchdog has logged since $log_offset, as
# (renewed, of, ms, script calls) quadruples.
sub logged_cycles
{
	return slurp_file($node->logfile, $log_offset) =~
	  /rlock watchdog: renewed (\d+) of (\d+) locks in ([\d.]+) ms \((\d+) script calls/g;
}

sleep(7);    # more than 2 x watchdog_timeout
# a cycle is due every second; on a loaded machine they may come later
ok(RlockTest::wait_until(sub { my @c = logged_cycles(); @c >= 5 * 4 }, 30),
	'the watchdog ran 5 renewal cycles');
# read Redis's count first: every script call it counted belongs to a cycle
# that has begun by now (and is logged once it ends)
my $calls = script_calls();
my @cycles = logged_cycles();
my $ncycles = @cycles / 4;
note "the watchdog logged $ncycles renewal cycles";
my (@ms, @per_cycle);
for (my $i = 0; $i < @cycles; $i += 4)
{
	next unless $cycles[ $i + 1 ] == 10000;
	push @ms, $cycles[ $i + 2 ];
	push @per_cycle, $cycles[ $i + 3 ];
}
is(scalar(grep { $_ > 10 } @per_cycle), 0,
	'the worker reports at most 10 script calls (one round trip) for each cycle of 10 000 locks: '
	  . join(', ', @per_cycle));
diag(sprintf('renewal of 10000 locks: %d cycles, %d script calls in all (%.1f per cycle), cycle time %s ms',
		$ncycles, $calls, $calls / ($ncycles || 1), join(', ', @ms)));
# cross-check with Redis's own count (a cycle may straddle each end)
cmp_ok($calls, '<=', ($ncycles + 2) * 10,
	'Redis counted no more script calls than that (batched, not one per lock)');
is(q1($s, "SELECT count(*) FROM generate_series(1, 10000) i WHERE rlock_hold_count('bulk:' || i) = 1"),
	'10000', 'all 10 000 are still held after more than twice their lease');
is(q1($s, 'SELECT rlock_release_all()'), '10000', 'rlock_release_all releases them');
is(q1($s, 'SELECT count(*) FROM rlock_locks'), '0', 'the registry is empty again');
$s->quit;
$node->stop;

# ---- a Redis restart shorter than the lease ----

my $node2 = RlockTest::new_node('restart', $redis, watchdog_timeout => '10s',
	extra_conf => "rlock.max_locks = 16\n");
$s = $node2->background_psql('postgres', on_error_stop => 0);
q1($s, "SELECT rlock_acquire('survivor')");
my $holder = q1($s, 'SELECT rlock_holder_id()');
sleep(1);
my $failures = $node2->safe_psql('postgres', 'SELECT renewal_failures FROM rlock_stats');
$redis->stop_save;    # keys and their expiry survive in dump.rdb
# Redis stays down until a renewal has failed (within a renewal period,
# 3.3 s), no longer: the lock's TTL, 6.7 to 10 s when Redis stopped, must
# outlast the outage and the watchdog's retry (at most 1 s later), and the
# outage must end before the fail-closed rule gives the lock up (a fifth of
# the lease before it may expire).
ok( RlockTest::wait_until(sub {
		$node2->safe_psql('postgres', 'SELECT renewal_failures FROM rlock_stats') > $failures },
		15),
	'a renewal fails while Redis is down');
$redis->start;
sleep(12);            # the lease is 10 s: only renewals can keep the lock
is($redis->cli('HGET', 'survivor', $holder), '1',
	'after Redis was down longer than a renewal period, the lock is still held');
is(q1($s, "SELECT state FROM rlock_locks WHERE name = 'survivor'"), 'held',
	'and rlock_locks says held');
like(slurp_file($node2->logfile), qr/rlock watchdog: Redis answers again, renewals resumed/,
	'the watchdog logged that renewals resumed');
is(q1($s, "SELECT rlock_release('survivor')"), 't', 'the session releases it normally');

# ---- a full registry ----

my ($out, $err) = RlockTest::query_err($s,
	"SELECT count(rlock_acquire('full:' || i, '1 minute')) FROM generate_series(1, 17) i");
like($err, qr/ERROR:  out of shared memory/, 'the 17th lock with rlock.max_locks = 16 fails');
like($err, qr/HINT:  You might need to increase rlock\.max_locks\./, 'the hint names rlock.max_locks');
is(q1($s, "SELECT count(*) FROM rlock_locks"), '16', 'the 16 taken are still registered');
is($redis->cli('EXISTS', 'full:17'), '0', 'the refused one was given back to Redis');
is(q1($s, 'SELECT rlock_release_all()'), '16', 'and all 16 release');
$s->quit;

done_testing();
