# Copyright (c) 2026, rlock developers
#
# A state-changing script whose reply is lost (Redis ran it, the
# connection broke before the answer came) is applied exactly once.  An
# acquire cannot be sent again blindly: run twice, it would count a hold
# twice.  The connection layer never resends it (its script is marked
# "once"); the session settles the lost reply by reading Redis's count for
# its holder field (HGET), and adopts the hold it finds.  An owner token's
# or a fenced acquire carries a request id (a latch written with the
# grant) and is resent: its replay answers as the first time.  A release
# carries its unlock latch and is resent (047).  Each case: the script ran in
# Redis exactly once (MONITOR), rlock_locks' hold_count and Redis's HGET
# agree, and releasing the counted times frees the lock.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use RlockTest;

my $redis = RlockTest::Redis->new;
my $proxy = RlockTest::Proxy->new($redis);
# (no replicas: a new connection needs no ROLE before its first command)
my $node = RlockTest::new_node('lostreply', $proxy,
	extra_conf => "rlock.replica_acks = 0\n");
my $s = $node->background_psql('postgres', on_error_stop => 0);
my $me = RlockTest::holder_of($s);

# The session waits for replies for as long as it is allowed to: the steps
# of lose_reply all happen while the first attempt is still waiting.
RlockTest::run_sql($s, "SET rlock.command_timeout = '1min'");
RlockTest::run_sql($s, "SET rlock.connect_timeout = '1min'");
my ($out, $err) = RlockTest::run_sql($s,
	"SELECT rlock_try_acquire('lr_warm'), rlock_release('lr_warm'), "
	  . "rlock_read_try_acquire('lr_warm2'), rlock_read_release('lr_warm2'), "
	  . "rlock_write_try_acquire('lr_warm3'), rlock_write_release('lr_warm3'), "
	  . "rlock_fair_try_acquire('lr_warm4'), rlock_fair_release('lr_warm4')");
is("$out/$err", 't|t|t|t|t|t|t|t/',
	'the session has a working connection, Redis has the scripts');

my $marks = 0;

# Run $sql with the reply of the command matching $ran lost; returns
# (stdout, stderr, sqlstate, how many times Redis ran a command matching
# $count_re while the statement ran).
sub lost_reply
{
	my ($sql, $ran, $count_re, $what) = @_;
	my ($mon, $monout) = $redis->cli_bg('MONITOR');
	ok(RlockTest::wait_until(sub { $mon->pump_nb; $$monout =~ /^OK/m }, 30),
		"$what: a second client monitors Redis");
	my ($o, $e, $st) = $proxy->lose_reply($redis, $s, $sql, $ran, $what);
	# everything Redis ran before the mark was listed before it
	my $mark = 'lr_mark_' . ++$marks;
	$redis->cli('ECHO', $mark);
	ok(RlockTest::wait_until(sub { $mon->pump_nb; $$monout =~ /"$mark"/ }, 30),
		"$what: the monitor saw everything up to now");
	$mon->kill_kill;
	my $n = () = $$monout =~ /$count_re/g;
	return ($o, $e, $st, $n);
}

# hold_count of rlock_locks for name and kind
sub locks_count
{
	my ($name, $kind) = @_;
	my ($c) = RlockTest::run_sql($s,
		"SELECT coalesce(sum(hold_count), 0) FROM rlock_locks "
		  . "WHERE pid = pg_backend_pid() AND name = '$name' AND kind = '$kind'");
	return $c;
}

my @cases = (
	# what, name, kind (rlock_locks), the SQL, the Redis field, holds before
	[ 'first acquire', 'lr_ex', 'exclusive',
		"SELECT rlock_acquire('lr_ex', '10 min')", $me, 0 ],
	[ 'reentrant acquire', 'lr_ex', 'exclusive',
		"SELECT rlock_acquire('lr_ex', '10 min')", $me, 1 ],
	[ 'read acquire', 'lr_rw', 'read',
		"SELECT rlock_read_acquire('lr_rw', '10 min')", $me, 0 ],
	[ 'write acquire', 'lr_rw2', 'write',
		"SELECT rlock_write_acquire('lr_rw2', '10 min')", "$me:write", 0 ],
	[ 'fair acquire', 'lr_fair', 'fair',
		"SELECT rlock_fair_acquire('lr_fair', '10 min')", $me, 0 ],
);

