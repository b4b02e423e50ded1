
# Copyright (c) 2026, rlock developers
#
# A connection is in step or closed (SPEC 7 and 8; issue 40, findings 1-3).
# A fake Redis (RlockTest::FakeRedis), mostly a proxy to a real one, breaks
# the protocol where each case says:
#   - an error reply "-RLOCKKIND" with no word after it, with spaces, with a
#     long or binary tail, to the release, semaphore and latch paths: an
#     ERROR, never a crash;
#   - one extra reply after a real answer: the call that got it fails, and
#     the next rlock_try_acquire never believes it (two holders never);
#   - the background worker flooded with "+OK": its connection is closed,
#     and a lock taken after the flood is renewed, not reported lost;
#   - a release answered "+OK" (a reply no release returns): an ERROR, and
#     what the session holds is settled again;
#   - a script that ran, answered with an error: the hold is settled again
#     (no lock left in Redis);
#   - a release that ran, answered with an error: settled again at the
#     count the release meant (not taken for lost, nothing left in Redis);
#   - SUBSCRIBE refused: a blocking acquire polls within its wait;
#   - a Cluster slot map with overlapping ranges: refused with a DETAIL;
#   - a grant whose count of holds is out of the range of an int: refused;
# and, at the end, the server never restarted.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use RlockTest;
use RlockTest::FakeRedis;

my $redis = RlockTest::Redis->new;
my $node = RlockTest::new_node('discipline', $redis);
my $log_start = -s $node->logfile;
my $dir = $PostgreSQL::Test::Utils::tmp_check;

my $pm_pid = RlockTest::postmaster_pid($node);

# A new session of the node pointed at $url (set for the server).
sub session_at
{
	my ($url) = @_;
	RlockTest::set_gucs($node, 'rlock.redis_url' => $url);
	my $s = $node->background_psql('postgres', on_error_stop => 0);
	$s->query_safe("SET rlock.command_timeout = '5s'");
	return $s;
}

sub fake_url { return 'redis://127.0.0.1:' . $_[0]->port . '/0'; }

# What $sql printed in session $s (its first output).
sub q1
{
	my ($s, $sql) = @_;
	my ($out) = RlockTest::run_sql($s, $sql);
	return $out;
}

# The commands the fake received that match $re.
sub count_cmds
{
	my ($fake, $re) = @_;
	return scalar(grep { $_ =~ $re } $fake->commands);
}

# ---- 1. "-RLOCKKIND" with no word after it, and other tails ----

my %tails = (
	'bare' => "-RLOCKKIND\r\n",
	'with spaces' => "-RLOCKKIND    \r\n",
	'binary tail' => "-RLOCKKIND \x00\xff\x01\xfe garbage\r\n",
	'200 kB tail' => '-RLOCKKIND ' . ('x' x (200 * 1024)) . "\r\n",);
my @paths = (
	[ 'release for an owner', "SELECT rlock_release('kind_rel', 'an-owner-token')" ],
	[ 'semaphore', "SELECT rlock_semaphore_available('kind_sem')" ],
	[ 'latch', "SELECT rlock_latch_count('kind_latch')" ],);
foreach my $t (sort keys %tails)
{
	my $fake = RlockTest::FakeRedis->new(
		EVALSHA => $tails{$t},
		EVAL => $tails{$t});
	my $s = session_at(fake_url($fake));
	foreach my $p (@paths)
	{
		my ($name, $sql) = @$p;
		my ($out, $err, $state) = RlockTest::run_sql($s, $sql);
		note "-RLOCKKIND $t, $name: $state; $err";
		is($state, '42809', "-RLOCKKIND $t, $name: an ERROR of the wrong kind");
		is(q1($s, 'SELECT 1'), '1',
			"-RLOCKKIND $t, $name: the session survives");
	}
	$s->quit;
	$fake->stop;
}

# ---- 2. one extra reply after a real answer ----

