# Copyright (c) 2026, rlock developers
#
# Semaphores and count-down latches across sessions and with a Java client
# (Redisson's RPermitExpirableSemaphore and RCountDownLatch, played at the
# protocol level with redis-cli: what its scripts write and publish).  A
# session killed with SIGKILL while holding permits loses them within their
# lease (rlock.watchdog_timeout is 2 s here), never for good; so does a
# whole server stopped (immediate) while sessions hold permits.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use RlockTest;

my $redis = RlockTest::Redis->new;
my $node = RlockTest::new_node('sem', $redis,
	extra_conf => "restart_after_crash = on\n");

sub q1
{
	my ($s, $sql) = @_;
	my ($out, $err) = RlockTest::query_err($s, $sql);
	return $out;
}

sub epoch_ms { return int(time() * 1000); }

my $a = $node->background_psql('postgres', on_error_stop => 0);
my $b = $node->background_psql('postgres', on_error_stop => 0);
my $a_pid = q1($a, 'SELECT pg_backend_pid()');

# ---- a semaphore shared with a Java client ----

is(q1($a, "SELECT rlock_semaphore_set_permits('exports', 3)"), 't',
	'three permits set');
is($redis->cli('GET', 'exports'), '3', 'in the permits key, as Redisson keeps them');
q1($a, "SELECT rlock_semaphore_acquire('exports', 2)");
is($redis->cli('ZCARD', '{exports}:timeout'), '2',
	'two permit ids out in {exports}:timeout');

# the Java client takes the last permit (its acquire script's effect)
my $java_id = '0123456789abcdef0123456789abcdef';
$redis->cli('DECRBY', 'exports', '1');
$redis->cli('ZADD', '{exports}:timeout', epoch_ms() + 60000, $java_id);
is(q1($b, "SELECT rlock_semaphore_available('exports')"), '0',
	'none left once the Java client holds one');
is(q1($b, "SELECT rlock_semaphore_try_acquire('exports', 1, '1 minute')"), 'f',
	'so a try from SQL fails');

# a waiter from SQL, woken by the Java client's release
RlockTest::start_bg($b,
	"SET lock_timeout = '20s'; SELECT rlock_semaphore_acquire('exports', 1, '1 minute')");
ok(RlockTest::wait_until(sub {
		$node->safe_psql('postgres',
			"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Extension' AND query LIKE '%rlock_semaphore_acquire%'") eq '1' }, 20),
	'the SQL waiter waits (an Extension wait)');
$redis->cli('ZREM', '{exports}:timeout', $java_id);
my $avail = $redis->cli('INCRBY', 'exports', '1');
$redis->cli('PUBLISH', 'redisson_sc:{exports}', $avail);
ok(RlockTest::wait_until(sub { RlockTest::bg_done($b) }, 20),
	'the Java release wakes it');
my ($out, $err, $st) = RlockTest::bg_result($b);
is($st, '00000', 'and it has the permit') or diag($err);
is(q1($b, "SELECT rlock_semaphore_release('exports')"), 't', 'given back');

# ---- SIGKILL of a session holding permits (NULL lease) ----

is(q1($a, "SELECT hold_count FROM rlock_locks WHERE name = 'exports'"), '2',
	'the session holds two permits');
kill 'KILL', $a_pid;
my $t0 = time();
ok( RlockTest::wait_until(sub {
		my ($rc) = $node->psql('postgres', 'SELECT 1');
		return $rc == 0; }, 60),
	'the server restarts after the SIGKILL');
my $c = $node->background_psql('postgres', on_error_stop => 0);
# nobody renews the killed session's permits: they come back when their
# lease (2 s) runs out, to whoever asks (a waiter sleeps no longer than
# the soonest expiry of a permit out)
my ($got, $kerr) = RlockTest::query_err($c,
	"SET lock_timeout = '10s'; SELECT rlock_semaphore_acquire('exports', 3, '1 minute'); RESET lock_timeout;");
is("$got/$kerr", '/', 'all three permits can be taken again within the lease + margin');
note sprintf('%.2f s after the kill (which restarted the server)', time() - $t0);
is(q1($c, "SELECT rlock_semaphore_release('exports', 3)"), 't', 'and given back');
is($redis->cli('GET', 'exports'), '3', 'three permits available again');

