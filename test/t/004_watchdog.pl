# Copyright (c) 2026, rlock developers
#
# The watchdog worker renews locks taken without a lease; the shared
# registry (rlock_locks) knows every held lock; a lost lock is loud: LOG
# line, WARNING to its session, COMMIT refused; a fixed-lease hold is
# renewed only while a NULL-lease hold of the same lock lasts; SIGKILL and
# worker restarts end cleanly.  watchdog_timeout is 2 s, so a renewal period is ~0.67 s.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use RlockTest;

my $redis = RlockTest::Redis->new;
my $node = RlockTest::new_node('wd', $redis,
	extra_conf => "restart_after_crash = on\n");

sub q1
{
	my ($s, $sql) = @_;
	my ($out, $err) = RlockTest::query_err($s, $sql);
	return $out;
}

sub q2
{
	my ($s, $sql) = @_;
	return RlockTest::query_err($s, $sql);
}

my $a = $node->background_psql('postgres', on_error_stop => 0);
my $b = $node->background_psql('postgres', on_error_stop => 0);
my $other = $node->background_psql('postgres', on_error_stop => 0);
my $a_pid = q1($a, 'SELECT pg_backend_pid()');
my $b_pid = q1($b, 'SELECT pg_backend_pid()');

# ---- the worker ----

is( $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'rlock watchdog'"),
	'1', 'the rlock watchdog worker runs and is visible in pg_stat_activity');

# ---- renewal: idle session, idle in transaction; fixed leases expire ----

q1($a, "SELECT rlock_acquire('wd_session')");
q1($b, 'BEGIN');
q1($b, "SELECT rlock_xact_acquire('wd_xact')");
q1($a, "SELECT rlock_acquire('wd_fixed', '1500ms')");

# rlock_locks shows both sessions' locks with the right columns
is( q1($other,
		"SELECT string_agg(format('%s|%s|%s|%s|%s|%s|%s|%s', pid, database, name, kind, scope, holder, hold_count, lease), E'\\n' ORDER BY name) FROM rlock_locks"
	),
	join("\n",
		"$a_pid|postgres|wd_fixed|exclusive|session|" . q1($a, 'SELECT rlock_holder_id()') . "|1|00:00:01.5",
		"$a_pid|postgres|wd_session|exclusive|session|" . q1($a, 'SELECT rlock_holder_id()') . "|1|00:00:02",
		"$b_pid|postgres|wd_xact|exclusive|transaction|" . q1($b, 'SELECT rlock_holder_id()') . "|1|00:00:02"),
	'rlock_locks shows the locks of two sessions: pid, database, name, kind, scope, holder, count, lease');
is(q1($other, "SELECT count(*) FROM rlock_locks WHERE state = 'held' AND acquired_at <= now() AND acquired_at > now() - interval '1 minute'"),
	'3', 'all held, with their acquisition time');

my $t0 = time();
ok( RlockTest::wait_until(sub {
		q1($other, "SELECT rlock_is_locked('wd_fixed')") eq 'f' }, 10),
	'the fixed-lease lock expires by itself');
my $expired_after = time() - $t0;
# a lock the watchdog renewed (every 0.67 s) would not expire at all
note sprintf('it expired %.2f s after the check began (lease 1.5 s)', $expired_after);
cmp_ok($expired_after, '<', 5.0, 'at the end of its lease, not renewed');

sleep(6);    # 3 x watchdog_timeout
is(q1($other, "SELECT rlock_try_acquire('wd_session', '1 minute'), rlock_try_acquire('wd_xact', '1 minute')"),
	'f|f', 'after 3 x watchdog_timeout, both NULL-lease locks are still held (not taken by another session)');
is(q1($a, "SELECT rlock_hold_count('wd_session')"), '1', 'the idle session still holds its lock');
is(q1($b, "SELECT rlock_hold_count('wd_xact')"), '1', 'the idle-in-transaction session still holds its xact lock');
is(q1($other, "SELECT count(*) FROM rlock_locks WHERE renewed_at > acquired_at + interval '4 seconds'"),
	'2', 'rlock_locks shows the renewals');
my $pttl = $redis->cli('PTTL', 'wd_session');
ok($pttl > 0 && $pttl <= 2000, "the key's TTL stays within the watchdog lease ($pttl ms)");

# ---- rows vanish on release, commit and session end ----

q1($b, 'COMMIT');
is(q1($other, "SELECT count(*) FROM rlock_locks WHERE name = 'wd_xact'"), '0',
	'the transaction lock leaves rlock_locks at COMMIT');
q1($b, "SELECT rlock_acquire('wd_b')");
is(q1($other, "SELECT count(*) FROM rlock_locks WHERE pid = $b_pid"), '1', 'b holds one lock');
$b->quit;
ok(RlockTest::wait_until(sub {
		q1($other, "SELECT count(*) FROM rlock_locks WHERE pid = $b_pid") eq '0' }, 10),
	'its row vanishes when the session ends');
is(q1($a, "SELECT rlock_release('wd_session')"), 't', 'a releases its renewed lock');
is(q1($other, "SELECT count(*) FROM rlock_locks WHERE pid = $a_pid AND name = 'wd_session'"), '0',
	'a released lock leaves rlock_locks');
