# Copyright (c) 2026, rlock developers
#
# A loss the caller can act on (SPEC 6): rlock.cancel_on_lost's cancel
# names the lost lock and the cause, in the client's error and the server
# log, instead of PostgreSQL's "canceling statement due to user request";
# a later cancel by hand keeps PostgreSQL's words (no stale note).  And
# rlock_assert_held: silent while the lock is held, an ERROR with SQLSTATE
# 40000 naming the lock once Redis no longer has it (asked in a round
# trip, whatever the watchdog knows), when the session never held it, and
# a transaction-level loss it found still refuses the COMMIT when the
# ERROR was caught.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use RlockTest;

my $redis = RlockTest::Redis->new;
my $node = RlockTest::new_node('cm', $redis,
	extra_conf => "rlock.cancel_on_lost = on\n");

sub q1
{
	my ($s, $sql) = @_;
	my ($out, $err) = RlockTest::query_err($s, $sql);
	return $out;
}

my $a = $node->background_psql('postgres', on_error_stop => 0);
my $a_pid = q1($a, 'SELECT pg_backend_pid()');

# ---- cancel_on_lost: a fixed lease that runs out mid-statement ----

# (taken in the statement that then sleeps: a cancel that reaches an idle
# session is dropped, however slow the machine)
my $log_offset = -s $node->logfile;
$a->{stderr} = '';
$a->query_until(qr/sleeping\n/,
	"\\echo sleeping\nSELECT rlock_acquire('cm fixed', '1500ms'), pg_sleep(120);\n");
my $t0 = time();
ok( RlockTest::wait_until(sub {
		$a->{run}->pump_nb;
		return $a->{stderr} =~ /ERROR:  canceling statement: rlock lock "cm fixed" was lost \(lease expired\)/;
	}, 60),
	sprintf('the cancelled statement\'s error names the lock and the cause (%.1f s after the acquisition)',
		time() - $t0))
  or diag("stderr: $a->{stderr}");
like($a->{stderr}, qr/DETAIL:  Its fixed lease ran out while the statement ran/,
	'with a DETAIL saying why');
unlike($a->{stderr}, qr/due to user request/,
	'and not PostgreSQL\'s words for a cancel by hand');
ok( RlockTest::wait_until(sub {
		slurp_file($node->logfile, $log_offset) =~
		  /\[$a_pid\] [^\n]*ERROR:  canceling statement: rlock lock "cm fixed" was lost \(lease expired\)/;
	}, 30),
	'the server log has the same words');

# ---- cancel_on_lost: a watchdog lock deleted from Redis ----

# wait until pid runs its pg_sleep (a cancel reaching an idle session is
# dropped)
sub sleeping
{
	my ($pid) = @_;
	ok( RlockTest::wait_until(sub {
			$node->safe_psql('postgres',
				"SELECT count(*) FROM pg_stat_activity WHERE pid = $pid "
				  . "AND state = 'active' AND query LIKE '%pg_sleep%'") eq '1' }, 60),
		'the session runs its long statement');
}

is(q1($a, "SELECT rlock_acquire('cm_gone')"), '',
	'a lock renewed by the watchdog');
$a->{stderr} = '';
$a->query_until(qr/sleeping\n/, "\\echo sleeping\nSELECT pg_sleep(120);\n");
sleeping($a_pid);
$redis->cli('DEL', 'cm_gone');
ok( RlockTest::wait_until(sub {
		$a->{run}->pump_nb;
		return $a->{stderr} =~ /ERROR:  canceling statement: rlock lock "cm_gone" was lost \(gone from Redis\)/;
	}, 60),
	'a lock deleted from Redis: the error says it is gone from Redis')
  or diag("stderr: $a->{stderr}");

# ---- a cancel by hand afterwards keeps PostgreSQL's message ----

