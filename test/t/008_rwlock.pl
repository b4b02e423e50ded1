# Copyright (c) 2026, rlock developers
#
# Read/write locks across servers and with Redisson: a Redisson writer,
# driven from redis-cli with the RReadWriteLock scripts of PROTOCOL.md,
# keeps rlock readers on two servers out and its release ("1") wakes them
# both; readers share across clients; a Redisson reader's release ("0")
# wakes an rlock writer; idle read and write holds taken without a lease
# outlive 3 x watchdog_timeout; a writer whose read hold ran out takes the
# write lock again; a write hold with a lease lives (and is believed held)
# as long as the writer's renewed read hold; a read hold re-entered with a
# longer lease keeps it after a release; a terminated session's read hold
# is gone.
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
my $node1 = RlockTest::new_node('rw1', $redis, watchdog_timeout => '2s');
my $node2 = RlockTest::new_node('rw2', $redis, watchdog_timeout => '2s');

my $s1 = $node1->background_psql('postgres', on_error_stop => 0);
my $s2 = $node2->background_psql('postgres', on_error_stop => 0);
my $s3 = $node1->background_psql('postgres', on_error_stop => 0);

sub q1
{
	my ($s, $sql) = @_;
	my ($out, $err) = RlockTest::query_err($s, $sql);
	return $out;
}

# Start a blocking statement in a session; finish it with finish().
sub start
{
	my ($s, $sql) = @_;
	$s->query_until(qr/started\n/, "\\echo started\n$sql;\n\\echo done\n");
	return;
}

sub finish
{
	my ($s) = @_;
	my $out = $s->query_until(qr/done\n/, '');
	$out =~ s/\n?done\n$//;
	return $out;
}

# Redisson's RReadWriteLock scripts (written from PROTOCOL.md): RlockTest::Redisson's.
my $java_write_acquire = $RlockTest::Redisson::rw_write_acquire;
my $java_write_release = $RlockTest::Redisson::rw_write_release;
my $java_read_acquire = $RlockTest::Redisson::rw_read_acquire;
my $java_read_release = $RlockTest::Redisson::rw_read_release;

my $java = '3c9d2e1f-7a6b-4c5d-9e8f-0a1b2c3d4e5f:12';

sub java_write
{
	my ($name) = @_;
	return $redis->eval($java_write_acquire, [$name], 60000, "$java:write");
}

sub java_write_release
{
	my ($name) = @_;
	return $redis->eval($java_write_release,
		[ $name, "redisson_rwlock:{$name}" ], '1', 60000, "$java:write");
}

sub java_read
{
	my ($name) = @_;
	return $redis->eval($java_read_acquire,
		[ $name, "{$name}:$java:rwlock_timeout" ], 60000, $java, "$java:write");
}

sub java_read_release
{
	my ($name) = @_;
	return $redis->eval($java_read_release,
		[ $name, "redisson_rwlock:{$name}", "{$name}:$java:rwlock_timeout", "{$name}" ],
		'0', $java);
}

# ---- a Redisson writer keeps rlock readers on two servers out ----

is(java_write('rwi'), '', 'the Redisson client takes the write lock');
is(q1($s1, "SELECT rlock_read_try_acquire('rwi', '1 minute')"),
	'f', 'an rlock reader cannot read while it writes');
is(q1($s1, "SELECT rlock_write_try_acquire('rwi', '1 minute')"),
	'f', 'nor can an rlock writer write');
start($s1, "SELECT rlock_read_acquire('rwi', '1 minute')");
start($s2, "SELECT rlock_read_acquire('rwi', '1 minute')");
RlockTest::wait_for_rlock_waiters($node1, 'postgres', 1, "%rlock_read_acquire('rwi'%");
RlockTest::wait_for_rlock_waiters($node2, 'postgres', 1, "%rlock_read_acquire('rwi'%");
my $t0 = time();
is(java_write_release('rwi'), '1', 'the Redisson client releases its write lock');
finish($s1);
finish($s2);
my $woken = time() - $t0;
# (a waiter not woken by a message retries at its next recheck, up to 5 s
# later; these bounds leave a loaded machine room below that)
note sprintf('both readers had the lock %.3f s after the release', $woken);
cmp_ok($woken, '<', 3.0,
	'its release ("1") woke both rlock readers, on two servers, at once');