my ($rel, $warn) = q2($a, "SELECT rlock_release('wd_fixed')");
is($rel, 'f', 'releasing the expired fixed-lease lock returns false');
like($warn, qr/WARNING:  lock "wd_fixed" was lost/, 'with a WARNING that it was lost');
is(q1($other, "SELECT count(*) FROM rlock_locks WHERE pid = $a_pid"), '0',
	'and then a holds nothing in rlock_locks');

# ---- a fixed-lease hold is renewed only while a NULL-lease hold of it lasts ----

# A session holds a lock with a 3 s lease; a transaction takes it again
# without a lease: the watchdog renews the lock (one key, one TTL) while the
# transaction runs.  Once the transaction ends, only the fixed-lease hold is
# left, and the renewals stop: the lock ends at the expiry the last renewal
# gave it (within watchdog_timeout), rlock calls it lost, and another
# session can take it.
q1($a, "SELECT rlock_acquire('wd_mixed', '3s')");
q1($a, 'BEGIN');
q1($a, "SELECT rlock_xact_acquire('wd_mixed')");
is(q1($a, "SELECT rlock_hold_count('wd_mixed')"), '2', 'a holds the lock twice: session (3 s lease) and transaction (none)');
ok( RlockTest::wait_until(sub {
		q1($other, "SELECT count(*) FROM rlock_locks WHERE name = 'wd_mixed' AND scope = 'session' AND state = 'held' AND renewed_at > acquired_at + interval '3.5 s'") eq '1'
	}, 30),
	'while the transaction runs, the watchdog renews the lock past the 3 s lease');
q1($a, 'COMMIT');
ok( RlockTest::wait_until(sub { $redis->cli('EXISTS', 'wd_mixed') eq '0' }, 30),
	'after the transaction, the lock is no longer renewed and expires in Redis');
ok( RlockTest::wait_until(sub {
		q1($other, "SELECT state FROM rlock_locks WHERE name = 'wd_mixed'") eq 'lost' }, 30),
	'rlock_locks shows it lost');
is(q1($other, "SELECT rlock_try_acquire('wd_mixed', '1 minute')"), 't', 'another session takes it');
($rel, $warn) = q2($a, "SELECT rlock_release('wd_mixed')");
is($rel, 'f', 'the first session\'s release returns false');
like($warn, qr/WARNING:  lock "wd_mixed" was lost/, 'with a WARNING that it was lost');
is(q1($other, "SELECT rlock_release('wd_mixed')"), 't', 'the other session releases it');

# ---- lost locks: force release, FLUSHALL ----

my $log_offset = -s $node->logfile;
q1($a, "SELECT rlock_acquire('wd_lost')");
q1($other, "SELECT rlock_force_release('wd_lost')");
ok(RlockTest::wait_until(sub {
		q1($other, "SELECT state FROM rlock_locks WHERE name = 'wd_lost'") eq 'lost' }, 5),
	'after a force release the watchdog marks the lock lost');
ok( RlockTest::wait_until(sub {
		slurp_file($node->logfile, $log_offset) =~
		  /LOG:  rlock watchdog: lock "wd_lost" held by [0-9a-f-]{36}:$a_pid \(pid $a_pid\) was lost/ }, 5),
	'the server log names the lock, holder and pid');
my ($out, $err) = q2($a, "SELECT rlock_release('wd_lost')");
is($out, 'f', "the holder's release returns false");
like($err, qr/WARNING:  lock "wd_lost" was lost before this session released it/,
	'with a WARNING');
is(q1($other, "SELECT count(*) FROM rlock_locks WHERE name = 'wd_lost'"), '0',
	'and the lost row is gone once the session knows');

# rlock_release_all counts the names it released: not one the watchdog
# found lost, nor one found lost at the release
q1($a, "SELECT rlock_acquire('wd_all_lost'), rlock_acquire('wd_all_gone'), rlock_acquire('wd_all_held')");
q1($other, "SELECT rlock_force_release('wd_all_lost')");
ok(RlockTest::wait_until(sub {
		q1($other, "SELECT state FROM rlock_locks WHERE name = 'wd_all_lost'") eq 'lost' }, 5),
	'a force-released lock beside a held one is marked lost');
$redis->cli('DEL', 'wd_all_gone');
($out, $err) = q2($a, "SELECT rlock_release_all()");
is($out, '1', 'rlock_release_all counts only the name it released');
# (the watchdog may find the second gone first: in either order)
like($err, qr/lock "wd_all_lost" was lost/, '... and warns of the lost one');
like($err, qr/lock "wd_all_gone" was lost/, '... and of the one found gone');

# a transaction holding a lost xact lock cannot commit
$node->safe_psql('postgres', 'CREATE TABLE guarded (v int); GRANT ALL ON guarded TO PUBLIC');
q1($a, 'BEGIN');
q1($a, "SELECT rlock_xact_acquire('wd_commit')");
q1($a, 'INSERT INTO guarded VALUES (1)');
$redis->cli('FLUSHALL');
ok(RlockTest::wait_until(sub {
		q1($other, "SELECT state FROM rlock_locks WHERE name = 'wd_commit'") eq 'lost' }, 5),
	'after FLUSHALL the watchdog marks the xact lock lost');