my $java = '11111111-2222-3333-4444-555555555555:1';
$redis->cli('HSET', 'dupe', $java, '1');
$redis->cli('PEXPIRE', 'dupe', '600000');
my $extra_flag = "$dir/extra_reply_once";
my $extra = RlockTest::FakeRedis->new(
	'*' => RlockTest::FakeRedis::proxy(
		$redis->port,
		sub {
			my ($args, $reply) = @_;
			# once: after the answer to a script, "*2 :1 :1" unasked
			if (uc($args->[0]) =~ /^EVAL/ && $reply !~ /^-/ && unlink($extra_flag))
			{
				return $reply . "*2\r\n:1\r\n:1\r\n";
			}
			return $reply;
		}));
{
	my $s = session_at(fake_url($extra));
	is(q1($s, "SELECT rlock_try_acquire('warmup', '1 minute') AND rlock_release('warmup')"),
		't', 'through the proxy, locks work');
	open(my $fh, '>', $extra_flag) or die;
	close $fh;
	my ($out, $err, $state) = RlockTest::run_sql($s, "SELECT rlock_try_acquire('first', '1 minute')");
	note "the call answered with an extra reply: $state; $err";
	ok(!-e $extra_flag, 'the extra reply was sent');
	isnt($out, 't', 'the call the extra reply came with does not succeed');
	like($state, qr/^08/, '... it fails with a connection ERROR');
	like($err, qr/more replies than the commands asked for|no command asked for/,
		'... saying a reply came that no command asked for');
	($out, $err, $state) = RlockTest::run_sql($s, "SELECT rlock_try_acquire('dupe', '1 minute')");
	note "then try_acquire('dupe'): $out, $state; $err";
	is($out, 'f', 'the next try_acquire of a lock held elsewhere is refused, not granted by the extra reply');
	is($redis->cli('HGET', 'dupe', $java), '1', 'the other holder still holds it');
	is($redis->cli('HLEN', 'dupe'), '1', '... alone: never two holders');
	RlockTest::wait_until(sub { $redis->cli('EXISTS', 'first') eq '0' }, 10);
	is($redis->cli('EXISTS', 'first'), '0',
		'the lock of the call that failed is settled again (given back)');
	$s->quit;
}
$redis->cli('DEL', 'dupe');

# ---- 2b. the worker flooded with +OK ----

my $flood_flag = "$dir/flood_ok";
$extra->stop;
my $flood = RlockTest::FakeRedis->new(
	'*' => RlockTest::FakeRedis::proxy(
		$redis->port,
		sub {
			my ($args, $reply) = @_;
			return -e $flood_flag ? $reply . ("+OK\r\n" x 1000) : $reply;
		}));
{
	my $s = session_at(fake_url($flood));
	RlockTest::run_sql($s, "SELECT rlock_acquire('w0')");
	is(q1($s, "SELECT state FROM rlock_locks WHERE name = 'w0'"), 'held',
		'a lock for the watchdog to renew (NULL lease)');
	my $before = count_cmds($flood, qr/./);
	open(my $fh, '>', $flood_flag) or die;
	close $fh;
	# the worker talks to the flooding server a few times (renewals; once
	# its connection is closed, new connections' handshakes)
	ok( RlockTest::wait_until(sub { count_cmds($flood, qr/./) >= $before + 3 }, 30),
		'the worker met the flood');
	unlink $flood_flag;
	# (w0 may count as lost now: it went unrenewed)
	RlockTest::run_sql($s, "SELECT rlock_acquire('w1')");
	is(q1($s, "SELECT state FROM rlock_locks WHERE name = 'w1'"), 'held',
		'a NULL-lease lock taken after the flood');
	my ($renewed) = RlockTest::renewed_on($redis, 'w1', 20);
	ok($renewed, 'the worker renews it (its connection is in step again)');
	($renewed) = RlockTest::renewed_on($redis, 'w1', 20);
	ok($renewed, '... again');
	is(q1($s, "SELECT state FROM rlock_locks WHERE name = 'w1'"), 'held',
		'it is not reported lost');
	ok(RlockTest::log_has($node, $log_start, qr/rlock watchdog: unexpected reply to a renewal|more replies than the commands asked for/),
		'the worker said its connection broke the protocol');
	RlockTest::run_sql($s, 'SELECT rlock_release_all()');
	$s->quit;
	$flood->stop;
}

# ---- 2c. a release answered with a status ----

my $status_flag = "$dir/status_once";
my $statusfake = RlockTest::FakeRedis->new(
	'*' => RlockTest::FakeRedis::proxy(
		$redis->port,
		sub {
			my ($args, $reply) = @_;
			# once: the script ran in Redis, the answer is "+OK"
			return "+OK\r\n"
			  if uc($args->[0]) =~ /^EVAL/ && $reply !~ /^-/ && unlink($status_flag);
			return $reply;
		}));
{
	my $s = session_at(fake_url($statusfake));
	is(q1($s, "SELECT rlock_try_acquire('relok', '10 minutes')"), 't', 'a lock taken');
	open(my $fh, '>', $status_flag) or die;
	close $fh;
	my ($out, $err, $state) = RlockTest::run_sql($s, "SELECT rlock_release('relok')");
	note "a release answered +OK: $out $state; $err";
	ok(!-e $status_flag, 'the release was answered with a status');
	isnt($out, 't', 'a release answered with a status does not succeed');
	is($state, '08P01', '... it is a protocol ERROR');
	ok(RlockTest::wait_until(sub { $redis->cli('EXISTS', 'relok') eq '0' }, 20),
		'the lock is not in Redis');
	is(q1($s, "SELECT count(*) FROM rlock_locks WHERE name = 'relok'"), '0',
		'and the session holds it no more (settled again)');
	$s->quit;
	$statusfake->stop;
}

