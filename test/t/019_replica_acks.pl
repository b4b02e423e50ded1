# Copyright (c) 2026, rlock developers
#
# Replica acknowledgement on a standalone URL (SPEC 10): the URL names a
# master that has a replica, which replicates through a proxy the test can
# stall.
#   - rlock learns the replica count (rlock_nodes) and follows every
#     acquisition with WAIT in the same pipeline (one round trip);
#   - with the replica stalled, an acquisition is refused (08006) and undone:
#     nothing in Redis, nothing in the session, a reentrant acquisition
#     gives back only its own level; rlock_stats.replica_ack_refusals counts
#     them; a try with a wait fails the same way (no silent false);
#   - rlock.replica_acks = 0 does not wait; more acknowledgements than the
#     master has replicas are refused;
#   - a multi-lock sends its scripts and one WAIT in one round trip, and
#     is refused and given back whole when the replica stalls;
#   - releases and renewals do not wait;
#   - a master without replicas is never waited on.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use RlockTest;

my ($master, $link, $replica) = RlockTest::replica_behind_link();

# Locks without a lease: 10 s, so the watchdog renews every 3.3 s.
my $node = RlockTest::new_node('acks', $master, watchdog_timeout => '10s',
	extra_conf => "rlock.replica_ack_timeout = '300ms'\n");
my $s = $node->background_psql('postgres', on_error_stop => 0);

sub sql
{
	my ($sql) = @_;
	my ($out, $err, $state) = RlockTest::run_sql($s, $sql);
	return ($out, $err, $state);
}

# The sessions' round trips: all of them less the watchdog's (one renewal
# script call per cycle here, each its own round trip).
sub session_round_trips
{
	return $node->safe_psql('postgres',
		'SELECT redis_round_trips - renewal_batches FROM rlock_stats');
}

sub counter
{
	my ($col) = @_;
	return $node->safe_psql('postgres', "SELECT $col FROM rlock_stats");
}

my ($out, $err, $state);

($out, $err) = sql("SELECT node = '127.0.0.1:' || " . $master->port
	  . ", role, replicas FROM rlock_nodes()");
is("$out/$err", 't|master|1/', 'rlock_nodes: the master and its one replica');

# ---- acknowledged: one round trip, the replica has the lock ----

# (the first call loads the script: EVALSHA, NOSCRIPT, EVAL)
($out, $err) = sql("SELECT rlock_try_acquire('warm', '1min')");
is("$out/$err", 't/', 'with the replica replicating, the acquisition succeeds');
my $rt0 = session_round_trips();
($out, $err) = sql("SELECT rlock_try_acquire('acked')");
is("$out/$err", 't/', 'and again');
is(session_round_trips() - $rt0, 1,
	'script and WAIT went out in one round trip');
is($replica->cli('EXISTS', 'acked'), '1',
	'the lock is on the replica when the call returns');

# a multi-lock: every script, then one WAIT, in one round trip
($out, $err) = sql("SELECT rlock_multi_try_acquire(ARRAY['warm_m1', 'warm_m2'], '1min')");
is("$out/$err", 't/', 'a multi-lock is acknowledged too');
$rt0 = session_round_trips();
($out, $err) = sql("SELECT rlock_multi_try_acquire(ARRAY['acked_m1', 'acked_m2', 'acked_m3'], '1min')");
is("$out/$err", 't/', 'and again');
is(session_round_trips() - $rt0, 1,
	'... its three scripts and one WAIT went out in one round trip');
is(join(',', map { scalar $replica->cli('EXISTS', $_) } qw(acked_m1 acked_m2 acked_m3)),
	'1,1,1', '... and every name is on the replica when the call returns');

# ---- the replica stalls: acquisitions are refused and undone ----

($out, $err) = sql("SELECT rlock_acquire('reentrant')");
is($err, '', 'a lock taken before the stall');
$link->stall;

my $refused0 = counter('replica_ack_refusals');
my $t0 = time;
($out, $err, $state) = sql("SELECT rlock_try_acquire('unacked')");
my $elapsed = time - $t0;
is($state, '08006', 'unacknowledged acquisition: SQLSTATE 08006');
like($err,
	qr/ERROR:  lock "unacked" was not acknowledged by enough Redis replicas/,
	'the error names the lock');
like($err, qr/0 of the 1 replica acknowledgements/,
	'the detail says how many acknowledged');
