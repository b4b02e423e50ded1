# Copyright (c) 2026, rlock developers
#
# No role can deny service to the others (SPEC 8; issue 40, finding 6).  A
# session of a role that is not a superuser holds at most
# rlock.max_locks_per_session locks, rlock.max_permits_per_session
# semaphore permits, rlock.max_read_holds_per_lock read holds of one lock
# (re-entries included) and rlock.max_owner_holds_per_session holds for owner
# tokens (each with a lease of at most rlock.max_owner_lease; a read lock
# takes at most rlock.max_owner_holds_per_lock of those, whichever sessions
# took them): past a cap an
# acquisition fails with 53400 before its round trip, and nothing is left in
# Redis or the registry.  rlock.superuser_reserved_locks entries of the
# registry are kept for superusers, so that plain roles filling it do not
# lock superusers out.  rlock_force_release of a read/write lock deletes its
# read holds' timeout keys too.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use RlockTest;

my $redis = RlockTest::Redis->new;
my $node = RlockTest::new_node('quotas', $redis,
	extra_conf => "rlock.max_locks = 40\n"
	  . "rlock.superuser_reserved_locks = 4\n"
	  . "rlock.max_locks_per_session = 10\n"
	  . "rlock.max_permits_per_session = 20\n"
	  . "rlock.max_read_holds_per_lock = 6\n"
	  . "rlock.max_owner_holds_per_session = 5\n"
	  . "rlock.max_owner_holds_per_lock = 7\n"
	  . "rlock.max_owner_lease = '1h'\n");
$node->safe_psql('postgres', 'CREATE ROLE plain LOGIN');

sub plain_session
{
	return $node->background_psql('postgres', on_error_stop => 0,
		extra_params => [ '-U', 'plain' ]);
}

sub registry_count
{
	my ($session) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM rlock_locks WHERE pid = $session->{pid}");
}

