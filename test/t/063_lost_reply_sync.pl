# Copyright (c) 2026, rlock developers
#
# Semaphores and latches after a lost reply (SPEC.md 6: "a command is
# resent only when resending cannot apply it twice").  A command sent on a
# connection that had worked before and broke before answering is sent
# again on a fresh one (connection.c).  Taking permits, giving them back and
# counting a latch down each change a count: resent after they ran, they
# would take twice the permits (or, for a session that already held some,
# give them all back as lost and take the new ones alone), count the latch
# down twice, give back one permit too many, or add permits twice.  Each carries a request
# latch written by its script (scripts_sync.c), so the replay answers as the
# first time and changes nothing.  Here each runs in Redis, its reply is
# held by the proxy, and the connection is cut: the command goes again, and
# Redis and the session must agree with what was asked, once.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use RlockTest;

my $redis = RlockTest::Redis->new;
my $proxy = RlockTest::Proxy->new($redis);
# (no replicas: a new connection needs no ROLE before its first command)
my $node = RlockTest::new_node('lostsync', $proxy,
	extra_conf => "rlock.replica_acks = 0\n");
my $s = $node->background_psql('postgres', on_error_stop => 0);

# The session waits for replies for as long as it is allowed to: the steps
# below must all happen while the first attempt is still waiting.
RlockTest::run_sql($s, "SET rlock.command_timeout = '1min'");
RlockTest::run_sql($s, "SET rlock.connect_timeout = '1min'");

# Redis has every script cached (EVALSHA runs them at once)
my ($out, $err, $st) = RlockTest::run_sql($s,
	"SELECT rlock_semaphore_set_permits('warm_sem', 2), "
	  . "rlock_semaphore_try_acquire('warm_sem', 1, '1 min'), "
	  . "rlock_semaphore_release('warm_sem'), "
	  . "rlock_latch_set_count('warm_latch', 2), "
	  . "rlock_latch_count_down('warm_latch')");
is("$out/$st", 't|t|t|t|1/00000', 'the session has a working connection to Redis')
  or diag($err);
($out, $err, $st) = RlockTest::run_sql($s, "SELECT rlock_semaphore_add_permits('warm_sem', 0)");
is($st, '00000', 'and may add permits') or diag($err);

sub q1
{
	my ($sql) = @_;
	my ($o, $e, $state) = RlockTest::run_sql($s, $sql);
	is($state, '00000', "runs: $sql") or diag($e);
	return $o;
}

sub permits_out { return $redis->cli('ZCARD', '{ls_sem}:timeout'); }

# ---- taking permits ----

is(q1("SELECT rlock_semaphore_set_permits('ls_sem', 5)"), 't',
	'a semaphore of 5 permits');
# the session holds one already: a replay that did not know its own answer
# would take the first for lost
q1("SELECT rlock_semaphore_acquire('ls_sem', 1, '10 min')");
is($redis->cli('GET', 'ls_sem'), '4', 'acquire: one permit taken before');

($out, $err, $st) = $proxy->lose_reply(
	$redis, $s,
	"SELECT rlock_semaphore_acquire('ls_sem', 2, '10 min')",
	qr/"EVALSHA" "\w+" "\d+" "ls_sem"/i,
	'acquire',
	sub {
		is($redis->cli('GET', 'ls_sem'), '2',
			'acquire: Redis took the 2 permits (the reply is held)');
	});
is($st, '00000', 'acquire: it answers as the first time it ran')
  or diag("stderr: $err");
unlike($err, qr/WARNING/, 'acquire: no warning (nothing reported lost)');
is($redis->cli('GET', 'ls_sem'), '2',
	'acquire: 2 permits available: the 3 asked for are taken once');
is(permits_out(), '3', 'acquire: Redis has the 3 permits out');
is(q1("SELECT rlock_semaphore_available('ls_sem')"), '2',
	'acquire: the session sees 2 available');
is(q1("SELECT string_agg(state || ' ' || hold_count, ',') FROM rlock_locks WHERE name = 'ls_sem' AND pid = pg_backend_pid()"),
	'held 3', 'acquire: the session counts the 3 permits it holds, none lost');

# ---- giving permits back ----

($out, $err, $st) = $proxy->lose_reply(
	$redis, $s,
	"SELECT rlock_semaphore_release('ls_sem', 1)",
	qr/"EVALSHA" "\w+" "\d+" "ls_sem"/i,
	'release',
	sub {
		is($redis->cli('GET', 'ls_sem'), '3',
			'release: Redis took one back (the reply is held)');
	});
is("$out/$st", 't/00000', 'release: it answers as the first time it ran')
  or diag("stderr: $err");
unlike($err, qr/WARNING/, 'release: no warning (nothing reported lost)');
is($redis->cli('GET', 'ls_sem'), '3', 'release: one permit came back, once');
is(permits_out(), '2', 'release: Redis has the other 2 out');
is(q1("SELECT rlock_semaphore_release('ls_sem', 2)"), 't',
	'release: the session gives back the 2 it kept');
unlike(($err // ''), qr/WARNING/, 'release: nothing lost');
is($redis->cli('GET', 'ls_sem'), '5', 'all 5 permits are back');
is(permits_out(), '0', 'no permit out');

# ---- adding permits (a semaphore's owner resizing it) ----

my $before = $redis->cli('GET', 'ls_sem');
($out, $err, $st) = $proxy->lose_reply(
	$redis, $s,
	"SELECT rlock_semaphore_add_permits('ls_sem', 2)",
	qr/"EVALSHA" "\w+" "\d+" "ls_sem"/i,
	'add permits',
	sub {
		is($redis->cli('GET', 'ls_sem'), $before + 2,
			'add permits: Redis added 2 (the reply is held)');
	});
is($st, '00000', 'add permits: it answers as the first time it ran')
  or diag("stderr: $err");
is($redis->cli('GET', 'ls_sem'), $before + 2, 'add permits: 2 added, once');

# ---- counting a latch down ----

is(q1("SELECT rlock_latch_set_count('ls_latch', 3)"), 't', 'a latch of 3');
($out, $err, $st) = $proxy->lose_reply(
	$redis, $s,
	"SELECT rlock_latch_count_down('ls_latch')",
	qr/"EVALSHA" "\w+" "\d+" "ls_latch"/i,
	'count-down',
	sub {
		is($redis->cli('GET', 'ls_latch'), '2',
			'count-down: Redis counted down (the reply is held)');
	});
is("$out/$st", '2/00000', 'count-down: it answers as the first time it ran')
  or diag("stderr: $err");
is($redis->cli('GET', 'ls_latch'), '2', 'count-down: counted down once');
is(q1("SELECT rlock_latch_count('ls_latch')"), '2', 'count-down: the count is 2');

# the last count-down: replayed, it must not find the latch absent
q1("SELECT rlock_latch_count_down('ls_latch')");
($out, $err, $st) = $proxy->lose_reply(
	$redis, $s,
	"SELECT rlock_latch_count_down('ls_latch')",
	qr/"EVALSHA" "\w+" "\d+" "ls_latch"/i,
	'last count-down',
	sub {
		is($redis->cli('EXISTS', 'ls_latch'), '0',
			'last count-down: the latch reached zero (the reply is held)');
	});
is("$out/$st", '0/00000', 'last count-down: it answers 0');
unlike($err, qr/WARNING/,
	'last count-down: no warning (the latch was there when it ran)');

$s->quit;
$node->stop;
$proxy->stop;
$redis->stop;
done_testing();
