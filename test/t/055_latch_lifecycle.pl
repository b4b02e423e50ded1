# Copyright (c) 2026, rlock developers
#
# The lifecycle of latches and semaphores (SPEC.md 5.5, "Lifecycle"):
#  - rlock_latch_set_count's expiry: a latch that never reaches zero
#    disappears (count and marker) after it, instead of staying in Redis
#    forever;
#  - rlock_latch_delete wakes the sessions awaiting the latch: "0" on its
#    channel, as Redisson's delete publishes, and they return true;
#  - rlock_semaphore_delete wakes the semaphore's waiters (they look again
#    and wait on, for permits set anew) and its holders find their permits
#    lost (the worker's renewal marks them, a release warns).
# (Refusing what is not their kind, must_exist and privileges: regress
# latch_lifecycle.)
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use RlockTest;

my $redis = RlockTest::Redis->new;
my $node = RlockTest::new_node('lifecycle', $redis,
	extra_conf => "rlock.watchdog_timeout = '3s'\n");
my $admin = $node->background_psql('postgres', on_error_stop => 0);
my $w1 = $node->background_psql('postgres', on_error_stop => 0);
my $w2 = $node->background_psql('postgres', on_error_stop => 0);

sub q1
{
	my ($s, $sql) = @_;
	my ($o, $e, $state) = RlockTest::run_sql($s, $sql);
	is($state, '00000', "runs: $sql") or diag($e);
	return $o;
}

# a redis-cli subscribed to a channel: what it has received so far
sub subscriber
{
	my ($channel) = @_;
	my ($h, $out) = $redis->cli_bg('SUBSCRIBE', $channel);
	ok(RlockTest::wait_until(sub { $h->pump_nb; $$out =~ /^1$/m }, 30),
		"a client subscribes to $channel");
	return ($h, $out);
}

# ---- expiry: an unfinished latch disappears ----

is(q1($admin, "SELECT rlock_latch_set_count('le_exp', 3, '2 s')"), 't',
	'a latch of 3 that expires after 2 s');
is(q1($admin, "SELECT rlock_latch_count_down('le_exp')"), '2',
	'counted down once (never to zero)');
is($redis->cli('EXISTS', 'le_exp', '{le_exp}:rlock_latch'), '2',
	'its count and marker are in Redis');
my $t0 = time();
ok(RlockTest::wait_until(
		sub { $redis->cli('EXISTS', 'le_exp', '{le_exp}:rlock_latch') eq '0' }, 60),
	'the unfinished latch disappears, count and marker');
note sprintf('gone %.2f s after the check', time() - $t0);
is(q1($admin, "SELECT rlock_latch_count('le_exp')"), '0', 'it reads as absent');
my ($o, $e, $st) = RlockTest::run_sql($admin,
	"SELECT rlock_latch_await('le_exp', '0', must_exist => true)");
is($st, '55000', 'awaiting it with must_exist: absent is not done');
# a latch without an expiry keeps none
is(q1($admin, "SELECT rlock_latch_set_count('le_keep', 3)"), 't',
	'a latch without expiry');
is($redis->cli('PTTL', 'le_keep'), '-1', 'it has no expiry in Redis');

# ---- delete wakes a latch's waiters ----

is(q1($admin, "SELECT rlock_latch_set_count('le_del', 5)"), 't', 'a latch of 5');
my ($sub, $msgs) = subscriber('redisson_countdownlatch__channel__{le_del}');
RlockTest::start_bg($w1, "SELECT rlock_latch_await('le_del', '5 min')");
RlockTest::start_bg($w2, "SELECT rlock_latch_await('le_del')");
RlockTest::wait_for_rlock_waiters($node, 'postgres', 2, '%le_del%');
ok(!RlockTest::bg_done($w1) && !RlockTest::bg_done($w2),
	'two sessions await the latch');
$t0 = time();
is(q1($admin, "SELECT rlock_latch_delete('le_del')"), 't',
	'the latch is deleted (it existed)');
ok(RlockTest::wait_until(sub { $sub->pump_nb; $$msgs =~ /^0$/m }, 30),
	'delete published "0" on the latch channel');
ok(RlockTest::wait_until(sub { RlockTest::bg_done($w1) && RlockTest::bg_done($w2) }, 60),
	'both waiters return');
note sprintf('the waiters returned %.2f s after the delete', time() - $t0);
($o, $e, $st) = RlockTest::bg_result($w1);
is("$o/$st", 't/00000', 'the waiter with a wait returns true') or diag($e);
($o, $e, $st) = RlockTest::bg_result($w2);
is("$o/$st", 't/00000', 'the waiter without a limit returns true') or diag($e);
$sub->kill_kill;
is($redis->cli('EXISTS', 'le_del', '{le_del}:rlock_latch'), '0',
	'count and marker are gone');

# ---- delete of a semaphore: waiters wake, holders lose their permits ----

is(q1($admin, "SELECT rlock_semaphore_set_permits('le_sem', 1)"), 't',
	'a semaphore of 1 permit');
# the holder's permit is renewed by the worker (NULL lease)
q1($w1, "SELECT rlock_semaphore_acquire('le_sem')");
($sub, $msgs) = subscriber('redisson_sc:{le_sem}');
RlockTest::start_bg($w2, "SELECT rlock_semaphore_acquire('le_sem', 1, '10 min')");
RlockTest::wait_for_rlock_waiters($node, 'postgres', 1, '%le_sem%');
is(q1($admin, "SELECT rlock_semaphore_delete('le_sem')"), 't',
	'the semaphore is deleted (it existed)');
ok(RlockTest::wait_until(sub { $sub->pump_nb; $$msgs =~ /^0$/m }, 30),
	'delete published on the semaphore channel');
$sub->kill_kill;
is($redis->cli('EXISTS', 'le_sem', '{le_sem}:timeout', '{le_sem}:rlock_semaphore'),
	'0', 'its permits, permits out and marker are gone');
ok(RlockTest::wait_until(sub {
			$node->safe_psql('postgres',
				"SELECT string_agg(state, ',') FROM rlock_locks WHERE name = 'le_sem'")
			  eq 'lost' }, 90),
	"the holder's permit is reported lost by the worker");
ok(!RlockTest::bg_done($w2), 'the waiter still waits (no permits now)');
($o, $e, $st) = RlockTest::run_sql($w1, "SELECT rlock_semaphore_release('le_sem')");
is("$o/$st", 'f/00000', "the holder's release returns false");
like($e, qr/WARNING:.*semaphore "le_sem"/, 'and warns that the permit was lost');
# set anew, the waiter takes its permit
is(q1($admin, "SELECT rlock_semaphore_set_permits('le_sem', 1)"), 't',
	'the semaphore is set again');
ok(RlockTest::wait_until(sub { RlockTest::bg_done($w2) }, 60),
	'the waiter returns');
($o, $e, $st) = RlockTest::bg_result($w2);
is($st, '00000', 'with the permit') or diag($e);
is(q1($w2, "SELECT rlock_semaphore_release('le_sem')"), 't', 'and gives it back');

$_->quit for ($admin, $w1, $w2);
$node->stop;
$redis->stop;
done_testing();