for my $c (@cases)
{
	my ($what, $name, $kind, $sql, $field, $before) = @$c;
	my $script = qr/"EVALSHA" "\w+" "\d+" "$name"/i;
	my ($o, $e, $st, $runs) = lost_reply($sql, $script, $script, $what);
	is($st, '00000', "$what: the statement succeeds") or diag($e);
	unlike($e, qr/WARNING|ERROR/, "$what: no warning");
	is($runs, 1, "$what: Redis ran the acquire script once (not resent)");
	is($redis->cli('HGET', $name, $field), $before + 1,
		"$what: Redis counts " . ($before + 1));
	is(locks_count($name, $kind), $before + 1,
		"$what: rlock_locks counts " . ($before + 1));
}

# a release whose reply is lost: resent, its latch answers, once applied
{
	my $what = 'release';
	my $script = qr/"EVALSHA" "\w+" "\d+" "lr_ex"/i;
	my ($o, $e, $st, $runs) = lost_reply("SELECT rlock_release('lr_ex')",
		$script, $script, $what);
	is("$o/$st", 't/00000', "$what: answers as the first time") or diag($e);
	is($redis->cli('HGET', 'lr_ex', $me), '1', "$what: Redis counts 1");
	is(locks_count('lr_ex', 'exclusive'), 1, "$what: rlock_locks counts 1");
}

# a multi-lock: its acquire scripts go in one pipeline; each counted once
{
	my $what = 'multi acquire';
	my ($o, $e) = RlockTest::run_sql($s, "SELECT rlock_acquire('lr_m1', '10 min')");
	is("$o/$e", '/', "$what: the session holds lr_m1 already");
	my $all = qr/"EVALSHA" "\w+" "\d+" "lr_m[12]"/i;
	my ($st, $runs);
	($o, $e, $st, $runs) = lost_reply(
		"SELECT rlock_multi_acquire(ARRAY['lr_m1', 'lr_m2'], '10 min')",
		qr/"EVALSHA" "\w+" "\d+" "lr_m2"/i, $all, $what);
	is($st, '00000', "$what: the statement succeeds") or diag($e);
	unlike($e, qr/WARNING|ERROR/, "$what: no warning");
	is($runs, 2, "$what: Redis ran each acquire script once (not resent)");
	is($redis->cli('HGET', 'lr_m1', $me), '2', "$what: Redis counts 2 of lr_m1");
	is($redis->cli('HGET', 'lr_m2', $me), '1', "$what: Redis counts 1 of lr_m2");
	is(locks_count('lr_m1', 'exclusive'), 2, "$what: rlock_locks counts 2 of lr_m1");
	is(locks_count('lr_m2', 'exclusive'), 1, "$what: rlock_locks counts 1 of lr_m2");
	($o, $e) = RlockTest::run_sql($s,
		"SELECT rlock_multi_release(ARRAY['lr_m1', 'lr_m2']), rlock_release('lr_m1')");
	like("$o/$e", qr/^\S+\|t\/$/, "$what: released the counted times") or diag($e);
	is($redis->cli('EXISTS', 'lr_m1') . $redis->cli('EXISTS', 'lr_m2'), '00',
		"$what: both locks are free");
}

