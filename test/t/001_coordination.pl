# Copyright (c) 2026, rlock developers
#
# Locks coordinate sessions across databases and across PostgreSQL servers
# sharing one Redis; a blocked acquire is woken by the release message
# within milliseconds; a backend's locks go when it is terminated; a holder
# that died without releasing is noticed when its lease runs out.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Digest::SHA ();
use Test::More;
use Time::HiRes qw(time usleep);

use RlockTest;

my $redis = RlockTest::Redis->new;
my $node1 = RlockTest::new_node('first', $redis,
	dbs => [ 'postgres', 'billing', 'reporting' ]);
my $node2 = RlockTest::new_node('second', $redis, dbs => ['postgres']);

my $billing = $node1->background_psql('billing', on_error_stop => 0);
my $reporting = $node1->background_psql('reporting', on_error_stop => 0);
my $remote = $node2->background_psql('postgres', on_error_stop => 0);

sub q1
{
	my ($s, $sql) = @_;
	my ($out, $err) = RlockTest::query_err($s, $sql);
	return $out;
}

# ---- exclusion across databases and servers ----

is(q1($billing, "SELECT rlock_try_acquire('nightly', '1 minute')"),
	't', 'a session in database billing takes the lock');
is(q1($reporting, "SELECT rlock_try_acquire('nightly', '1 minute')"),
	'f', 'a session in database reporting is excluded');
is(q1($remote, "SELECT rlock_try_acquire('nightly', '1 minute')"),
	'f', 'a session on a second PostgreSQL server is excluded');
is(q1($remote, "SELECT rlock_is_locked('nightly'), rlock_is_held('nightly')"),
	't|f', 'the second server sees the lock as taken by someone else');

my $h1 = q1($billing, 'SELECT rlock_holder_id()');
my $h2 = q1($remote, 'SELECT rlock_holder_id()');
my ($u1) = $h1 =~ /^([0-9a-f-]{36}):\d+$/;
my ($u2) = $h2 =~ /^([0-9a-f-]{36}):\d+$/;
ok(defined $u1 && defined $u2 && $u1 ne $u2,
	'the two servers have different instance identities');
is($redis->cli('HGET', 'nightly', $h1), '1',
	'Redis holds the lock as a hash: holder -> count');
is(q1($reporting, "SELECT holder FROM rlock_status('nightly')"),
	$h1, 'rlock_status names the holder in another database');

is(q1($billing, "SELECT rlock_release('nightly')"), 't', 'billing releases');
is(q1($remote, "SELECT rlock_try_acquire('nightly', '1 minute')"),
	't', 'now the second server gets it');
is(q1($remote, "SELECT rlock_release('nightly')"), 't', 'and releases it');

# ---- hand-off: a blocked waiter is woken by the release message ----

# The holder's lease is a minute and a waiter never sleeps more than 5 s
# between attempts without a message: twenty wake-ups each within 3 s (a
# margin for a loaded machine; they take milliseconds) can only come from
# the release messages.
my @latencies;
for my $i (1 .. 20)
{
	my ($holder, $waiter, $wnode) =
	  $i % 2 ? ($billing, $remote, $node2) : ($remote, $reporting, $node1);
	is(q1($holder, "SELECT rlock_try_acquire('handoff', '1 minute')"),
		't', "hand-off $i: holder takes the lock")
	  or last;
	$waiter->query_until(qr/waiting\n/,
		"\\echo waiting\nSELECT rlock_acquire('handoff', '1 minute'), (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;\n"
	);
	RlockTest::wait_for_rlock_waiters($wnode,
		$wnode == $node1 ? 'reporting' : 'postgres',
		1, "%rlock_acquire('handoff'%");
	my $t_release = q1($holder,
		"SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, rlock_release('handoff')"
	);
	my $out = $waiter->query_until(qr/\|\d+\n/, '');
	my ($t_acq) = $out =~ /\|(\d+)\n/;
	my ($t_rel) = $t_release =~ /^(\d+)\|t$/;
	ok(defined $t_acq && defined $t_rel, "hand-off $i: both times read")
	  or last;
	push @latencies, ($t_acq - $t_rel) / 1000.0;
	is(q1($waiter, "SELECT rlock_release('handoff')"),
		't', "hand-off $i: waiter held the lock and releases it");
}
my @sorted = sort { $a <=> $b } @latencies;
my $median = $sorted[ int(@sorted / 2) ];
my $max = $sorted[-1];
diag(sprintf("hand-off latency over %d runs (release start to waiter's acquire return): median %.2f ms, max %.2f ms",
		scalar(@sorted), $median, $max));
