# Copyright (c) 2026, rlock developers
#
# Faults of the link between PostgreSQL and Redis, made with a TCP proxy
# (RlockTest::Proxy) while Redis itself keeps running: a link that stalls
# (a silent partition) makes a call fail with SQLSTATE 08006 within
# rlock.command_timeout instead of hanging, and the next call after the link
# is back works; a command that ran but whose reply was lost leaves no hold
# behind; a cut connection is replaced by the next call without an error,
# and locks held across the cut stay held; a refused connection is 08001; a
# lock without a lease outlives a short partition.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use RlockTest;

my $redis = RlockTest::Redis->new;
my $proxy = RlockTest::Proxy->new($redis);
# Locks without a lease get 15 s, renewed every 5 s, so that the partition
# of the last part (6 s) makes a renewal fail and is still far shorter than
# the lease.  The watchdog's own round trips time out after 500 ms.
# Acquisitions do not wait for replicas (this Redis has none), so that a
# new connection needs no round trip before its first command (ROLE, which
# learns the replica count): the faults below hit the command itself.
my $node = RlockTest::new_node('link', $proxy, watchdog_timeout => '15s',
	extra_conf => "rlock.command_timeout = '500ms'\nrlock.replica_acks = 0\n");
my $s = $node->background_psql('postgres', on_error_stop => 0);
my $other = $node->background_psql('postgres', on_error_stop => 0);


# Generous bound on a call that must fail within command_timeout (300 ms):
# well under the 5 s and more a hanging call would take, with room for a
# loaded machine.
my $BOUND = 3.0;

my ($out, $err, $state, $t0, $elapsed);

is($node->safe_psql('postgres', "SHOW rlock.redis_url"), $proxy->url,
	'the node reaches Redis through the proxy');
RlockTest::run_sql($s, "SET rlock.command_timeout = '300ms'");
RlockTest::run_sql($s, "SET rlock.connect_timeout = '500ms'");
($out, $err) = RlockTest::run_sql($s, 'SELECT rlock_ping() IS NOT NULL');
is("$out/$err", 't/', 'rlock_ping works through the proxy');

# ---- a stalled link: a silent partition ----

($out, $err) = RlockTest::run_sql($s, "SELECT rlock_acquire('kept', '1 minute')");
is($err, '', 'a lock is taken before the partition');
$proxy->stall;

$t0 = time();
($out, $err, $state) = RlockTest::run_sql($s, 'SELECT rlock_ping()');
$elapsed = time() - $t0;
is($state, '08006', 'stalled link: rlock_ping fails with SQLSTATE 08006');
like($err, qr/ERROR:  Redis at 127\.0\.0\.1:\d+ did not answer in time/,
	'the error says Redis did not answer in time');
like($err, qr/within rlock\.command_timeout \(300 ms\)/,
	'the detail names rlock.command_timeout');
note sprintf('rlock_ping failed after %.3f s', $elapsed);
cmp_ok($elapsed, '<', $BOUND, 'within command_timeout, not hanging');

$t0 = time();
($out, $err, $state) = RlockTest::run_sql($s, "SELECT rlock_try_acquire('x', '10s')");
$elapsed = time() - $t0;
is($state, '08006', 'stalled link: rlock_try_acquire fails with SQLSTATE 08006');
like($err, qr/ERROR:  Redis at 127\.0\.0\.1:\d+ did not answer in time for lock "x"/,
	'the error names the lock');
note sprintf('rlock_try_acquire failed after %.3f s', $elapsed);
cmp_ok($elapsed, '<', $BOUND, 'within command_timeout, not hanging');

($out, $err, $state) = RlockTest::run_sql($s, 'SELECT 40 + 2');
is("$out/$err", '42/', 'the session stays usable during the partition');

$proxy->resume;
($out, $err, $state) = RlockTest::run_sql($s, 'SELECT rlock_ping() IS NOT NULL');
# (the acquire of "x" and the clean-up after it were held, not dropped:
# they reach Redis now, in an order nothing guarantees, so "x" may be held
# by this session's holder id until its 10 s lease ends)
is("$out/$err", 't/', 'after the link is back, the next call works');
($out, $err) = RlockTest::run_sql($s,
	"SELECT rlock_try_acquire('y', '10s'), rlock_hold_count('y'), rlock_release('y')");
is("$out/$err", 't|1|t/', 'and locks work again');
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_hold_count('kept')");
is("$out/$err", '1/', 'the lock taken before the partition is still held');

# ---- replies lost: the command ran, its answer never came ----

# Redis reports every change of the key on its keyspace channel.
$redis->cli('CONFIG', 'SET', 'notify-keyspace-events', 'KA');
my ($events, $evout) = $redis->cli_bg('SUBSCRIBE', '__keyspace@0__:unanswered');
ok(RlockTest::wait_until(sub { $events->pump_nb; $$evout =~ /subscribe/ }, 10),
	'a client watches the key of lock "unanswered"');
$proxy->stall_replies;
$t0 = time();
($out, $err, $state) = RlockTest::run_sql($s, "SELECT rlock_try_acquire('unanswered', '1 minute')");
$elapsed = time() - $t0;
is($state, '08006', 'replies held: SQLSTATE 08006');
like($err, qr/did not answer in time for lock "unanswered"/, 'Redis did not answer in time');
note sprintf('failed after %.3f s', $elapsed);
cmp_ok($elapsed, '<', $BOUND, 'within command_timeout, not hanging');
ok( RlockTest::wait_until(
		sub { $events->pump_nb; $$evout =~ /\bhincrby\b.*\bdel\b/s }, 10),
	'the acquire did run in Redis (hincrby), and the failed call took it back (del)');
