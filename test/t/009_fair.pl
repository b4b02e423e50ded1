# Copyright (c) 2026, rlock developers
#
# Fair locks between sessions: five sessions queued one after another get
# the lock in exactly that order; a queued session that is cancelled or
# terminated leaves the queue at once, so the next one is not delayed; a
# Redisson fair-lock waiter, driven from redis-cli with the scripts of
# PROTOCOL.md, keeps its place in the queue and is told on its own channel;
# an idle fair hold without a lease is renewed.
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
my $node = RlockTest::new_node('fair', $redis, watchdog_timeout => '2s');

my $holder = $node->background_psql('postgres', on_error_stop => 0);
my @w = map { $node->background_psql('postgres', on_error_stop => 0) } 1 .. 5;

sub q1
{
	my ($s, $sql) = @_;
	my ($out, $err) = RlockTest::query_err($s, $sql);
	return $out;
}

my @ids = map { q1($_, 'SELECT rlock_holder_id()') } @w;
my @pids = map { q1($_, 'SELECT pg_backend_pid()') } @w;
my $hid = q1($holder, 'SELECT rlock_holder_id()');
my %name_of = map { ($ids[$_] => 'w' . ($_ + 1)) } 0 .. 4;

sub queue
{
	my ($lock) = @_;
	my $out = $redis->cli('LRANGE', "redisson_lock_queue:{$lock}", 0, -1);
	return join(' ', map { $name_of{$_} // $_ } split /\n/, $out);
}

# Queue session $i for $lock: it will take the lock, note the time, and
# release it at once.
sub enqueue
{
	my ($i, $lock, $expect) = @_;
	$w[$i]->query_until(qr/queued\n/,
		"\\echo queued\nSELECT rlock_fair_acquire('$lock', '1 minute'), 'got=' || (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, rlock_fair_release('$lock');\n"
	);
	RlockTest::wait_until(sub { queue($lock) eq $expect }, 10)
	  or diag('queue is ' . queue($lock) . ", expected $expect");
	return;
}

sub got
{
	my ($i) = @_;
	my $out = $w[$i]->query_until(qr/got=\d+\|t\n/, '');
	my ($t) = $out =~ /got=(\d+)/;
	return $t / 1e6;
}

# ---- FIFO: five sessions ----

q1($holder, "SELECT rlock_fair_acquire('fq', '1 minute')");
my @expect;
for my $i (0 .. 4)
{
	push @expect, 'w' . ($i + 1);
	enqueue($i, 'fq', join(' ', @expect));
}
is(queue('fq'), 'w1 w2 w3 w4 w5', 'five sessions queued in order');
my $t_rel = time();
q1($holder, "SELECT rlock_fair_release('fq')");
my @t = map { got($_) } 0 .. 4;
my $in_order = 1;
$in_order &&= $t[$_] > $t[ $_ - 1 ] for 1 .. 4;
ok($in_order, 'they got the lock in exactly that order');
# (a waiter not told retries at its next recheck, up to 5 s later; these
# bounds leave a loaded machine room below that)
note sprintf('the fifth had the lock %.3f s after the first release', $t[4] - $t_rel);
cmp_ok($t[4] - $t_rel, '<', 3.0,
	'all five soon after the first release (each told on its own channel)');
is($redis->cli('EXISTS', 'fq', 'redisson_lock_queue:{fq}', 'redisson_lock_timeout:{fq}'), '0',
	'lock, queue and deadlines are gone');

# ---- a cancelled waiter leaves the queue; the next one is not delayed ----

for my $how ('cancel', 'terminate')
{
	my $lock = "fq_$how";
	q1($holder, "SELECT rlock_fair_acquire('$lock', '1 minute')");
	enqueue(0, $lock, 'w1');
	enqueue(1, $lock, 'w1 w2');
	enqueue(2, $lock, 'w1 w2 w3');
	my $fn = $how eq 'cancel' ? 'pg_cancel_backend' : 'pg_terminate_backend';
	$node->safe_psql('postgres', "SELECT $fn($pids[1])");
	ok(RlockTest::wait_until(sub { queue($lock) eq 'w1 w3' }, 5),
		"$how: the second waiter left the queue at once (" . queue($lock) . ')');
	q1($holder, "SELECT rlock_fair_release('$lock')");
	my $t1 = got(0);
	my $t3 = got(2);
	note sprintf("$how: the third waiter got the lock %.1f ms after the first", ($t3 - $t1) * 1000);
	cmp_ok($t3 - $t1, '<', 3.0,
		"$how: the third waiter got the lock right after the first, not after a recheck");
	if ($how eq 'terminate')
	{
		$w[1] = $node->background_psql('postgres', on_error_stop => 0);
		$ids[1] = q1($w[1], 'SELECT rlock_holder_id()');
		$pids[1] = q1($w[1], 'SELECT pg_backend_pid()');
		%name_of = map { ($ids[$_] => 'w' . ($_ + 1)) } 0 .. 4;
	}
	else
	{
		my (undef, $err) = RlockTest::query_err($w[1], 'SELECT 1');
		like($err, qr/canceling statement due to user request/,
			'the cancelled waiter got the cancel');
	}
}

# ---- a Redisson fair-lock waiter keeps its place ----

# Redisson's fair acquire (queueing) and release, from PROTOCOL.md.
my $java_acquire = $RlockTest::Redisson::fair_acquire;
my $java_release = $RlockTest::Redisson::fair_release;
my $java = '5e4d3c2b-1a09-4f8e-9d7c-6b5a4f3e2d1c:77';
my @fkeys = ('fj', 'redisson_lock_queue:{fj}', 'redisson_lock_timeout:{fj}',
	'redisson_lock__channel:{fj}');
sub java_acquire
{
	return $redis->eval($java_acquire, [ @fkeys[0 .. 2] ], 60000, $java, 300000,
		int(time() * 1000));
}

q1($holder, "SELECT rlock_fair_acquire('fj', '1 minute')");
enqueue(0, 'fj', 'w1');
java_acquire();
$name_of{$java} = 'java';
is(queue('fj'), 'w1 java', 'the Redisson waiter queues behind w1');
enqueue(2, 'fj', 'w1 java w3');
my ($sub, $subout) = $redis->cli_bg('SUBSCRIBE', "redisson_lock__channel:{fj}:$java");
usleep(200_000);
q1($holder, "SELECT rlock_fair_release('fj')");
got(0);    # w1 takes it and releases it
ok(RlockTest::wait_until(sub { $sub->pump_nb; $$subout =~ /\b0\s*$/ }, 5),
	'w1\'s release told the Redisson waiter, on its own channel');
usleep(300_000);
is($redis->cli('EXISTS', 'fj'), '0', 'the lock stays free for the Redisson waiter');
is(queue('fj'), 'java w3', 'and w3 waits behind it');
is(java_acquire(), '', 'the Redisson waiter takes the lock at its turn');
is(queue('fj'), 'w3', 'w3 is next');
$t_rel = time();
is($redis->eval($java_release, [@fkeys], '0', $java), '1', 'the Redisson client releases');
my $w3_after = got(2) - $t_rel;
note sprintf('w3 had the lock %.3f s after the release', $w3_after);
cmp_ok($w3_after, '<', 3.0, 'which tells w3, who gets the lock');
$sub->kill_kill;

# ---- rlock_force_release wakes the head of the queue ----

q1($holder, "SELECT rlock_fair_acquire('f_force', '1 minute')");
enqueue(0, 'f_force', 'w1');
$t_rel = time();
is($node->safe_psql('postgres', "SELECT rlock_force_release('f_force')"), 't',
	'a superuser force-releases the fair lock');
my $head_after = got(0) - $t_rel;
note sprintf('the head of the queue had the lock %.3f s after the force release', $head_after);
cmp_ok($head_after, '<', 3.0, 'the head of the queue is woken and gets the lock at once');
my (undef, $ferr) = RlockTest::query_err($holder, "SELECT rlock_fair_release('f_force')");
like($ferr, qr/was lost/, 'the former holder is told its lock was lost');

# ---- an idle fair hold without a lease is renewed ----

q1($holder, "SELECT rlock_fair_acquire('f_idle')");
sleep(6);    # 3 x watchdog_timeout
is(q1($w[3], "SELECT rlock_fair_try_acquire('f_idle', '1 minute')"),
	'f', 'after 3 x watchdog_timeout the idle fair hold is still held');
is(q1($holder, "SELECT rlock_fair_release('f_idle')"), 't', 'and released by its holder');

# ---- a waiter that died during a long hold does not stall the queue ----

# A Redisson waiter that died while the lock was held for an hour: its
# deadline is the holder's lease plus its wait, an hour away.  Once the
# lock is released, the next waiter does not wait for that hour: the dead
# head has its wait (10 s) to take the free lock, then is dropped, and the
# waiter behind it gets the lock well within its own wait (60 s).
{
	my $l = 'f_dead';
	my $dead = '0b1d9a7e-5c3f-4e21-9a8b-7c6d5e4f3a2b:77';
	is(q1($holder, "SELECT rlock_fair_try_acquire('$l', '1 hour')"), 't',
		'the holder takes the lock for an hour');
	my $now_ms = int(time() * 1000);
	$redis->cli('RPUSH', "redisson_lock_queue:{$l}", $dead);
	$redis->cli('ZADD', "redisson_lock_timeout:{$l}", $now_ms + 3_610_000, $dead);
	is(queue($l), $dead, 'a waiter that died queues with a deadline an hour away');
	is(q1($holder, "SELECT rlock_fair_release('$l')"), 't', 'the holder releases');
	is(q1($w[4], "SELECT rlock_fair_try_acquire('$l', '1 minute', '60 s')"), 't',
		'the next waiter gets the lock within its wait');
	is(queue($l), '', '... the dead waiter is gone from the queue');
	is($redis->cli('ZSCORE', "redisson_lock_timeout:{$l}", $dead), '',
		'... and from the deadlines');
	is(q1($w[4], "SELECT rlock_fair_release('$l')"), 't', '... released');

	# A Redisson waiter at the head, alive, sleeping until its old deadline
	# (an hour): the lock went without a release message (its lease ran
	# out).  The next rlock attempt brings the head's deadline in, and
	# tells it so on its own channel, so that it asks at once.
	my $l2 = 'f_dead2';
	my $live = '5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b:78';
	$redis->cli('HSET', $l2, '6f1c2b9e-3d4a-4e5f-8a7b-9c0d1e2f3a4b:9', 1);
	$redis->cli('PEXPIRE', $l2, 3_600_000);
	$now_ms = int(time() * 1000);
	$redis->cli('RPUSH', "redisson_lock_queue:{$l2}", $live);
	$redis->cli('ZADD', "redisson_lock_timeout:{$l2}", $now_ms + 3_610_000, $live);
	my ($sub2, $sub2out) =
	  $redis->cli_bg('SUBSCRIBE', "redisson_lock__channel:{$l2}:$live");
	ok(RlockTest::wait_until(sub { $sub2->pump_nb; $$sub2out =~ /subscribe/ }, 10),
		'a live Redisson waiter heads the queue, listening on its channel');
	$redis->cli('DEL', $l2);
	is(q1($w[4], "SELECT rlock_fair_try_acquire('$l2', '1 minute')"), 'f',
		'the lock is free, and an rlock try does not pass the head');
	ok(RlockTest::wait_until(sub { $sub2->pump_nb; $$sub2out =~ /\b0\s*$/ }, 10),
		'... which is told on its own channel');
	cmp_ok($redis->cli('ZSCORE', "redisson_lock_timeout:{$l2}", $live),
		'<=', int(time() * 1000) + 10_000, '... its deadline brought in to the wait');
	$sub2->kill_kill;
	$redis->cli('DEL', "redisson_lock_queue:{$l2}", "redisson_lock_timeout:{$l2}");
}

$holder->quit;
$_->quit for @w;
$node->stop;
$redis->stop;
done_testing();