# An owner token's (exclusive, read, write, fair) and a fenced acquisition carry
# a request id: resent
# after the lost reply, the replay answers as the first time and changes
# nothing (the hold counted once, the fencing counter incremented once).
{
	my $what = 'owner-token acquire';
	my $script = qr/"EVALSHA" "\w+" "\d+" "lr_own"/i;
	my ($o, $e, $st, $runs) = lost_reply(
		"SELECT rlock_acquire('lr_own', '10 min', 'job-7')",
		$script, $script, $what);
	is($st, '00000', "$what: the statement succeeds") or diag($e);
	unlike($e, qr/WARNING|ERROR/, "$what: no warning");
	is($redis->cli('HVALS', 'lr_own'), '1', "$what: Redis counts 1 (the owner's one field)");
	($o, $e) = RlockTest::run_sql($s, "SELECT rlock_release('lr_own', 'job-7')");
	is("$o/$e", 't/', "$what: released once");
	is($redis->cli('EXISTS', 'lr_own'), '0', "$what: the lock is free");

	# read, write and fair acquisitions for an owner token: one field counts
	for my $k ([ 'read', 'lr_ownr' ], [ 'write', 'lr_ownw' ], [ 'fair', 'lr_ownf' ])
	{
		my ($mode, $name) = @$k;
		$what = "owner-token $mode acquire";
		$script = qr/"EVALSHA" "\w+" "\d+" "$name"/i;
		($o, $e, $st, $runs) = lost_reply(
			"SELECT rlock_${mode}_acquire('$name', '10 min', 'job-8')",
			$script, $script, $what);
		is($st, '00000', "$what: the statement succeeds") or diag($e);
		unlike($e, qr/WARNING|ERROR/, "$what: no warning");
		is( $redis->eval(
				"local t = 0 for _, f in ipairs(redis.call('hkeys', KEYS[1])) do "
				  . "if f ~= 'mode' then t = t + tonumber(redis.call('hget', KEYS[1], f)) end end "
				  . "return t",
				[$name]),
			'1',
			"$what: Redis counts 1 hold");
		($o, $e) = RlockTest::run_sql($s,
			"SELECT rlock_${mode}_release('$name', 'job-8')");
		is("$o/$e", 't/', "$what: released once");
		is($redis->cli('EXISTS', $name), '0', "$what: the lock is free");
	}

	$what = 'fenced acquire';
	$script = qr/"EVALSHA" "\w+" "\d+" "lr_fenced"/i;
	($o, $e, $st, $runs) = lost_reply(
		"SELECT rlock_fenced_acquire('lr_fenced', '10 min')",
		$script, $script, $what);
	is("$o/$st", '1/00000', "$what: answers the first token") or diag($e);
	unlike($e, qr/WARNING|ERROR/, "$what: no warning");
	is($redis->cli('GET', 'redisson_lock_token:{lr_fenced}'), '1',
		"$what: the fencing counter went up once");
	is($redis->cli('HGET', 'lr_fenced', $me), '1', "$what: Redis counts 1");
	is(locks_count('lr_fenced', 'exclusive'), 1, "$what: rlock_locks counts 1");
	($o, $e) = RlockTest::run_sql($s, "SELECT rlock_release('lr_fenced')");
	is("$o/$e", 't/', "$what: released once");
	is($redis->cli('EXISTS', 'lr_fenced'), '0', "$what: the lock is free");
}

# releasing the counted times frees each lock
($out, $err) = RlockTest::run_sql($s,
	"SELECT rlock_release('lr_ex'), rlock_read_release('lr_rw'), "
	  . "rlock_write_release('lr_rw2'), rlock_fair_release('lr_fair')");
is("$out/$err", 't|t|t|t/', 'each lock released once more');
for my $name (qw(lr_ex lr_rw lr_rw2 lr_fair))
{
	is($redis->cli('EXISTS', $name), '0', "$name is free in Redis");
}
($out) = RlockTest::run_sql($s, 'SELECT count(*) FROM rlock_locks WHERE pid = pg_backend_pid()');
is($out, '0', 'the session holds nothing');

$s->quit;
$node->stop;
$proxy->stop;
$redis->stop;
done_testing();