# ---- 3a. a script that ran, answered with an error ----

my $err_flag = "$dir/error_after_script";
my $errfake = RlockTest::FakeRedis->new(
	'*' => RlockTest::FakeRedis::proxy(
		$redis->port,
		sub {
			my ($args, $reply) = @_;
			# once: the script ran in Redis, the answer is an error
			return "-ERR injected after the script ran\r\n"
			  if uc($args->[0]) =~ /^EVAL/ && $reply =~ /^\*/ && unlink($err_flag);
			return $reply;
		}));
{
	my $s = session_at(fake_url($errfake));
	open(my $fh, '>', $err_flag) or die;
	close $fh;
	my ($out, $err, $state) = RlockTest::run_sql($s, "SELECT rlock_try_acquire('sterr', '10 minutes')");
	note "script then error: $state; $err";
	ok(!-e $err_flag, 'the error came after the script ran');
	is($state, '38000', 'the call fails with the error');
	ok(RlockTest::wait_until(sub { $redis->cli('EXISTS', 'sterr') eq '0' }, 20),
		'what the script took is given back (no lock left for its lease)');
	is(q1($s, "SELECT rlock_try_acquire('sterr2', '10 minutes') AND rlock_release('sterr2')"),
		't', 'the session goes on');
	$s->quit;
	$errfake->stop;
}

# ---- 3a'. a release that ran, answered with an error ----
# (found by the reply fuzzer, 053, RLOCK_FUZZ_SEED=611042106: a read
# release answered "ERR x" after it ran; the reconcile aimed at the count
# before the release, found one hold fewer in Redis, took the lock for lost
# and forgot the hold Redis still had, left there for its lease)

my $rel_flag = "$dir/release_error";
my $relfake = RlockTest::FakeRedis->new(
	'*' => RlockTest::FakeRedis::proxy(
		$redis->port,
		sub {
			my ($args, $reply) = @_;
			# once: the release ran in Redis, the answer is an error
			return "-ERR injected after the release ran\r\n"
			  if uc($args->[0]) =~ /^EVAL/ && $reply =~ /^:/
			  && (grep { $_ eq 'relerr' } @$args) && unlink($rel_flag);
			return $reply;
		}));
{
	my $s = session_at(fake_url($relfake));
	is(q1($s, "SELECT rlock_try_acquire('relerr', '10 minutes') AND rlock_try_acquire('relerr', '10 minutes')"),
		't', 'a lock taken twice');
	open(my $fh, '>', $rel_flag) or die;
	close $fh;
	my ($out, $err, $state) = RlockTest::run_sql($s, "SELECT rlock_release('relerr')");
	note "release then error: $state; $err";
	ok(!-e $rel_flag, 'the error came after the release ran');
	is($state, '38000', 'the release fails with the error');
	is(q1($s, "SELECT state || ' ' || hold_count FROM rlock_locks WHERE name = 'relerr'"),
		'held 1', 'settled again: the session holds it once, as Redis does');
	is($redis->cli('EXISTS', 'relerr'), '1', 'Redis has it');
	is(q1($s, "SELECT rlock_release('relerr')"), 't', 'the last hold is released');
	is($redis->cli('EXISTS', 'relerr'), '0', 'and Redis has it no more');
	$s->quit;
	$relfake->stop;
}

# ---- 3a''. a Redlock master's grant answered with an empty array ----
# (found by the reply fuzzer, 053, RLOCK_FUZZ_SEED=611829789: an acquire
# that failed on such an answer must give back what the master granted)

my $rl_flag = "$dir/redlock_empty";
my $rlfake = RlockTest::FakeRedis->new(
	'*' => RlockTest::FakeRedis::proxy(
		$redis->port,
		sub {
			my ($args, $reply) = @_;
			# once: the acquire ran in Redis, the answer is "*0"
			return "*0\r\n"
			  if uc($args->[0]) =~ /^EVAL/ && $reply =~ /^\*/
			  && (grep { $_ eq 'rlempty' } @$args) && unlink($rl_flag);
			return $reply;
		}));
{
	RlockTest::set_gucs($node, 'rlock.redlock_urls' => fake_url($rlfake));
	my $s = session_at($redis->url);
	open(my $fh, '>', $rl_flag) or die;
	close $fh;
	my ($out, $err, $state) = RlockTest::run_sql($s, "SELECT rlock_redlock_acquire('rlempty')");
	note "a Redlock grant answered *0: $out $state; $err";
	ok(!-e $rl_flag, 'the grant was answered with an empty array');
	isnt($out, 't', 'the acquire does not succeed');
	ok(RlockTest::wait_until(sub { $redis->cli('EXISTS', 'rlempty') eq '0' }, 5),
		'what the master granted is given back');
	is(q1($s, "SELECT count(*) FROM rlock_locks WHERE name = 'rlempty'"), '0',
		'the session does not hold it');
	$s->quit;
	RlockTest::set_gucs($node, 'rlock.redlock_urls' => '');
	$rlfake->stop;
}