$events->kill_kill;
is($redis->cli('EXISTS', 'unanswered'), '0', 'nothing is left in Redis');
$proxy->resume;
($out, $err) = RlockTest::run_sql($s,
	"SELECT rlock_is_held('unanswered'), rlock_hold_count('unanswered'), rlock_is_locked('unanswered')");
is("$out/$err", 'f|0|f/', 'the session holds nothing after the link is back');
($out, $err) = RlockTest::run_sql($other, "SELECT rlock_try_acquire('unanswered', '1 minute'), rlock_release('unanswered')");
is("$out/$err", 't|t/', 'another session takes that lock at once');

# ---- a cut connection ----

for my $how ('FIN', 'RST')
{
	# both sessions are connected and idle
	RlockTest::run_sql($_, 'SELECT rlock_ping()') for $s, $other;
	my $closed = $proxy->cut(reset => $how eq 'RST');
	cmp_ok($closed, '>=', 2, "cut ($how) closed $closed connections");
	($out, $err, $state) = RlockTest::run_sql($s,
		"SELECT rlock_try_acquire('after_cut', '10s'), rlock_release('after_cut')");
	is("$out/$err", 't|t/',
		"cut ($how): an idle session's next call reconnects by itself, without an error");
	($out, $err) = RlockTest::run_sql($other, "SELECT rlock_try_acquire('kept', '1 minute')");
	is("$out/$err", 'f/', "cut ($how): the lock held across the cut stays held");
}
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_release('kept')");
is("$out/$err", 't/', 'and its holder releases it, without a warning');

# ---- a waiter whose connections are cut ----

RlockTest::run_sql($other, "SELECT rlock_acquire('w', '1 minute')");
$s->query_until(qr/waiting\n/,
	"\\echo waiting\nSELECT rlock_acquire('w', '1 minute');\n\\echo sqlstate=:SQLSTATE\n");
RlockTest::wait_for_rlock_waiters($node, 'postgres', 1, "%rlock_acquire('w'%");
$proxy->cut;
usleep(300_000);
$t0 = time();
RlockTest::run_sql($other, "SELECT rlock_release('w')");
my $done = RlockTest::wait_until(
	sub { $s->{run}->pump_nb; $s->{stdout} =~ /sqlstate=\w+/ }, 20);
$elapsed = time() - $t0;
my ($wstate) = $s->{stdout} =~ /sqlstate=(\w+)/;
note sprintf('the waiter returned %.3f s after the release', $elapsed);
is($wstate, '00000', 'a waiter whose connections were cut gets the lock when it is released')
  or diag("waiter: $s->{stdout} / $s->{stderr}");
# the waiter subscribed again: without the release message it would only
# notice at its next recheck, 5 s later
cmp_ok($elapsed, '<', $BOUND, 'woken by the release message, not by a recheck');
$s->{stdout} = $s->{stderr} = '';
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_hold_count('w'), rlock_release('w')");
is("$out/$err", '1|t/', 'it holds the lock once and releases it');

# ---- refused connections ----

$proxy->refuse;
$proxy->cut;
# (a refused connection is retried for rlock.retry_timeout, SPEC 6: 058)
RlockTest::run_sql($s, "SET rlock.retry_timeout = '200ms'");
$t0 = time();
($out, $err, $state) = RlockTest::run_sql($s, "SELECT rlock_try_acquire('refused', '10s')");
$elapsed = time() - $t0;
is($state, '08001', 'connection refused: SQLSTATE 08001');
like($err, qr/ERROR:  could not connect to Redis at 127\.0\.0\.1:\d+ for lock "refused"/,
	'the error says it could not connect');
note sprintf('failed after %.3f s', $elapsed);
cmp_ok($elapsed, '<', $BOUND, 'once rlock.retry_timeout has passed');
RlockTest::run_sql($s, "RESET rlock.retry_timeout");
$proxy->accept;
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_try_acquire('refused', '10s'), rlock_release('refused')");
is("$out/$err", 't|t/', 'once connections are accepted again, the next call works');

# ---- a lock without a lease outlives a partition shorter than its lease ----

($out, $err) = RlockTest::run_sql($s, "SELECT rlock_acquire('nolease')");
my $holder = RlockTest::holder_of($s);
my $failures0 = $node->safe_psql('postgres', 'SELECT renewal_failures FROM rlock_stats');
$proxy->stall;
# longer than a renewal period and the watchdog's command_timeout (5.5 s),
# far shorter than the lease (15 s)
sleep(6);
$proxy->resume;
my $resumed = $node->safe_psql('postgres', 'SELECT now()');
ok( RlockTest::wait_until(
		sub {
			$node->safe_psql('postgres',
				"SELECT count(*) FROM rlock_locks WHERE name = 'nolease' AND renewed_at > '$resumed'"
			) eq '1';
		},
		30),
	'after the partition the watchdog renews the lock again');
note 'renewals that failed during the partition: '
  . ($node->safe_psql('postgres', 'SELECT renewal_failures FROM rlock_stats') - $failures0);
is($redis->cli('HGET', 'nolease', $holder), '1', 'it is still held in Redis');
is($node->safe_psql('postgres', "SELECT state FROM rlock_locks WHERE name = 'nolease'"),
	'held', 'and rlock_locks says held');
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_release('nolease')");
is("$out/$err", 't/', 'its holder releases it');

$s->quit;
$other->quit;
$node->stop;
$proxy->stop;
$redis->stop;
done_testing();
