# Copyright (c) 2026, rlock developers
#
# A Redis blip is ridden out (SPEC 6): a call that is not a wait retries a
# refused connection for up to rlock.retry_timeout, with backoff, and
# succeeds once Redis is back.  Redis here persists (SHUTDOWN SAVE, then a
# start that loads dump.rdb), so the locks held before the restart are
# still held after it.  The calls are started while Redis is down (each in
# its own session, in the background), and only then is Redis started:
# each returns its answer, with no error and no warning.  A call while
# Redis stays down fails once rlock.retry_timeout has passed, with one
# message: the ERROR, no WARNING before it.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use RlockTest;

my $redis = RlockTest::Redis->new;
# (a long watchdog lease: the held locks outlive the restart's renewals)
my $node = RlockTest::new_node('ride', $redis,
	watchdog_timeout => '60s',
	extra_conf => "rlock.replica_acks = 0\n");

my $holder = $node->background_psql('postgres', on_error_stop => 0);
my ($out, $err, $st) = RlockTest::run_sql($holder,
	"SELECT rlock_acquire('rt_held'), rlock_acquire('rt_held'), "
	  . "rlock_acquire('rt_rel', '10 min'), rlock_acquire('rt_rel', '10 min')");
is("$out/$err", '|||/', 'a session holds rt_held and rt_rel, twice each');
my $me = RlockTest::holder_of($holder);
($out, $err) = RlockTest::run_sql($holder,
	"SELECT rlock_semaphore_set_permits('rt_sem', 2), rlock_latch_set_count('rt_latch', 2)");
is("$out/$err", 't|t/', 'a semaphore with 2 permits and a latch counting 2');

# The calls, each in a session of its own, all started while Redis is down.
# Their patience is long (the test never races the restart); their first
# attempts meet a refused connection.
my @calls = (
	[ 'reentrant acquire', $holder, "SELECT rlock_acquire('rt_held')", '' ],
	[ 'release', undef, undef, 't' ],
	[ 'try_acquire', undef, "SELECT rlock_try_acquire('rt_new', '10 min')", 't' ],
	[ 'acquire', undef, "SELECT rlock_acquire('rt_new2', '10 min')", '' ],
	[ 'semaphore try_acquire', undef,
		"SELECT rlock_semaphore_try_acquire('rt_sem', 1, '10 min')", 't' ],
	[ 'latch count_down', undef, "SELECT rlock_latch_count_down('rt_latch')", '1' ],
);
# the release is the holder's second session's: rt_rel2, held there
my $rel = $node->background_psql('postgres', on_error_stop => 0);
($out, $err) = RlockTest::run_sql($rel, "SELECT rlock_acquire('rt_rel2', '10 min')");
is("$out/$err", '/', 'another session holds rt_rel2');
$calls[1][1] = $rel;
$calls[1][2] = "SELECT rlock_release('rt_rel2')";
for my $c (@calls)
{
	$c->[1] //= $node->background_psql('postgres', on_error_stop => 0);
	my ($o, $e) = RlockTest::run_sql($c->[1],
		"SET rlock.retry_timeout = '1min'; SET rlock.connect_timeout = '1min'");
	is($e, '', "$c->[0]: its session may retry for a minute");
}