# ---- 3b. SUBSCRIBE refused: the wait polls ----

my $subfake = RlockTest::FakeRedis->new(
	SUBSCRIBE => "-ERR subscriptions refused here\r\n",
	SSUBSCRIBE => "-ERR subscriptions refused here\r\n",
	'*' => RlockTest::FakeRedis::proxy($redis->port));
{
	$redis->cli('HSET', 'subw', $java, '1');
	$redis->cli('PEXPIRE', 'subw', '600000');
	my $s = session_at(fake_url($subfake));
	my $t0 = time;
	RlockTest::start_bg($s, "SELECT rlock_try_acquire('subw', '1 minute', '60 s')");
	ok(RlockTest::wait_until(sub { count_cmds($subfake, qr/^SUBSCRIBE/) >= 1 }, 30),
		'the waiter asked to subscribe');
	# a few attempts after the refusal: the wait goes on
	my $evals = count_cmds($subfake, qr/^EVAL/);
	ok(RlockTest::wait_until(sub { count_cmds($subfake, qr/^EVAL/) >= $evals + 2 }, 30),
		'the waiter looks again without a subscription');
	ok(!RlockTest::bg_done($s), 'the blocking acquire still waits');
	$redis->cli('DEL', 'subw');
	ok(RlockTest::wait_until(sub { RlockTest::bg_done($s) }, 30), 'it ends once the lock is free');
	my ($out, $err, $state) = RlockTest::bg_result($s);
	note sprintf('refused SUBSCRIBE: %s %s after %.1f s; %s', $out, $state, time - $t0, $err);
	is($out, 't', 'and gets the lock, within its wait');
	like($err, qr/WARNING:  Redis returned an error for lock "subw"/,
		'a WARNING says the subscription was refused');
	RlockTest::run_sql($s, "SELECT rlock_release('subw')");
	$s->quit;
	$subfake->stop;
}

# ---- 3c. a slot map with overlapping ranges ----

{
	my $slots = sub {
		my ($sock) = @_;
		my $p = $sock->sockport;
		my $e = sub {
			my ($a, $b) = @_;
			return "*3\r\n:$a\r\n:$b\r\n*2\r\n\$9\r\n127.0.0.1\r\n:$p\r\n";
		};
		return RlockTest::FakeRedis::_write($sock,
			"*2\r\n" . $e->(0, 10000) . $e->(5000, 16383));
	};
	my $fake = RlockTest::FakeRedis->new('CLUSTER SLOTS' => $slots);
	my $s = session_at('redis-cluster://127.0.0.1:' . $fake->port);
	my ($out, $err, $state) = RlockTest::run_sql($s, "SELECT rlock_try_acquire('overlap')");
	note "overlapping slot ranges: $state; $err";
	is($state, '08P01', 'a slot map with overlapping ranges is refused');
	like($err, qr/DETAIL:.*slot ranges 0-10000 and 5000-16383 overlap/,
		'... with a DETAIL saying so');
	$s->quit;
	$fake->stop;
}

# ---- 3d. a grant's count of holds out of the range of an int ----

{
	my $big = "*2\r\n:1\r\n:4294967297\r\n";
	my $fake = RlockTest::FakeRedis->new(EVALSHA => $big, EVAL => $big);
	my $s = session_at(fake_url($fake));
	my ($out, $err, $state) = RlockTest::run_sql($s, "SELECT rlock_try_acquire('bigcount', '1 minute')");
	note "a count of 4294967297: $out $state; $err";
	isnt($out, 't', 'a grant with a count of 4294967297 holds is not believed');
	is($state, '08P01', '... it is a protocol ERROR');
	like($err, qr/count of holds of 4294967297/, '... saying what was out of range');
	$s->quit;
	$fake->stop;
}

# ---- the server never restarted ----

RlockTest::set_gucs($node, 'rlock.redis_url' => $redis->url);
RlockTest::check_never_restarted($node, $log_start, $pm_pid);

done_testing();