# ---- permits Redis dropped: the LOG line, the WARNING ----

my $log_offset = -s $node->logfile;
q1($c, "SELECT rlock_semaphore_set_permits('dropped', 2)");
q1($c, "SELECT rlock_semaphore_acquire('dropped', 2)");
$redis->cli('DEL', '{dropped}:timeout');
ok( RlockTest::wait_until(sub {
		RlockTest::log_has($node, $log_offset,
			qr/rlock watchdog: permits of semaphore "dropped" held by [^ ]+ \(pid \d+\) were lost/) }, 20),
	'the watchdog logs the permits Redis dropped as lost');
is(q1($c, "SELECT state FROM rlock_locks WHERE name = 'dropped'"), 'lost',
	'rlock_locks shows them lost');
($got, $kerr) = RlockTest::query_err($c, "SELECT rlock_semaphore_release('dropped', 2)");
is($got, 'f', 'the release returns false');
like($kerr, qr/WARNING:  permits of semaphore "dropped" were lost before this session gave them back/,
	'with a WARNING');

# ---- the whole server stopped while holding permits ----

q1($c, "SELECT rlock_semaphore_acquire('exports', 2)");
q1($c, "BEGIN; SELECT rlock_semaphore_xact_acquire('exports', 1)");
is($redis->cli('GET', 'exports'), '0', 'all three permits out (two session, one transaction)');
$b->quit;
$c->quit;
$t0 = time();
$node->stop('immediate');
$node->start;
$c = $node->background_psql('postgres', on_error_stop => 0);
($got, $kerr) = RlockTest::query_err($c,
	"SET lock_timeout = '10s'; SELECT rlock_semaphore_acquire('exports', 3, '1 minute'); RESET lock_timeout;");
is("$got/$kerr", '/', 'after an immediate stop and a start, the permits come back within their lease');
note sprintf('%.2f s after the stop began (the stop and start included)', time() - $t0);
is(q1($c, "SELECT rlock_semaphore_release('exports', 3)"), 't', 'and are given back');

# ---- a latch shared with a Java client ----

$b = $node->background_psql('postgres', on_error_stop => 0);
is(q1($c, "SELECT rlock_latch_set_count('loads', 2)"), 't', 'a latch of 2');
RlockTest::start_bg($b, "SELECT rlock_latch_await('loads', '30 s')");
ok(RlockTest::wait_until(sub {
		$redis->cli('PUBSUB', 'NUMSUB', 'redisson_countdownlatch__channel__{loads}') =~ /\n1$/ }, 20),
	'the awaiting session listens on the latch channel');
is(q1($c, "SELECT rlock_latch_count_down('loads')"), '1', 'counted down once from SQL');
# the Java client counts down the last one (its countDown's effect)
is($redis->cli('DECR', 'loads'), '0', 'and once from Java');
$redis->cli('DEL', 'loads');
$redis->cli('PUBLISH', 'redisson_countdownlatch__channel__{loads}', '0');
ok(RlockTest::wait_until(sub { RlockTest::bg_done($b) }, 20),
	'the Java count-down to zero wakes the await');
($out, $err, $st) = RlockTest::bg_result($b);
is("$out/$st", 't/00000', 'which returns true') or diag($err);

# and the other way: Java's await (subscribed) is told "0" by SQL
my ($sub, $subout) = $redis->cli_bg('SUBSCRIBE', 'redisson_countdownlatch__channel__{loads}');
ok(RlockTest::wait_until(sub { $sub->pump_nb; $$subout =~ /subscribe/ }, 10),
	'a Java waiter subscribed');
q1($c, "SELECT rlock_latch_set_count('loads', 1)");
q1($c, "SELECT rlock_latch_count_down('loads')");
ok(RlockTest::wait_until(sub { $sub->pump_nb;
		$$subout =~ /message\nredisson_countdownlatch__channel__\{loads\}\n1\n.*message\nredisson_countdownlatch__channel__\{loads\}\n0\n/s }, 10),
	'it hears "1" (a new count) and then "0" (zero reached)')
  or diag($$subout);
$sub->kill_kill;

$b->quit;
$c->quit;
done_testing();