# Keys of Redis matching a pattern, sorted, joined by commas.
sub keys_like
{
	my ($pattern) = @_;
	return join(',', sort grep { $_ ne '' } split /\n/,
		($redis->cli('KEYS', $pattern) // ''));
}

my $a = plain_session();
($a->{pid}) = RlockTest::run_sql($a, 'SELECT pg_backend_pid()');

# --- held locks ----------------------------------------------------------

my ($out, $err, $state) = RlockTest::run_sql($a,
	"SELECT count(rlock_acquire('q_name' || i)) FROM generate_series(1, 10) i");
is($state, '00000', 'a plain role takes 10 locks (rlock.max_locks_per_session)')
  or diag($err);
($out, $err, $state) = RlockTest::run_sql($a, "SELECT rlock_acquire('q_name11')");
is($state, '53400', 'an 11th lock is refused with 53400');
like($err, qr/too many locks held by this session to take lock "q_name11"/,
	'the error names the lock');
like($err, qr/rlock\.max_locks_per_session allows 10/, 'and the setting');
like($err, qr/HINT:.*raise rlock\.max_locks_per_session/, 'with a HINT');
is($redis->cli('EXISTS', 'q_name11'), '0', 'nothing of it is in Redis');
is(registry_count($a), '10', 'nor in the registry');

($out, $err, $state) = RlockTest::run_sql($a,
	"SELECT rlock_multi_acquire(ARRAY['q_m1', 'q_m2'])");
is($state, '53400', 'a set of new names past the cap is refused');
is($redis->cli('EXISTS', 'q_m1') . $redis->cli('EXISTS', 'q_m2'), '00',
	'and nothing of it taken in Redis');
($out, $err, $state) = RlockTest::run_sql($a,
	"SELECT rlock_read_acquire('q_rw_cap')");
is($state, '53400', 'a read lock counts too');
($out, $err, $state) = RlockTest::run_sql($a, "SELECT rlock_acquire('q_name1')");
is($state, '00000', 'a lock held already is taken again (no new name)')
  or diag($err);
is($redis->cli('HGET', 'q_name1', RlockTest::holder_of($a)), '2',
	're-entered in Redis');

($out, $err, $state) = RlockTest::run_sql($a, 'SELECT rlock_release_all()');
is($state, '00000', 'the plain role lets its locks go');

# --- semaphore permits ---------------------------------------------------

$node->safe_psql('postgres', "SELECT rlock_semaphore_set_permits('q_sem', 100)");
($out, $err, $state) = RlockTest::run_sql($a,
	"SELECT rlock_semaphore_acquire('q_sem', 15)");
is($state, '00000', 'a plain role takes 15 permits') or diag($err);
($out, $err, $state) = RlockTest::run_sql($a,
	"SELECT rlock_semaphore_acquire('q_sem', 6)");
is($state, '53400', 'six more (21 > rlock.max_permits_per_session) are refused');
like($err, qr/too many semaphore permits held by this session to take 6 of semaphore "q_sem"/,
	'the error names the semaphore');
like($err, qr/This session holds 15 permits, and rlock\.max_permits_per_session allows 20/,
	'and the setting');
is($redis->cli('ZCARD', '{q_sem}:timeout'), '15', 'no permit of them is out in Redis');
is($redis->cli('GET', 'q_sem'), '85', 'the permits available are unchanged');
is( $node->safe_psql('postgres',
		"SELECT hold_count FROM rlock_locks WHERE pid = $a->{pid} AND name = 'q_sem'"),
	'15', 'the registry counts 15');
($out, $err, $state) = RlockTest::run_sql($a,
	"SELECT rlock_semaphore_acquire('q_sem', 5)");
is($state, '00000', 'five more (20) are taken') or diag($err);
$node->safe_psql('postgres', "SELECT rlock_semaphore_set_permits('q_sem2', 10)");
($out, $err, $state) = RlockTest::run_sql($a,
	"SELECT rlock_semaphore_try_acquire('q_sem2', 1)");
is($state, '53400', 'the cap counts the permits of all semaphores together');
is($redis->cli('EXISTS', '{q_sem2}:timeout'), '0', 'nothing taken of the other');
RlockTest::run_sql($a, 'SELECT rlock_release_all()');

# --- read holds, re-entries included ---------------------------------------

($out, $err, $state) = RlockTest::run_sql($a,
	"SELECT count(rlock_read_acquire('q_re')) FROM generate_series(1, 6)");
is($state, '00000', 'a plain role takes a read lock 6 times (rlock.max_read_holds_per_lock)') or diag($err);
($out, $err, $state) = RlockTest::run_sql($a, "SELECT rlock_read_acquire('q_re')");
is($state, '53400', 'a 7th read hold of the same lock is refused');
like($err, qr/too many read holds of read lock "q_re" held by this session/,
	'the error names the lock');
like($err, qr/rlock\.max_read_holds_per_lock allows 6/, 'and the setting');
($out, $err, $state) = RlockTest::run_sql($a, "SELECT rlock_read_acquire('q_re2')");
is($state, '00000', 'another read lock is still taken: the cap is per lock') or diag($err);
is($redis->cli('HGET', 'q_re', RlockTest::holder_of($a)), '6',
	'Redis counts 6 read holds');
is(scalar(my @re = split /,/, keys_like('{q_re}:*rwlock_timeout*')), 6,
	'with 6 timeout keys, no more');
RlockTest::run_sql($a, 'SELECT rlock_release_all()');

# --- holds for owner tokens ----------------------------------------------

($out, $err, $state) = RlockTest::run_sql($a,
	"SELECT count(rlock_read_acquire('q_own', '10 min', owner => 'sekrit_t')) FROM generate_series(1, 5)");
is($state, '00000', 'a plain role takes 5 read holds for an owner token') or diag($err);
($out, $err, $state) = RlockTest::run_sql($a,
	"SELECT rlock_read_acquire('q_own', '10 min', owner => 'sekrit_t')");
is($state, '53400', 'a sixth is refused');
like($err, qr/too many holds for owner tokens taken by this session to take read lock "q_own"/,
	'the error names the lock');
like($err, qr/rlock\.max_owner_holds_per_session allows 5/, 'and the setting');
unlike($err, qr/sekrit/, 'but not the token');
($out, $err, $state) = RlockTest::run_sql($a,
	"SELECT rlock_try_acquire('q_own_x', '10 min', owner => 'sekrit_t')");
is($state, '53400', 'an exclusive lock for an owner token counts too');
is($redis->cli('EXISTS', 'q_own_x'), '0', 'and is not taken in Redis');
my $timeouts = scalar(my @t = split /,/, keys_like('{q_own}:*rwlock_timeout*'));
is($timeouts, 5, 'Redis has the 5 read holds\' timeout keys, no more');
($out, $err, $state) = RlockTest::run_sql($a,
	"SELECT rlock_read_release('q_own', owner => 'sekrit_t')");
is("$out/$state", 't/00000', 'one is released with its token');
($out, $err, $state) = RlockTest::run_sql($a,
	"SELECT rlock_read_acquire('q_own', '10 min', owner => 'sekrit_t')");
is($state, '00000', 'then one more may be taken') or diag($err);
my $b = plain_session();
($out, $err, $state) = RlockTest::run_sql($b,
	"SELECT rlock_read_acquire('q_own', '10 min', owner => 'sekrit_u'), rlock_read_acquire('q_own', '10 min', owner => 'sekrit_t')");
is($state, '00000', 'another session takes 2 more for owner tokens (7 on the lock)')
  or diag($err);
($out, $err, $state) = RlockTest::run_sql($b,
	"SELECT rlock_read_acquire('q_own', '10 min', owner => 'sekrit_v')");
is($state, '53400', 'an 8th on the lock is refused, whichever session asks');
like($err, qr/read lock "q_own" has too many holds for owner tokens/, 'the error names the lock');
like($err, qr/It has 7 read holds for owner tokens, and rlock\.max_owner_holds_per_lock allows 7/,
	'and the setting');
is($redis->cli('HLEN', 'q_own'), '3', 'nothing of it is in Redis (mode and two tokens)');
$node->safe_psql('postgres',
	"SELECT rlock_read_acquire('q_own', '10 min', owner => 'sekrit_v')");
is($redis->cli('HLEN', 'q_own'), '4', 'a superuser is not bound by it');
($out, $err, $state) = RlockTest::run_sql($b,
	"SELECT rlock_read_acquire('q_own2', '2 hours', owner => 'sekrit_t')");
is($state, '53400', 'a lease longer than rlock.max_owner_lease is refused');
like($err, qr/longer than rlock\.max_owner_lease/, 'saying so');
is($redis->cli('EXISTS', 'q_own2'), '0', 'and nothing is taken');
($out, $err, $state) = RlockTest::run_sql($b,
	"SELECT rlock_read_acquire('q_own2', '1 hour', owner => 'sekrit_t')");
is($state, '00000', 'a lease of rlock.max_owner_lease is taken') or diag($err);
RlockTest::run_sql($b, "SELECT rlock_read_release('q_own2', owner => 'sekrit_t')");

# --- force release of a read/write lock ------------------------------------

$node->safe_psql('postgres', "SELECT rlock_force_release('q_own')");
is($redis->cli('EXISTS', 'q_own'), '0', 'force release deletes the read lock');
is(keys_like('{q_own}:*'), '', 'and the timeout keys of its read holds');

($out, $err, $state) = RlockTest::run_sql($a,
	"SELECT rlock_read_acquire('q_fr'), rlock_read_acquire('q_fr')");
is($state, '00000', 'a session takes a read lock twice') or diag($err);
$node->safe_psql('postgres',
	"SELECT rlock_read_acquire('q_fr', '10 min', owner => 'tok2') FROM generate_series(1, 3)");
$node->safe_psql('postgres', "SELECT rlock_force_release('q_fr')");
is(keys_like('{q_fr}*'), '', 'force release of a read lock held by a session and a token leaves no timeout key');
RlockTest::run_sql($a, 'SELECT rlock_release_all()');

# --- the superusers' reserve of the registry ------------------------------

my @plain = ($a, $b, map { plain_session() } 1 .. 3);
my $taken = 0;
for my $i (0 .. $#plain)
{
	for my $j (1 .. 9)
	{
		my (undef, undef, $st) = RlockTest::run_sql($plain[$i],
			"SELECT rlock_acquire('q_fill_${i}_$j')");
		$taken++ if $st eq '00000';
	}
}
is($taken, 36,
	'plain roles fill the registry up to rlock.max_locks less rlock.superuser_reserved_locks');
($out, $err, $state) = RlockTest::run_sql($plain[4], "SELECT rlock_acquire('q_fill_more')");
is($state, '53200', 'past that a plain role gets 53200');
like($err, qr/4 of them reserved for superusers/, 'saying the rest is reserved');
is($redis->cli('EXISTS', 'q_fill_more'), '0', 'and the lock is given back');
my $su = $node->background_psql('postgres', on_error_stop => 0);
($out, $err, $state) = RlockTest::run_sql($su,
	"SELECT count(rlock_acquire('q_su' || i)) FROM generate_series(1, 4) i");
is("$out/$state", '4/00000', 'a superuser still takes the 4 reserved locks') or diag($err);
($out, $err, $state) = RlockTest::run_sql($su, "SELECT rlock_acquire('q_su5')");
is($state, '53200', 'and no more: rlock.max_locks holds');

RlockTest::run_sql($_, 'SELECT rlock_release_all()') for (@plain, $su);
is($node->safe_psql('postgres', 'SELECT count(*) FROM rlock_locks'), '0',
	'the registry is empty again');
$_->quit for (@plain, $su);
$node->stop;
$redis->stop;
done_testing();