is( $node1->safe_psql('postgres',
		"SELECT string_agg(kind || ':' || hold_count, ',') FROM rlock_status('rwi')"),
	'read:1,read:1', 'both hold the read lock');

# ---- readers share across clients; a Redisson reader's release wakes an rlock writer ----

is(java_read('rwi'), '', 'a Redisson reader joins the rlock readers');
start($s3, "SELECT rlock_write_acquire('rwi', '1 minute')");
RlockTest::wait_for_rlock_waiters($node1, 'postgres', 1, "%rlock_write_acquire('rwi'%");
q1($s1, "SELECT rlock_read_release('rwi')");
q1($s2, "SELECT rlock_read_release('rwi')");
usleep(200_000);
is( $node1->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Extension' AND query LIKE '%rlock_write_acquire(''rwi''%'"),
	'1', 'the rlock writer still waits for the Redisson reader');
$t0 = time();
is(java_read_release('rwi'), '1', 'the Redisson reader releases');
finish($s3);
$woken = time() - $t0;
note sprintf('the writer had the lock %.3f s after the release', $woken);
cmp_ok($woken, '<', 3.0, 'its release ("0") woke the rlock writer');
is(java_read('rwi') ne '', 1, 'now the Redisson client cannot read');
is(java_write('rwi') ne '', 1, 'nor write');
q1($s3, "SELECT rlock_write_release('rwi')");
is($redis->cli('EXISTS', 'rwi'), '0', 'the lock is gone once the rlock writer released it');

# ---- rlock_force_release wakes the waiters of a read/write lock ----

q1($s1, "SELECT rlock_read_acquire('rw_force', '1 minute')");
start($s3, "SELECT rlock_write_acquire('rw_force', '1 minute')");
RlockTest::wait_for_rlock_waiters($node1, 'postgres', 1, "%rlock_write_acquire('rw_force'%");
$t0 = time();
is($node2->safe_psql('postgres', "SELECT rlock_force_release('rw_force')"), 't',
	'a superuser on the other server force-releases the read lock');
finish($s3);
$woken = time() - $t0;
note sprintf('the writer had the lock %.3f s after the force release', $woken);
cmp_ok($woken, '<', 3.0, 'the waiting writer is woken at once');
my (undef, $ferr) = RlockTest::query_err($s1, "SELECT rlock_read_release('rw_force')");
like($ferr, qr/was lost/, 'the reader is told its lock was lost');
q1($s3, "SELECT rlock_write_release('rw_force')");

# ---- idle holds without a lease are renewed ----

q1($s1, "SELECT rlock_read_acquire('rw_idle_r')");
q1($s1, "SELECT rlock_read_acquire('rw_idle_r')");
q1($s2, "SELECT rlock_write_acquire('rw_idle_w')");
my $holder1 = q1($s1, 'SELECT rlock_holder_id()');
sleep(6);    # 3 x watchdog_timeout
is(q1($s3, "SELECT rlock_write_try_acquire('rw_idle_r', '1 minute'), rlock_read_try_acquire('rw_idle_w', '1 minute')"),
	'f|f', 'after 3 x watchdog_timeout, idle read and write holds are still held');
for my $k (1, 2)
{
	cmp_ok($redis->cli('PTTL', "{rw_idle_r}:$holder1:rwlock_timeout:$k"), '>', 0,
		"the timeout key of read hold $k is renewed too");
}
is(q1($s1, "SELECT rlock_hold_count('rw_idle_r')"), '2', 'the reader still has both holds');

# ---- a writer's read hold whose lease ran out does not stop its next write ----

# The read hold's timeout key expires, but Redis keeps its field (as
# Redisson does): once the write lock is released the hash is in read mode
# with this session's field.  The next write acquisition forgets the lost
# read hold (and its field) and takes the lock, instead of refusing it as
# an upgrade of a read lock.
# Wait until the timeout key of s1's first read hold of $name has expired.
my $holder_s1 = q1($s1, 'SELECT rlock_holder_id()');
sub first_read_expired
{
	my ($name, $what) = @_;
	ok( RlockTest::wait_until(
			sub { $redis->cli('EXISTS', "{$name}:$holder_s1:rwlock_timeout:1") eq '0' }, 30),
		$what);
	return;
}

q1($s1, "SELECT rlock_write_acquire('rw_lost_read', '1 minute')");
q1($s1, "SELECT rlock_read_acquire('rw_lost_read', '1 s')");
first_read_expired('rw_lost_read', 'the read hold\'s lease runs out in Redis');
is(q1($s1, "SELECT rlock_write_release('rw_lost_read')"), 't', 'the writer releases its write hold');
my ($lr_out, $lr_err) = RlockTest::query_err($s1,
	"SELECT rlock_write_try_acquire('rw_lost_read', '1 minute', '0 ms')");
is($lr_out, 't', 'the writer takes the write lock again');
like($lr_err, qr/WARNING:  read lock "rw_lost_read" was lost/, 'and is told its read hold was lost');
unlike($lr_err, qr/ERROR/, 'without an upgrade ERROR');
is($redis->cli('HGET', 'rw_lost_read', 'mode'), 'write', 'Redis has the lock in write mode');
is($redis->cli('HEXISTS', 'rw_lost_read', $holder_s1), '0', 'without the lost read hold\'s field');
is(q1($s2, "SELECT rlock_read_try_acquire('rw_lost_read', '1 minute', '0 ms')"), 'f',
	'a reader on the other server is kept out');
is(q1($s1, "SELECT rlock_hold_count('rw_lost_read')"), '1', 'the writer holds it once');
q1($s1, "SELECT rlock_write_release('rw_lost_read')");
is($redis->cli('EXISTS', 'rw_lost_read'), '0', 'its release leaves nothing');

# ---- a write hold with a lease lives as long as the writer's renewed read hold ----

# The read hold taken without a lease is renewed, and its renewal keeps the
# key (hence the write field on it) alive: rlock believes what Redis does,
# the write hold is held, and nobody else reads or writes.  Once the read
# hold is released, the write hold is no longer renewed: it ends within
# watchdog_timeout, reported lost.
# Wait until the write hold of $name (3 s lease) was renewed past its lease.
sub write_renewed_past_lease
{
	my ($name, $what) = @_;
	ok( RlockTest::wait_until(sub {
			q1($s3, "SELECT count(*) FROM rlock_locks WHERE name = '$name' AND kind = 'write' AND renewed_at > acquired_at + interval '3.5 s'") eq '1'
		}, 30),
		$what);
	return;
}

q1($s1, "SELECT rlock_write_acquire('rw_keep_w', '3 s')");
q1($s1, "SELECT rlock_read_acquire('rw_keep_w')");
write_renewed_past_lease('rw_keep_w', 'past its 3 s lease, the write hold is renewed along with the read hold');
is(q1($s3, "SELECT string_agg(kind || ' ' || state, ',' ORDER BY kind) FROM rlock_locks WHERE name = 'rw_keep_w'"),
	'read held,write held', 'both sides are held in rlock_locks');
is($redis->cli('HGET', 'rw_keep_w', 'mode'), 'write', 'Redis has the lock in write mode');
is(q1($s2, "SELECT rlock_read_try_acquire('rw_keep_w', '1 minute', '0 ms')"), 'f',
	'a reader on the other server is kept out');
is(q1($s1, "SELECT rlock_read_release('rw_keep_w')"), 't', 'the writer releases its read hold');
ok( RlockTest::wait_until(sub { $redis->cli('EXISTS', 'rw_keep_w') eq '0' }, 30),
	'then the write hold, no longer renewed, expires in Redis');
is(q1($s2, "SELECT rlock_read_try_acquire('rw_keep_w', '1 minute', '0 ms')"), 't',
	'and the reader on the other server gets in');
my ($kw_out, $kw_err) = RlockTest::query_err($s1, "SELECT rlock_write_release('rw_keep_w')");
is($kw_out, 'f', 'the writer\'s release returns false');
like($kw_err, qr/WARNING:  write lock "rw_keep_w" was lost/, 'with a WARNING that its write lock was lost');
q1($s2, "SELECT rlock_read_release('rw_keep_w')");

# The same in one transaction: COMMIT finds both holds held.
q1($s1, 'BEGIN');
q1($s1, "SELECT rlock_write_xact_acquire('rw_keep_x', '3 s')");
q1($s1, "SELECT rlock_read_xact_acquire('rw_keep_x')");
write_renewed_past_lease('rw_keep_x', 'in a transaction, the write hold is renewed past its lease too');
my ($kx_out, $kx_err) = RlockTest::query_err($s1, 'COMMIT');
unlike($kx_err, qr/ERROR/, 'COMMIT succeeds');
is($redis->cli('EXISTS', 'rw_keep_x'), '0', 'and releases both holds');

# ---- a read hold re-entered with a longer lease keeps it after a release ----

# Two read holds, 1 s then 1 hour.  Once the first one's timeout key has
# expired, a release leaves one hold, promised the longest lease: its
# timeout key comes back with it, so another reader's release does not
# delete the lock under it and a writer stays out.
q1($s1, "SELECT rlock_read_acquire('rw_lv', '1 s')");
q1($s1, "SELECT rlock_read_acquire('rw_lv', '1 hour')");
first_read_expired('rw_lv', 'the 1 s read hold\'s timeout key expires');
is(q1($s1, "SELECT rlock_read_release('rw_lv')"), 't', 'the reader releases one of its two holds');
cmp_ok($redis->cli('PTTL', "{rw_lv}:$holder_s1:rwlock_timeout:1"), '>', 60_000,
	'the hold that remains has a timeout key with the longest lease');
is(q1($s2, "SELECT rlock_read_acquire('rw_lv', '10 s')"), '', 'another reader joins');
is(q1($s2, "SELECT rlock_read_release('rw_lv')"), 't', 'and releases');
is($redis->cli('HEXISTS', 'rw_lv', $holder_s1), '1', 'the first reader\'s hold is still in Redis');
is(q1($s3, "SELECT rlock_write_try_acquire('rw_lv', '1 minute', '0 ms')"), 'f', 'a writer is kept out');
is(q1($s1, "SELECT rlock_read_release('rw_lv')"), 't', 'the first reader releases its last hold');
is($redis->cli('EXISTS', 'rw_lv'), '0', 'and the lock is gone');

# ---- a terminated reader's holds are released at its exit ----

my $pid1 = q1($s1, 'SELECT pg_backend_pid()');
$node1->safe_psql('postgres', "SELECT pg_terminate_backend($pid1)");
ok( RlockTest::wait_until(sub { $redis->cli('EXISTS', 'rw_idle_r') eq '0' }, 10),
	'the terminated session\'s read lock is released');
is($redis->cli('EXISTS', "{rw_idle_r}:$holder1:rwlock_timeout:1"), '0',
	'with its timeout keys');
q1($s2, "SELECT rlock_write_release('rw_idle_w')");

$s2->quit;
$s3->quit;
$node1->stop;
$node2->stop;
$redis->stop;
done_testing();
