
# Copyright (c) 2026, rlock developers
#
# Which of this server's sessions waiting for a semaphore's permits get
# them (SPEC.md 5.5): they are served in the order they started waiting,
# and permits that come back go to as many of them as there are permits,
# the others still waiting.  A fourth session holds all three permits of a
# semaphore; three sessions wait for one permit each; the holder gives
# them back one, then two, at a time (its release publishes them).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use RlockTest;

my $redis = RlockTest::Redis->new;
my $node = RlockTest::new_node('wakeup', $redis);

# the answer of one statement in a background session
sub q1
{
	my ($s, $sql) = @_;
	my ($out, $err) = RlockTest::query_err($s, $sql);
	return $out;
}

my @w = map { $node->background_psql('postgres', on_error_stop => 0) } 1 .. 3;
my @pid = map { (RlockTest::query_err($_, 'SELECT pg_backend_pid()'))[0] } @w;
my $h = $node->background_psql('postgres', on_error_stop => 0);
my $hpid = (RlockTest::query_err($h, 'SELECT pg_backend_pid()'))[0];

is($node->safe_psql('postgres', "SELECT rlock_semaphore_set_permits('jobs', 3)"),
	't', 'a semaphore of three permits');
is(q1($h, "SELECT rlock_semaphore_try_acquire('jobs', 3, '10 minutes')"),
	't', 'one session holds all three');

sub waiting
{
	my ($pid) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE pid = $pid AND wait_event_type = 'Extension'"
	) eq '1';
}

# the three start waiting one after the other
for my $i (0 .. 2)
{
	RlockTest::start_bg($w[$i],
		"SET lock_timeout = '120s'; SELECT rlock_semaphore_acquire('jobs', 1, '10 minutes')");
	ok(RlockTest::wait_until(sub { waiting($pid[$i]) }, 60),
		"waiter " . ($i + 1) . " waits");
}

sub holders
{
	return $node->safe_psql('postgres',
		"SELECT string_agg(pid::text, ',' ORDER BY pid) FROM rlock_locks WHERE name = 'jobs' AND pid <> $hpid");
}

# one permit comes back: the first waiter has it, the other two wait on
is(q1($h, "SELECT rlock_semaphore_release('jobs', 1)"), 't',
	'the holder gives one back');
ok(RlockTest::wait_until(sub { RlockTest::bg_done($w[0]) }, 60),
	'one permit back: the first waiter is served');
my (undef, $err, $st) = RlockTest::bg_result($w[0]);
is($st, '00000', 'it has the permit') or diag($err);
is(holders(), $pid[0], 'rlock_locks: the first waiter holds a permit, no other waiter');
ok(waiting($pid[1]) && waiting($pid[2]), 'the second and third still wait');
ok(!RlockTest::bg_done($w[1]) && !RlockTest::bg_done($w[2]),
	'neither of them returned');

# two permits come back at once: the two left are served, no more
is(q1($h, "SELECT rlock_semaphore_release('jobs', 2)"), 't',
	'the holder gives its last two back');
ok(RlockTest::wait_until(sub { RlockTest::bg_done($w[1]) && RlockTest::bg_done($w[2]) }, 60),
	'two permits back: both remaining waiters are served');
for my $i (1, 2)
{
	(undef, $err, $st) = RlockTest::bg_result($w[$i]);
	is($st, '00000', 'waiter ' . ($i + 1) . ' has a permit') or diag($err);
}
is(holders(), join(',', sort { $a <=> $b } @pid), 'three holders, one permit each');
is($node->safe_psql('postgres', "SELECT rlock_semaphore_available('jobs')"), '0',
	'none left');

# in arrival order again, with the first waiter asking for two: it cannot
# be served by one permit, and lets the next (asking for one) have it
for my $i (0 .. 2)
{
	is(q1($w[$i], "SELECT rlock_semaphore_release('jobs')"), 't',
		'waiter ' . ($i + 1) . ' gives its permit back');
}
is(q1($h, "SELECT rlock_semaphore_try_acquire('jobs', 3, '10 minutes')"),
	't', 'the holder takes all three again');
RlockTest::start_bg($w[0],
	"SET lock_timeout = '120s'; SELECT rlock_semaphore_acquire('jobs', 2, '10 minutes')");
ok(RlockTest::wait_until(sub { waiting($pid[0]) }, 60), 'a waiter for two permits');
RlockTest::start_bg($w[1],
	"SET lock_timeout = '120s'; SELECT rlock_semaphore_acquire('jobs', 1, '10 minutes')");
ok(RlockTest::wait_until(sub { waiting($pid[1]) }, 60), 'behind it, a waiter for one');
is(q1($h, "SELECT rlock_semaphore_release('jobs', 1)"), 't',
	'the holder gives one back');
ok(RlockTest::wait_until(sub { RlockTest::bg_done($w[1]) }, 60),
	'the waiter for one has it');
ok(waiting($pid[0]), 'the waiter for two still waits');
is(q1($h, "SELECT rlock_semaphore_release('jobs', 2)"), 't',
	'the holder gives its last two back');
ok(RlockTest::wait_until(sub { RlockTest::bg_done($w[0]) }, 60),
	'the waiter for two has them');
(undef, $err, $st) = RlockTest::bg_result($w[0]);
is($st, '00000', 'both permits') or diag($err);
is($node->safe_psql('postgres',
		"SELECT hold_count FROM rlock_locks WHERE name = 'jobs' AND pid = $pid[0]"),
	'2', 'rlock_locks: two permits held by it');

# the watchdog renews permits of NULL lease in its one batched round trip
# a cycle, with the locks, however many permits: 40 semaphores (two
# permits each) and 40 locks, one script call per cycle
is(q1($h, "SELECT count(*) FILTER (WHERE rlock_semaphore_set_permits('many' || i, 2)) FROM generate_series(1, 40) i"),
	'40', '40 more semaphores');
is(q1($h, "SELECT count(*) FILTER (WHERE rlock_semaphore_try_acquire('many' || i, 2)) FROM generate_series(1, 40) i"),
	'40', 'the holder takes both permits of each, NULL lease');
is(q1($h, "SELECT count(rlock_acquire('lk' || i)) FROM generate_series(1, 40) i"),
	'40', 'and 40 locks, NULL lease');
my $log_offset = -s $node->logfile;
sub cycles
{
	return slurp_file($node->logfile, $log_offset) =~
	  /rlock watchdog: renewed (\d+) of (\d+) locks in [\d.]+ ms \((\d+) script calls/g;
}
ok(RlockTest::wait_until(sub { my @c = cycles(); grep({ $_ >= 80 } @c[ map { 3 * $_ + 1 } 0 .. $#c / 3 ]) >= 3 }, 60),
	'the watchdog ran three cycles over the 80 names');
my @c = cycles();
my @calls = map { $c[ 3 * $_ + 2 ] } grep { $c[ 3 * $_ + 1 ] >= 80 } 0 .. $#c / 3;
my @renewed = map { $c[ 3 * $_ ] } grep { $c[ 3 * $_ + 1 ] >= 80 } 0 .. $#c / 3;
is(scalar(grep { $_ != 1 } @calls), 0,
	'each of those cycles was one script call: ' . join(', ', @calls));
is(scalar(grep { $_ != 80 } @renewed), 0,
	'and renewed all 80: ' . join(', ', @renewed));
is(q1($h, "SELECT count(*) FROM rlock_locks WHERE pid = pg_backend_pid() AND state = 'held' AND renewed_at > acquired_at"),
	'80', 'rlock_locks: every one of them renewed, none lost');

$_->quit foreach @w, $h;
$node->stop;
done_testing();
