
# Copyright (c) 2026, rlock developers
#
# Deadlocks through other kinds of wait (SPEC.md section 5.6), on two
# PostgreSQL servers, "alpha" and "beta", sharing one Redis;
# deadlock_timeout and rlock.deadlock_timeout are 1 s:
#   1. a read/write lock: a writer waits for a reader, whose session waits
#      for a lock the writer holds;
#   2. a fair lock: a fair lock's waiter holds what its holder waits for;
#   3. a mixed cycle on one server: A holds rlock lock "dlm" and waits for a
#      row B has locked (SELECT ... FOR UPDATE), B waits for "dlm": B, the
#      only rlock waiter, fails, its DETAIL names the PostgreSQL wait
#      ("ShareLock on transaction N", N being B's), and A's row wait then
#      proceeds;
#   4. a semaphore knot (an OR wait): both permits are held by sessions
#      that wait for a lock the semaphore's waiter holds: a deadlock;
#   5. the same with one permit held by a session that waits for nothing
#      (it may release): no deadlock, no session fails for 3 x
#      deadlock_timeout, though the other server's rlock_waits shows the
#      semaphore's wait blocked by both holders; once the free one
#      commits, every wait ends.
# Cases 1 to 4 check as 065_deadlock_cycles.pl does (RlockTest::Deadlock's
# cycle): exactly one session fails, with 40P01, a DETAIL line per edge and
# within deadlock_timeout + 3 s; the others then acquire.  Without
# deadlock detection no session errors and each of those cases meets its
# wait bound (RLOCK_TEST_DEADLOCK_OFF=1 shows it).
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

# ---- 1. read/write lock ----

RlockTest::Deadlock::cycle(
	'read/write',
	hold => [
		[ $a1, "SELECT rlock_read_xact_acquire('dlrw')" ],
		[ $b1, "SELECT rlock_xact_acquire('dlz')" ],
	],
	waits => [
		[ $b1, "SELECT rlock_write_xact_acquire('dlrw')" ],
		[ $a1, "SELECT rlock_xact_acquire('dlz')" ],
	],
	lines => [
		[ $a1, 'rlock lock "dlz"', $b1 ],
		[ $b1, 'rlock write lock "dlrw"', $a1 ],
	]);

# ---- 2. fair lock ----

RlockTest::Deadlock::cycle(
	'fair',
	hold => [
		[ $a1, "SELECT rlock_fair_xact_acquire('dlf')" ],
		[ $b1, "SELECT rlock_xact_acquire('dlg')" ],
	],
	waits => [
		[ $b1, "SELECT rlock_fair_xact_acquire('dlf')" ],
		[ $a1, "SELECT rlock_xact_acquire('dlg')" ],
	],
	lines => [
		[ $a1, 'rlock lock "dlg"', $b1 ],
		[ $b1, 'rlock fair lock "dlf"', $a1 ],
	]);

# ---- 3. an rlock wait and a row lock wait, on one server ----

RlockTest::Deadlock::cycle(
	'mixed rlock and row lock',
	hold => [
		[ $a1, "SELECT rlock_xact_acquire('dlm')" ],
		[ $a2, 'SELECT id FROM dl_rows WHERE id = 1 FOR UPDATE' ],
		[ $a2, 'SELECT pg_current_xact_id()' ],
	],
	waits => [
		[ $a1, 'SELECT id FROM dl_rows WHERE id = 1 FOR UPDATE' ],
		[ $a2, "SELECT rlock_xact_acquire('dlm')" ],
	],
	lines => sub {
		my $xid = $_[2];
		return [
			[ $a2, 'rlock lock "dlm"', $a1 ],
			[ $a1, "ShareLock on transaction $xid", $a2 ],
		];
	});

# ---- 4. a semaphore whose every permit holder is in the knot ----

$alpha->safe_psql('postgres',
	"SELECT rlock_semaphore_set_permits('dls', 2), "
	  . "rlock_semaphore_set_permits('dls2', 2)");

RlockTest::Deadlock::cycle(
	'semaphore knot',
	hold => [
		[ $a1, "SELECT rlock_semaphore_xact_acquire('dls')" ],
		[ $b1, "SELECT rlock_semaphore_xact_acquire('dls')" ],
		[ $a2, "SELECT rlock_xact_acquire('dlu')" ],
	],
	waits => [
		[ $a1, "SELECT rlock_xact_acquire('dlu')" ],
		[ $b1, "SELECT rlock_xact_acquire('dlu')" ],
		[ $a2, "SELECT rlock_semaphore_xact_acquire('dls')" ],
	],
	# the way back to the victim goes through either permit holder
	lines => [
		[
			[ $a2, 'rlock semaphore "dls"', $a1 ],
			[ $a1, 'rlock lock "dlu"', $a2 ],
		],
		[
			[ $a2, 'rlock semaphore "dls"', $b1 ],
			[ $b1, 'rlock lock "dlu"', $a2 ],
		],
	]);

# ---- 5. one permit holder is free: no deadlock ----

RlockTest::Deadlock::cycle(
	'semaphore with a free permit holder',
	hold => [
		[ $a1, "SELECT rlock_semaphore_xact_acquire('dls2')" ],
		[ $b1, "SELECT rlock_semaphore_xact_acquire('dls2')" ],
		[ $a2, "SELECT rlock_xact_acquire('dlu2')" ],
	],
	waits => [
		[ $a1, "SELECT rlock_xact_acquire('dlu2')" ],
		[ $a2, "SELECT rlock_semaphore_xact_acquire('dls2')" ],
	],
	no_deadlock => 1,
	# the semaphore's wait is seen, from the other server, blocked by
	# both permit holders: it was in the graph, just not in a knot
	during => sub {
		is( $beta->safe_psql('postgres',
				"SELECT kind, (SELECT array_agg(p ORDER BY p) FROM unnest(blocking_pids) p) "
				  . "FROM rlock_waits WHERE server = 'alpha' AND pid = $a2->{dl_pid}"),
			'semaphore|{' . join(',', sort { $a <=> $b } $a1->{dl_pid}, $b1->{dl_pid}) . '}',
			'semaphore with a free permit holder: rlock_waits on beta shows the wait '
			  . 'blocked by both permit holders');
	},
	free => [$b1]);

is($redis->cli('EXISTS', 'dlrw', 'dlz', 'dlf', 'dlg', 'dlm', 'dlu', 'dlu2'),
	'0', 'every lock is free at the end');
is( $alpha->safe_psql('postgres',
		"SELECT rlock_semaphore_available('dls') || ',' || rlock_semaphore_available('dls2')"),
	'2,2',
	'every permit is back at the end');

$_->quit foreach ($a1, $a2, $b1);
done_testing();