like($err, qr/lower rlock\.replica_acks/, 'the hint names the setting');
note sprintf('refused after %.3f s (replica_ack_timeout 300 ms)', $elapsed);
is($master->cli('EXISTS', 'unacked'), '0', 'nothing is left in Redis');
($out, $err) = sql(
	"SELECT rlock_is_held('unacked'), rlock_hold_count('unacked'), "
	  . "(SELECT count(*) FROM rlock_locks WHERE name = 'unacked')");
is("$out/$err", 'f|0|0/', 'nothing is held in the session or the registry');
is(counter('replica_ack_refusals') - $refused0, 1,
	'rlock_stats.replica_ack_refusals counts it');

my $field = RlockTest::holder_of($s);
($out, $err, $state) = sql("SELECT rlock_acquire('reentrant')");
is($state, '08006', 'a reentrant acquisition is refused the same way');
is($master->cli('HGET', 'reentrant', $field), '1',
	'and gives back only its own level: the earlier hold stays in Redis');
($out, $err) = sql("SELECT rlock_hold_count('reentrant')");
is("$out/$err", '1/', 'and in the session');

($out, $err, $state) =
  sql("SELECT rlock_multi_try_acquire(ARRAY['multi_unacked', 'reentrant'], '1min')");
is($state, '08006', 'an unacknowledged multi-lock is refused the same way');
is($master->cli('EXISTS', 'multi_unacked'), '0', '... none of its names is left');
is($master->cli('HGET', 'reentrant', $field), '1',
	'... and a name held before keeps only its earlier hold');
($out, $err) = sql("SELECT rlock_hold_count('multi_unacked'), rlock_hold_count('reentrant')");
is("$out/$err", '0|1/', '... in the session too');

($out, $err, $state) =
  sql("SELECT rlock_try_acquire('waited', wait => '100ms')");
is($state, '08006', 'a try with a wait fails loudly too, not with false');

($out, $err, $state) = sql("SELECT rlock_release('reentrant')");
is("$out/$state", 't/00000', 'a release does not wait for the stalled replica');
is($master->cli('EXISTS', 'reentrant'), '0', 'and is done in Redis');

# ---- rlock.replica_acks = 0: no waiting ----

RlockTest::set_gucs($node, 'rlock.replica_acks' => '0');
($out, $err) = sql("SELECT rlock_try_acquire('unwaited', '1min')");
is("$out/$err", 't/', 'replica_acks = 0: acquired with the replica stalled');
is($replica->cli('EXISTS', 'unwaited'), '0',
	'(the replica does not have it: nothing waited for it)');

# ---- more acknowledgements than replicas ----

RlockTest::set_gucs($node, 'rlock.replica_acks' => '2');
$link->resume;
ok( RlockTest::wait_until(
		sub { ($replica->cli('EXISTS', 'unwaited') // '') eq '1' }),
	'the link is back: the replica catches up');
($out, $err, $state) = sql("SELECT rlock_try_acquire('two')");
is($state, '08006', 'replica_acks = 2 with one replica: refused');
like($err, qr/1 of the 2 replica acknowledgements/, 'one of two acknowledged');
is($master->cli('EXISTS', 'two'), '0', 'and undone');

RlockTest::set_gucs($node, 'rlock.replica_acks' => '1');
($out, $err) = sql("SELECT rlock_try_acquire('again')");
is("$out/$err", 't/', 'replica_acks = 1, the replica back: acquired');

# ---- renewals do not wait: a stalled replica leaves held locks held ----

$link->stall;
my $renewals0 = counter('renewals');
ok( RlockTest::wait_until(sub { counter('renewals') >= $renewals0 + 2 }, 30),
	'the watchdog renews while the replica is stalled');
($out, $err) = sql(
	"SELECT state FROM rlock_locks WHERE name = 'again'");
is("$out/$err", 'held/', 'the lock stays held');
$link->resume;

# ---- a master without replicas is not waited on ----

my $lonely = RlockTest::Redis->new;
RlockTest::set_gucs($node, 'rlock.redis_url' => $lonely->url);
my $s2 = $node->background_psql('postgres', on_error_stop => 0);
($out, $err) = RlockTest::query_err($s2,
	"SELECT replicas FROM rlock_nodes()");
is("$out/$err", '0/', 'a master without replicas');
($out, $err) = RlockTest::query_err($s2,
	"SELECT rlock_try_acquire('alone'), rlock_release('alone')");
is("$out/$err", 't|t/', 'is never waited on');

$s->quit;
$s2->quit;
$node->stop;
done_testing();
