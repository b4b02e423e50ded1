
# Copyright (c) 2026, rlock developers
#
# The wait events rlock's waits show in pg_stat_activity (SPEC 5.6, last
# point; base/wait_events.c).  On PostgreSQL 17 and later they are named:
#
#   RlockLock       a session blocked on a lock (rlock_acquire)
#   RlockSemaphore  a session waiting for a semaphore's permits
#   RlockLatch      a session awaiting a count-down latch
#   RlockRedis      a session waiting for Redis itself: here a round trip
#                   that a stalled link (RlockTest::Proxy) holds up, in a
#                   session whose lock wait ended in an ERROR before (the
#                   wait loop's event does not outlive it)
#
# and pg_wait_events lists the four.  Before 17 every one of them is the
# generic wait_event 'Extension' (wait_event_type 'Extension' on all), and
# the test checks that instead, so it runs everywhere.
#
# Before base/wait_events.c, PostgreSQL 17 showed one event, RlockAcquire,
# for all of them.  Each check polls (poll_query_until, generous limits):
# between its sleeps a waiter makes round trips (its attempts, the deadlock
# check), which show RlockRedis, so a single look could see either.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use RlockTest;

my $redis = RlockTest::Redis->new;
my $proxy = RlockTest::Proxy->new($redis);
my $node = RlockTest::new_node('waitevents', $proxy);

my $v17 = $node->safe_psql('postgres', 'SHOW server_version_num') >= 170000;
note $v17
  ? 'PostgreSQL 17 or later: named wait events'
  : 'before PostgreSQL 17: every rlock wait is Extension/Extension';

# the wait_event_type/wait_event a wait of rlock's shows on this server
sub shown
{
	my ($name) = @_;
	return 'Extension/' . ($v17 ? $name : 'Extension');
}

# a background session named $app (application_name)
sub session
{
	my ($app) = @_;
	my $s = $node->background_psql('postgres', on_error_stop => 0);
	$s->query_safe("SET application_name = '$app'");
	return $s;
}

# poll until session $app shows $want; true when it did
sub shows
{
	my ($app, $want) = @_;
	return $node->poll_query_until(
		'postgres',
		"SELECT coalesce(wait_event_type, '-') || '/' || coalesce(wait_event, '-')"
		  . " FROM pg_stat_activity WHERE application_name = '$app'",
		$want);
}

# wait (at most 60 s) for what start_bg started in $s; its (out, err, state)
sub finish
{
	my ($s) = @_;
	RlockTest::wait_until(sub { RlockTest::bg_done($s) }, 60)
	  or return ('', 'did not end within 60 s', 'timeout');
	return RlockTest::bg_result($s);
}

my $holder = session('we_holder');

# ---- a lock wait: RlockLock ----

is($holder->query_safe("SELECT rlock_try_acquire('we_x')"),
	't', 'the holder takes lock "we_x"');
my $locker = session('we_lock');
RlockTest::start_bg($locker, "SELECT rlock_acquire('we_x')");
ok(shows('we_lock', shown('RlockLock')),
	'a session blocked on a lock shows ' . shown('RlockLock'));
is($holder->query_safe("SELECT rlock_release('we_x')"),
	't', 'the holder releases "we_x"');
my ($out, $err, $state) = finish($locker);
is($state, '00000', 'the blocked session then acquires "we_x"')
  or diag $err;
is($locker->query_safe("SELECT rlock_release('we_x')"), 't',
	'... and releases it');

# ---- a semaphore wait: RlockSemaphore ----

is($holder->query_safe("SELECT rlock_semaphore_set_permits('we_s', 1)"),
	't', 'semaphore "we_s" has one permit');
$holder->query_safe("SELECT rlock_semaphore_acquire('we_s')");
my $sem = session('we_sem');
RlockTest::start_bg($sem, "SELECT rlock_semaphore_acquire('we_s')");
ok(shows('we_sem', shown('RlockSemaphore')),
	'a session waiting for permits shows ' . shown('RlockSemaphore'));
is($holder->query_safe("SELECT rlock_semaphore_release('we_s')"),
	't', 'the holder gives its permit back');
($out, $err, $state) = finish($sem);
is($state, '00000', 'the waiting session then takes the permit') or diag $err;
$sem->query_safe("SELECT rlock_semaphore_release('we_s')");

# ---- a latch's await: RlockLatch ----

is($holder->query_safe("SELECT rlock_latch_set_count('we_l', 1)"),
	't', 'latch "we_l" counts 1');
my $latch = session('we_latch');
RlockTest::start_bg($latch, "SELECT rlock_latch_await('we_l')");
ok(shows('we_latch', shown('RlockLatch')),
	'a session awaiting a latch shows ' . shown('RlockLatch'));
is($holder->query_safe("SELECT rlock_latch_count_down('we_l')"),
	'0', 'the latch is counted down to zero');
($out, $err, $state) = finish($latch);
is($state, '00000', 'the awaiting session then returns') or diag $err;
is($out, 't', '... true');

# ---- a Redis round trip held up by the link: RlockRedis ----

# The session's lock wait ends in an ERROR first (lock_timeout, in the
# wait's sleep): its next wait, a round trip, must not show the lock's.
is($holder->query_safe("SELECT rlock_try_acquire('we_x')"),
	't', 'the holder takes "we_x" again');
my $rt = session('we_redis');
($out, $err, $state) = RlockTest::run_sql($rt,
	"SET lock_timeout = '300ms'; SELECT rlock_acquire('we_x')");
is($state, '55P03', 'a lock wait ends on lock_timeout') or diag $err;
# (released before the stall: the worker's renewals stall too)
is($holder->query_safe("SELECT rlock_release('we_x')"),
	't', 'the holder releases "we_x"');
$rt->query_safe(
	"SET lock_timeout = 0; SET rlock.command_timeout = '60s'; "
	  . "SET rlock.connect_timeout = '60s'; SET rlock.retry_timeout = '60s'");

$proxy->stall;
RlockTest::start_bg($rt, "SELECT rlock_try_acquire('we_r')");
ok(shows('we_redis', shown('RlockRedis')),
	'a round trip the link holds up shows ' . shown('RlockRedis'));
$proxy->resume;
($out, $err, $state) = finish($rt);
is($state, '00000', 'once the link forwards again the round trip ends')
  or diag $err;
is($out, 't', '... and takes "we_r"');

# ---- PostgreSQL 17: the four are registered together ----

SKIP:
{
	skip 'pg_wait_events and named extension wait events arrive in 17', 1
	  unless $v17;
	is( $node->safe_psql(
			'postgres',
			"SELECT string_agg(name, ',' ORDER BY name) FROM pg_wait_events"
			  . " WHERE type = 'Extension' AND name LIKE 'Rlock%'"),
		'RlockLatch,RlockLock,RlockRedis,RlockSemaphore',
		'pg_wait_events lists RlockLatch, RlockLock, RlockRedis and RlockSemaphore'
	);
}

# (not checked: a long stall may have cost the lock its lease)
$rt->query("SELECT rlock_release('we_r')");
$_->quit for ($holder, $locker, $sem, $latch, $rt);
$node->stop;
done_testing();