cmp_ok($max, '<', 3000,
	'every waiter was woken by the release message, not by a poll');

# ---- a blocked waiter shows as an Extension wait in pg_stat_activity ----

is(q1($billing, "SELECT rlock_try_acquire('visible', '1 minute')"), 't',
	'holder takes lock "visible"');
$reporting->query_until(qr/waiting\n/,
	"\\echo waiting\nSELECT rlock_acquire('visible', '1 minute');\n");
RlockTest::wait_for_rlock_waiters($node1, 'reporting', 1,
	"%rlock_acquire('visible'%");
# (polled: between its sleeps the waiter's round trips show RlockRedis)
my $visible_event = $node1->safe_psql('postgres', 'SHOW server_version_num') >= 170000
	? 'Extension/RlockLock'
	: 'Extension/Extension';
ok( $node1->poll_query_until(
		'postgres',
		"SELECT wait_event_type || '/' || wait_event FROM pg_stat_activity WHERE query LIKE '%rlock_acquire(''visible''%' AND pid <> pg_backend_pid()",
		$visible_event),
	'the waiter is shown waiting on rlock\'s wait event (named RlockLock from PostgreSQL 17)');

# ---- terminating a holding backend frees its locks at once ----

# billing holds "visible" (and now a second lock); reporting waits for it
is(q1($billing, "SELECT rlock_acquire('term2', '1 minute')"), '',
	'billing takes a second lock');
my $billing_pid = q1($billing, 'SELECT pg_backend_pid()');
my $t0 = time();
$node1->safe_psql('postgres', "SELECT pg_terminate_backend($billing_pid)");
my $out = $reporting->query_until(qr/\n/, '');
my $waited = time() - $t0;
note sprintf('the waiter got the lock %.3f s after the holder was terminated', $waited);
cmp_ok($waited, '<', 10,
	'the terminated holder\'s lock was freed at once, not when its lease (1 minute) ran out');
ok(RlockTest::wait_until(sub { $redis->cli('EXISTS', 'term2') eq '0' }, 10),
	'the terminated backend\'s other lock is gone from Redis');
is(q1($reporting, "SELECT rlock_hold_count('visible'), rlock_release('visible')"),
	'1|t', 'the waiter holds "visible" once');
$billing->quit;

# ---- a holder that died without releasing: the lease is the backstop ----

# Another client (here redis-cli) holds the lock for 1.5 s and never
# releases it nor publishes anything.
$redis->cli('HSET', 'orphan', '11111111-2222-4333-8444-555555555555:7', '1');
$redis->cli('PEXPIRE', 'orphan', '1500');
$t0 = time();
is(q1($remote, "SELECT rlock_acquire('orphan', '1 minute')"), '',
	'a waiter on a lock whose holder died gets it');
my $elapsed = time() - $t0;
# not before the lease ran out; and at its end, not at the waiter's next
# 5 s recheck
note sprintf('the waiter got it after %.2f s (lease 1.5 s)', $elapsed);
ok($elapsed > 1.0 && $elapsed < 4.5, '... when the lease ran out');
is(q1($remote, "SELECT rlock_release('orphan')"), 't', 'and releases it');

# ---- session end releases session locks; owner locks outlive the session ----

my $s = $node1->background_psql('billing', on_error_stop => 0);
q1($s, "SELECT rlock_acquire('bye', '1 minute'), rlock_acquire('bye', '1 minute'), rlock_acquire('handed', '1 minute', owner => 'job-42')");
$s->quit;
ok(RlockTest::wait_until(sub { $redis->cli('EXISTS', 'bye') eq '0' }, 10),
	'a session that ends releases its locks, all levels');
# (stored under the token's digest, never the token: SPEC.md section 8)
is($redis->cli('HGET', 'handed',
		'rlock-owner:' . Digest::SHA::sha256_hex('rlock owner token:job-42')),
	'1', 'a lock taken for an owner token survives the session');
is(q1($remote, "SELECT rlock_release('handed', owner => 'job-42')"),
	't', 'a session on another server releases it with the owner token');

$reporting->quit;
$remote->quit;
done_testing();
