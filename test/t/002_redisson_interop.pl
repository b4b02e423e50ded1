# Copyright (c) 2026, rlock developers
#
# rlock and a Redisson client exclude each other on one Redis and wake each
# other's waiters.  The "Redisson client" here drives the lock protocol of
# PROTOCOL.md from redis-cli: the acquire and release scripts a Redisson
# RLock runs, with a holder of the form <client uuid>:<thread id>.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use RlockTest;

my $redis = RlockTest::Redis->new;
my $node = RlockTest::new_node('interop', $redis);

# Redisson's RLock scripts (RlockTest::Redisson), as a Java client runs them.
my $java = '6f1c2b9e-3d4a-4e5f-8a7b-9c0d1e2f3a4b:57';

sub java_acquire
{
	my ($name, $lease_ms) = @_;
	return RlockTest::Redisson::try_lock($redis, $name, $lease_ms, $java);
}

sub java_release
{
	my ($name) = @_;
	return RlockTest::Redisson::unlock($redis, $name, $java);
}

my $s = $node->background_psql('postgres', on_error_stop => 0);

sub q1
{
	my ($sql) = @_;
	my ($out, $err) = RlockTest::query_err($s, $sql);
	return $out;
}

# ---- a Redisson holder excludes rlock, and its release wakes rlock ----

is(java_acquire('orders', 30000), '', 'the Redisson client takes "orders"');
is(java_acquire('orders', 30000), '', '... twice (reentrant)');
is($redis->cli('HGET', 'orders', $java), '2', 'its hold count is 2');
is(q1("SELECT rlock_try_acquire('orders', '1 minute')"), 'f',
	'rlock cannot take a lock a Redisson client holds');
is(q1("SELECT kind, holder, hold_count FROM rlock_status('orders')"),
	"exclusive|$java|2", 'rlock_status shows the Redisson holder');

$s->query_until(qr/waiting\n/,
	"\\echo waiting\nSELECT rlock_acquire('orders', '1 minute'), (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;\n"
);
RlockTest::wait_for_rlock_waiters($node, 'postgres', 1,
	"%rlock_acquire('orders'%");
is(java_release('orders'), '0', 'Redisson releases one level');
usleep(300_000);
is($node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Extension' AND backend_type = 'client backend'"),
	'1', 'the rlock waiter still waits while Redisson holds a level');
my $t_rel = time();
is(java_release('orders'), '1', 'Redisson releases the last level (publishes 0)');
my $out = $s->query_until(qr/\|\d+\n/, '');
my ($t_acq) = $out =~ /\|(\d+)\n/;
my $latency_ms = ($t_acq / 1e6 - $t_rel) * 1000;
diag(sprintf('Redisson release -> rlock waiter acquired: %.2f ms', $latency_ms));
# without the message it would wait for its next recheck, up to 5 s
cmp_ok($latency_ms, '<', 3000,
	'the rlock waiter was woken by the release message (lease was 30 s)');
my $holder = q1('SELECT rlock_holder_id()');
is($redis->cli('HGET', 'orders', $holder), '1',
	'rlock holds it in Redisson\'s layout: hash field <uuid>:<pid> = 1');
my $pttl = $redis->cli('PTTL', 'orders');
ok($pttl > 50000 && $pttl <= 60000, "its lease is the key's TTL ($pttl ms)");

# ---- an rlock holder excludes Redisson, and rlock's release wakes it ----

my $j = java_acquire('orders', 30000);
like($j, qr/^\d+$/, "Redisson's acquire gets the holder's PTTL ($j ms)");
cmp_ok($j, '>', 50000, '... which is rlock\'s lease');

my ($sub, $subout) = $redis->cli_bg('SUBSCRIBE', 'redisson_lock__channel:{orders}');
ok(RlockTest::wait_until(sub { $sub->pump_nb; $$subout =~ /subscribe/ }, 10),
	'a Redisson-style waiter subscribes to the lock\'s channel');
is(q1("SELECT rlock_release('orders')"), 't', 'rlock releases');
ok(RlockTest::wait_until(sub { $sub->pump_nb; $$subout =~ /message\nredisson_lock__channel:\{orders\}\n0\n/ }, 10),
	'the release published "0" on redisson_lock__channel:{orders}');
$sub->kill_kill;
is(java_acquire('orders', 30000), '', 'now the Redisson client gets it');
is(java_release('orders'), '1', 'and releases it');

# ---- the release latch: a replayed release gets the first answer ----

is(q1("SELECT rlock_acquire('latched', '1 minute')"), '', 'rlock takes "latched"');
is(q1("SELECT rlock_release('latched')"), 't', 'and releases it');
my @latches = split /\n/, $redis->cli('KEYS', 'redisson_unlock_latch:{latched}:*');
is(scalar(@latches), 1, 'the release left one unlock latch');
like($latches[0], qr/^redisson_unlock_latch:\{latched\}:[0-9a-f]{32}$/,
	'named redisson_unlock_latch:{name}:<32 hex digits>');
is($redis->cli('GET', $latches[0]), '1', 'recording "released"');

# ---- names with a hash tag keep Redisson's key derivation ----

is(q1("SELECT rlock_acquire('{tenant}:job', '1 minute')"), '',
	'rlock takes a name that contains a hash tag');
($sub, $subout) = $redis->cli_bg('SUBSCRIBE', 'redisson_lock__channel:{tenant}:job');
ok(RlockTest::wait_until(sub { $sub->pump_nb; $$subout =~ /subscribe/ }, 10), 'subscribed');
is(q1("SELECT rlock_release('{tenant}:job')"), 't', 'releases it');
ok(RlockTest::wait_until(sub { $sub->pump_nb; $$subout =~ /message\nredisson_lock__channel:\{tenant\}:job\n0\n/ }, 10),
	'the channel of a name with "{" is redisson_lock__channel:<name>');
$sub->kill_kill;

# ---- a Redisson fixed-lease holder that never releases ----

is(java_acquire('expiring', 1200), '', 'Redisson holds "expiring" for 1.2 s');
my $t0 = time();
is(q1("SELECT rlock_acquire('expiring', '1 minute')"), '',
	'rlock waits for it');
my $waited = time() - $t0;
# not before the lease ran out; and at its end, not at a 5 s recheck
note sprintf('rlock got it after %.2f s (lease 1.2 s)', $waited);
ok($waited > 0.8 && $waited < 4.5, 'and gets it when the lease runs out');
is(q1("SELECT rlock_release('expiring')"), 't', 'released');

$s->quit;
done_testing();