($out, $err) = q2($a, 'COMMIT');
like($err, qr/ERROR:  cannot commit: lock "wd_commit" held by this transaction was lost/,
	'COMMIT fails with an ERROR naming the lock');
is($node->safe_psql('postgres', 'SELECT count(*) FROM guarded'), '0',
	'nothing of the transaction was committed');

# verify_on_commit also catches a loss the watchdog has not seen yet
q1($a, 'BEGIN');
q1($a, "SELECT rlock_xact_acquire('wd_commit2', '1 minute')");
q1($a, 'INSERT INTO guarded VALUES (2)');
$redis->cli('DEL', 'wd_commit2');
($out, $err) = q2($a, 'COMMIT');
like($err, qr/ERROR:  cannot commit: lock "wd_commit2" held by this transaction was lost/,
	'a fixed-lease xact lock deleted behind our back also stops the COMMIT');
is($node->safe_psql('postgres', 'SELECT count(*) FROM guarded'), '0',
	'its insert is not visible either');
q1($a, 'BEGIN');
q1($a, "SELECT rlock_xact_acquire('wd_commit3')");
q1($a, 'INSERT INTO guarded VALUES (3)');
($out, $err) = q2($a, 'COMMIT');
is($err, '', 'a transaction whose locks are intact commits');
is($node->safe_psql('postgres', 'SELECT array_agg(v) FROM guarded'), '{3}',
	'and its insert is visible');

# rlock.cancel_on_lost: the worker also cancels the holder's statement
$node->safe_psql('postgres', 'ALTER SYSTEM SET rlock.cancel_on_lost = on');
$node->reload;
q1($a, "SELECT rlock_acquire('wd_cancel')");
$a->query_until(qr/sleeping\n/, "\\echo sleeping\nSELECT pg_sleep(60);\n");
$t0 = time();
$redis->cli('DEL', 'wd_cancel');
my $cancelled = RlockTest::wait_until(sub {
		$a->{run}->pump_nb;
		return $a->{stderr} =~ /canceling statement: rlock lock "wd_cancel" was lost \(gone from Redis\)/; }, 10);
ok($cancelled, sprintf('with rlock.cancel_on_lost the running statement is cancelled (%.2f s after the loss)', time() - $t0));
($out, $err) = q2($a, "SELECT rlock_release('wd_cancel')");
is($out, 'f', 'and the lost lock is reported on release');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET rlock.cancel_on_lost');
$node->reload;

# ---- the worker restarts when terminated, and keeps renewing ----

my $wpid = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'rlock watchdog'");
q1($a, "SELECT rlock_acquire('wd_survive')");
$node->safe_psql('postgres', "SELECT pg_terminate_backend($wpid)");
ok( RlockTest::wait_until(sub {
		my $p = $node->safe_psql('postgres',
			"SELECT pid FROM pg_stat_activity WHERE backend_type = 'rlock watchdog'");
		return $p ne '' && $p ne $wpid; }, 15),
	'the terminated watchdog comes back');
my $back = $node->safe_psql('postgres', 'SELECT now()');
sleep(4);
is(q1($other, "SELECT rlock_try_acquire('wd_survive', '1 minute')"), 'f',
	'and the lock is still held 2 x watchdog_timeout later');
ok( RlockTest::wait_until(sub {
		q1($other, "SELECT count(*) FROM rlock_locks WHERE name = 'wd_survive' AND renewed_at > '$back'") eq '1' }, 10),
	'renewed by the new worker');

# ---- SIGKILL of a holding backend ----

my $old_holder = q1($a, 'SELECT rlock_holder_id()');
q1($a, "SELECT rlock_acquire('wd_killed')");
$other->quit;
$t0 = time();
# the postmaster reinitialises shared memory; wait until it accepts again
ok(RlockTest::kill_backend_and_wait_restart($node, $a_pid),
	'the server restarts after the SIGKILL');
my $c = $node->background_psql('postgres', on_error_stop => 0);
my $new_holder = q1($c, 'SELECT rlock_holder_id()');
my ($old_uuid) = $old_holder =~ /^(.*):/;
my ($new_uuid) = $new_holder =~ /^(.*):/;
isnt($new_uuid, $old_uuid, 'the instance UUID changed');
is(q1($c, 'SELECT count(*) FROM rlock_locks'), '0', 'the registry starts empty');
# Nobody renews the killed backend's lock any more: it goes when its lease
# (watchdog_timeout, 2 s) runs out, long before the lock_timeout of 10 s
# (the default lease, 30 s, would not).
my ($got, $kerr) = RlockTest::query_err($c,
	"SET lock_timeout = '10s'; SELECT rlock_acquire('wd_killed', '1 minute'); RESET lock_timeout;");
is("$got/$kerr", '/', 'a new holder gets the killed backend\'s lock within its lease + margin');
note sprintf('%.2f s after the kill (which restarted the server)', time() - $t0);
$c->quit;

done_testing();