$a->{stderr} = '';
$a->query_until(qr/sleeping\n/, "\\echo sleeping\nSELECT pg_sleep(120);\n");
sleeping($a_pid);
$node->safe_psql('postgres', "SELECT pg_cancel_backend($a_pid)");
ok( RlockTest::wait_until(sub {
		$a->{run}->pump_nb;
		return $a->{stderr} =~ /ERROR:  canceling statement due to user request/;
	}, 60),
	'a later pg_cancel_backend: "canceling statement due to user request"')
  or diag("stderr: $a->{stderr}");
unlike($a->{stderr}, qr/rlock/, 'naming no lock');

# ---- rlock_assert_held ----

# a caught ERROR, as "SQLSTATE: message"
sub assert_outcome
{
	my ($s, $name) = @_;
	my ($out, $err) = RlockTest::query_err($s, qq{
		DO \$\$ BEGIN PERFORM rlock_assert_held('$name');
		  RAISE NOTICE 'held';
		EXCEPTION WHEN OTHERS THEN RAISE NOTICE '%: %', SQLSTATE, SQLERRM;
		END \$\$});
	return $err =~ /NOTICE:  (.*)/ ? $1 : "no notice: $err";
}

my $b = $node->background_psql('postgres', on_error_stop => 0);
q1($b, "SELECT rlock_acquire('cm_a')");
q1($b, "SELECT rlock_acquire('cm_a', '10min')");
is(assert_outcome($b, 'cm_a'), 'held', 'a lock the session holds: no ERROR');
my ($out, $err) = RlockTest::query_err($b, "SELECT rlock_assert_held('cm_a')");
is($err, '', 'nor a WARNING');

# Redis loses it; the session asks before the watchdog's next check can
# tell it (or after: either way the answer is the same)
$redis->cli('DEL', 'cm_a');
is(assert_outcome($b, 'cm_a'),
	'40000: rlock lock "cm_a" held by this session was lost',
	'deleted from Redis: ERROR 40000 naming the lock');
is(q1($b, "SELECT rlock_hold_count('cm_a')"), '0',
	'and the session no longer counts it held');
is(assert_outcome($b, 'cm_a'),
	'40000: rlock lock "cm_a" is not held by this session',
	'asked again: not held (same SQLSTATE)');
is(assert_outcome($b, 'cm_never'),
	'40000: rlock lock "cm_never" is not held by this session',
	'a name never taken: the same ERROR');

# other kinds: a read hold and semaphore permits are held too
q1($b, "SELECT rlock_read_acquire('cm_rw')");
is(assert_outcome($b, 'cm_rw'), 'held', 'a read lock held: no ERROR');
q1($b, "SELECT rlock_read_release('cm_rw')");
q1($b, "SELECT rlock_semaphore_set_permits('cm_sem', 2)");
q1($b, "SELECT rlock_semaphore_acquire('cm_sem')");
is(assert_outcome($b, 'cm_sem'), 'held', 'semaphore permits held: no ERROR');
$redis->cli('DEL', '{cm_sem}:timeout');
like(assert_outcome($b, 'cm_sem'),
	qr/^40000: permits of rlock semaphore "cm_sem" held by this session were lost$/,
	'permits taken away: ERROR naming the semaphore');

# a transaction-level lock: the loss the caught ERROR found refuses COMMIT
q1($b, 'CREATE TABLE cm_guarded (v int)');
q1($b, 'BEGIN');
q1($b, "SELECT rlock_xact_acquire('cm_x')");
q1($b, 'INSERT INTO cm_guarded VALUES (1)');
$redis->cli('DEL', 'cm_x');
is(assert_outcome($b, 'cm_x'),
	'40000: rlock lock "cm_x" held by this session was lost',
	'a transaction-level lock lost: ERROR (caught in a DO block)');
($out, $err) = RlockTest::query_err($b, 'COMMIT');
like($err, qr/ERROR:  cannot commit: lock "cm_x" held by this transaction was lost/,
	'the COMMIT is refused all the same');
is(q1($b, 'SELECT count(*) FROM cm_guarded'), '0',
	'and the guarded write did not commit');

$a->quit;
$b->quit;
$node->stop;
$redis->stop;
done_testing();