$redis->stop_save;
for my $c (@calls)
{
	RlockTest::start_bg($c->[1], $c->[2]);
}
# each call is running, and retrying (Redis refuses): its backend is active
my $probe = $node->background_psql('postgres', on_error_stop => 0);
ok( RlockTest::wait_until(
		sub {
			my ($n) = RlockTest::run_sql($probe,
				"SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
				  . "AND query LIKE 'SELECT rlock%' AND pid <> pg_backend_pid()");
			return ($n // 0) == scalar(@calls);
		},
		60),
	'every call is running while Redis is down');
ok(!RlockTest::bg_done($_->[1]), "$_->[0]: still waiting for Redis while it is down")
  for @calls;

$redis->start;
for my $c (@calls)
{
	ok(RlockTest::wait_until(sub { RlockTest::bg_done($c->[1]) }, 90),
		"$c->[0]: returns once Redis is back");
	my ($o, $e, $s) = RlockTest::bg_result($c->[1]);
	is("$o/$s", "$c->[3]/00000", "$c->[0]: succeeds") or diag($e);
	unlike($e, qr/WARNING|ERROR/, "$c->[0]: no warning, no error");
}

# the state is what the calls did, once each
is($redis->cli('HGET', 'rt_held', $me), '3', 'rt_held: held three times in Redis');
($out) = RlockTest::run_sql($holder, "SELECT rlock_hold_count('rt_held')");
is($out, '3', 'rt_held: the session counts three holds');
is($redis->cli('EXISTS', 'rt_rel2'), '0', 'rt_rel2: released');
($out) = RlockTest::run_sql($holder, "SELECT rlock_hold_count('rt_rel')");
is($out, '2', 'rt_rel: still held twice (the restart kept it)');
is($redis->cli('GET', 'rt_latch'), '1', 'the latch counts 1');
($out) = RlockTest::run_sql($holder, "SELECT rlock_semaphore_available('rt_sem')");
is($out, '1', 'the semaphore has 1 permit left');

# ---- Redis still loading its data: LOADING is retried ----

SKIP:
{
	# (Redis 6 cannot slow its loading down: no
	# loading-process-events-interval-bytes; bullseye's is 6.0)
	skip 'Redis before 7.0 cannot be kept loading long enough', 6
	  if RlockTest::redis_version() < 70000;
	# enough keys that loading them, slowed down, takes seconds
	$redis->eval(
		"for i = 1, tonumber(ARGV[1]) do redis.call('set', 'rt_pad:' .. i, i) end",
		[], 50000);
	$redis->stop_save;
	$redis->start(
		args => [ '--key-load-delay', '100',
			'--loading-process-events-interval-bytes', '1024' ],
		wait => 0);
	ok( RlockTest::wait_until(
			sub { ($redis->cli('PING') // '') =~ /LOADING/ }, 60),
		'Redis is loading its data (PING answers LOADING)');
	my $ls = $calls[3][1];
	RlockTest::start_bg($ls, "SELECT rlock_try_acquire('rt_loading', '10 min')");
	like($redis->cli('PING') // '', qr/LOADING/,
		'still loading after the call started: the call meets LOADING');
	ok(RlockTest::wait_until(sub { RlockTest::bg_done($ls) }, 120),
		'the call returns once Redis has loaded');
	($out, $err, $st) = RlockTest::bg_result($ls);
	is("$out/$st", 't/00000', 'the call started while Redis was loading succeeds')
	  or diag($err);
	unlike($err, qr/WARNING|ERROR/, 'no warning, no error');
	ok(RlockTest::wait_until(sub { ($redis->cli('PING') // '') =~ /PONG/ }, 60),
		'Redis has loaded');
}

# ---- Redis stays down: one ERROR, after rlock.retry_timeout ----

$redis->stop;
my $s = $calls[2][1];
RlockTest::run_sql($s, "RESET rlock.retry_timeout; RESET rlock.connect_timeout");
my $t0 = time();
($out, $err, $st) = RlockTest::run_sql($s, "SELECT rlock_try_acquire('rt_down')");
my $elapsed = time() - $t0;
note sprintf('rlock_try_acquire failed after %.3f s (rlock.retry_timeout 2 s)',
	$elapsed);
is($st, '08001', 'Redis down: SQLSTATE 08001');
like($err, qr/^(?:psql:\S+ )?ERROR:  could not connect to Redis at 127\.0\.0\.1:\d+ for lock "rt_down"/,
	'the message is the ERROR naming the lock');
my @msgs = $err =~ /\b(WARNING|ERROR|NOTICE):  /g;
is(scalar(@msgs), 1, 'exactly one message (no WARNING before the ERROR)')
  or diag($err);
cmp_ok($elapsed, '>=', 1.9, 'it retried for rlock.retry_timeout');
cmp_ok($elapsed, '<', 3, 'and failed within rlock.retry_timeout + 1 s');

# retry_timeout 0: no retry
RlockTest::run_sql($s, "SET rlock.retry_timeout = 0");
$t0 = time();
($out, $err, $st) = RlockTest::run_sql($s, "SELECT rlock_try_acquire('rt_down')");
$elapsed = time() - $t0;
is($st, '08001', 'rlock.retry_timeout = 0: SQLSTATE 08001');
note sprintf('without retries it failed after %.3f s', $elapsed);
cmp_ok($elapsed, '<', 1.5, 'without retries it fails at once');

# a release that cannot reach Redis: one message too (what it could not
# tell Redis is reconciled later, quietly at the abort)
RlockTest::run_sql($holder, "SET rlock.retry_timeout = 0");
($out, $err, $st) = RlockTest::run_sql($holder, "SELECT rlock_release('rt_rel')");
like($st, qr/^080(01|06)$/, "release while Redis is down: SQLSTATE $st");
@msgs = $err =~ /\b(WARNING|ERROR|NOTICE):  /g;
is(join(',', @msgs), 'ERROR', 'release while Redis is down: exactly one message, the ERROR')
  or diag($err);

$_->[1]->quit for @calls[1 .. $#calls];
$holder->quit;
$probe->quit;
$node->stop;
done_testing();
