# Copyright (c) 2026, rlock developers
#
# Safety across sessions and faults (the single-session rules are in
# sql/safety.sql):
#   - fail closed: with the link to Redis stalled, a lock is reported lost
#     (rlock_locks, LOG line, cancel_on_lost, COMMIT refused) before a
#     client that still reaches Redis can take it;
#   - each lock is renewed with the lease it was taken with, whatever
#     rlock.watchdog_timeout says now;
#   - fixed-lease locks that run out or are force-released show as lost
#     without their session doing anything;
#   - an acquisition whose reply was lost in a rolled-back subtransaction
#     leaves nothing in Redis once the transaction commits;
#   - error replies to a release (NOPERM, OOM) are ERRORs and the hold is
#     kept; a missing SUBSCRIBE permission is named;
#   - waiting takes no room in the registry;
#   - ROLLBACK and session exit never wait longer than a few seconds,
#     whatever rlock.command_timeout says;
#   - the password of rlock.redis_url shows nowhere.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use RlockTest;

sub q1
{
	my ($s, $sql) = @_;
	my ($out, $err) = RlockTest::query_err($s, $sql);
	return $out;
}

# Redisson's exclusive acquire (PROTOCOL.md), for a client that reaches
# Redis directly (a Java service).
my $java_acquire = q{
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])
};
my $java = '9f0c4f7e-0000-4000-8000-00000000java:1';

my $redis = RlockTest::Redis->new;
my $proxy = RlockTest::Proxy->new($redis);
my $node = RlockTest::new_node('safety', $proxy,
	watchdog_timeout => '2s',
	extra_conf => "rlock.cancel_on_lost = on\nrlock.max_locks = 16\n");
$node->safe_psql('postgres',
	'CREATE TABLE guarded (v int); GRANT ALL ON guarded TO PUBLIC');

# ---- fail closed: the link stalls, the lock is lost before anyone else has it ----

my $a = $node->background_psql('postgres', on_error_stop => 0);
my $c = $node->background_psql('postgres', on_error_stop => 0);
my $watch = $node->background_psql('postgres', on_error_stop => 0);
my $a_pid = q1($a, 'SELECT pg_backend_pid()');
q1($a, "SELECT rlock_acquire('fc')");
q1($c, 'BEGIN');
q1($c, "SELECT rlock_xact_acquire('fc_x')");
q1($c, 'INSERT INTO guarded VALUES (1)');
# the holder is busy with its batch job when the link goes
$a->query_until(qr/working\n/, "\\echo working\nSELECT pg_sleep(60);\n");
my $log_offset = -s $node->logfile;
$proxy->stall;
my $t_stall = time();

# Poll: first what rlock says (shared memory only, no Redis), then whether
# a Java client that still reaches Redis gets the lock.
my ($java_got, $lost_before_java) = (0, 0);
my $deadline = time() + 30;
while (time() < $deadline)
{
	my $state = q1($watch, "SELECT state FROM rlock_locks WHERE name = 'fc'");
	my $r = $redis->eval($java_acquire, ['fc'], 30000, $java);
	if ($r eq '')
	{
		$java_got = 1;
		$lost_before_java = ($state eq 'lost');
		last;
	}
	usleep(20_000);
}
ok($java_got, sprintf('a client that still reaches Redis gets the lock once its lease ran out (%.1f s after the stall)', time() - $t_stall));
ok($lost_before_java, 'rlock had already reported it lost when that client got it');
ok(RlockTest::wait_until(sub {
		slurp_file($node->logfile, $log_offset) =~
		  /LOG:  rlock watchdog: lock "fc" held by [0-9a-f-]{36}:$a_pid \(pid $a_pid\) was lost\n.*DETAIL:  Its lease could not be renewed for too long/ }, 10),
	'the LOG line names the lock, its holder and why');
ok(RlockTest::wait_until(sub {
		$a->{run}->pump_nb;
		return $a->{stderr} =~ /canceling statement: rlock lock "fc(?:_x)?" was lost \((?:not renewed in time|gone from Redis)\)/; }, 10),
	'rlock.cancel_on_lost cancelled the holder\'s running statement, naming the lock and why');
is(q1($watch, "SELECT state FROM rlock_locks WHERE name = 'fc_x'"), 'lost',
	'the transaction-level lock is lost too');
$proxy->resume;
$a->{stderr} = '';
my ($out, $err) = RlockTest::query_err($a, "SELECT rlock_release('fc')");
is($out, 'f', "the holder's release returns false");
like($err, qr/WARNING:  lock "fc" was lost before this session released it/,
	'with a WARNING');
is($redis->cli('HGET', 'fc', $java), '1', 'and the Java client keeps its lock');
($out, $err) = RlockTest::query_err($c, 'COMMIT');
like($err, qr/ERROR:  cannot commit: lock "fc_x" held by this transaction was lost/,
	'COMMIT of the transaction holding the lost lock is refused');
is($node->safe_psql('postgres', 'SELECT count(*) FROM guarded'), '0',
	'and its write is rolled back');
$redis->cli('DEL', 'fc');

# ---- each lock is renewed with the lease it was taken with ----

q1($a, "SELECT rlock_acquire('lease_old')");
$node->safe_psql('postgres', "ALTER SYSTEM SET rlock.watchdog_timeout = '60s'");
$node->reload;
# the worker and then this session read the new setting
ok(RlockTest::wait_until(sub { q1($a, 'SHOW rlock.watchdog_timeout') eq '1min' }, 10),
	'the session sees the new watchdog_timeout after the reload');
q1($a, "SELECT rlock_acquire('lease_new')");
sleep(3);
my $pttl_old = $redis->cli('PTTL', 'lease_old');
ok($pttl_old > 0 && $pttl_old <= 2000,
	"a lock taken with a 2 s lease is renewed with 2 s (PTTL $pttl_old ms), not 60 s");
is(q1($watch, "SELECT state FROM rlock_locks WHERE name = 'lease_old'"), 'held',
	'and it is still held after more than its lease');
cmp_ok($redis->cli('PTTL', 'lease_new'), '>', 2000,
	'a lock taken after the reload has the new lease');
is(q1($a, "SELECT rlock_release('lease_old'), rlock_release('lease_new')"), 't|t',
	'both release normally');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET rlock.watchdog_timeout');
$node->reload;
ok(RlockTest::wait_until(sub { q1($a, 'SHOW rlock.watchdog_timeout') eq '2s' }, 10),
	'back to 2 s');

# ---- fixed leases: run out, or force-released, and nobody asked ----

$log_offset = -s $node->logfile;
q1($a, "SELECT rlock_acquire('fixed_out', '1500ms'), rlock_acquire('fixed_forced', '1 minute')");
ok(RlockTest::wait_until(sub {
		q1($watch, "SELECT state FROM rlock_locks WHERE name = 'fixed_out'") eq 'lost' }, 10),
	'a fixed lease that ran out shows as lost without its session doing anything');
like(slurp_file($node->logfile, $log_offset), qr/lock "fixed_out" .* was lost\n.*DETAIL:  Its fixed lease ran out/,
	'and the LOG line says why');
q1($watch, "SELECT rlock_force_release('fixed_forced')");
ok(RlockTest::wait_until(sub {
		q1($watch, "SELECT state FROM rlock_locks WHERE name = 'fixed_forced'") eq 'lost' }, 10),
	'a force-released fixed-lease lock shows as lost too');
q1($a, 'SELECT rlock_release_all()');
is(q1($watch, "SELECT count(*) FROM rlock_locks WHERE pid = $a_pid"), '0',
	'the session forgets both');

# ---- a lost reply in a rolled-back subtransaction leaves nothing behind ----

q1($a, "SET rlock.command_timeout = '300ms'");
q1($a, 'BEGIN');
$proxy->stall_replies;
($out, $err) = RlockTest::query_err($a, q{
DO $$BEGIN
  PERFORM rlock_xact_acquire('lost_reply', '1 minute');
EXCEPTION WHEN connection_failure THEN
  RAISE NOTICE 'caught %', SQLSTATE;
END$$});
like($err, qr/NOTICE:  caught 08006/, 'the acquisition times out and the error is caught');
# (Redis did run it; the rollback of the subtransaction may already have
# undone it, through the stalled link, or COMMIT does)
$proxy->resume;
q1($a, 'COMMIT');
is($redis->cli('EXISTS', 'lost_reply'), '0',
	'after COMMIT the hold nobody knew about is gone from Redis');
q1($a, 'RESET rlock.command_timeout');

# ---- error replies to a release are errors, and the hold is kept ----

# (channel rules, '&*', exist from Redis 6.2; before, every user has every
# channel)
$redis->cli('ACL', 'SETUSER', 'rl', 'on', '>rlpass', '~*',
	RlockTest::redis_version() >= 60200 ? ('&*') : (),
	'+@all', '-publish');
my $acl_url = 'redis://rl:rlpass@127.0.0.1:' . $redis->port . '/0';
my $acl_node = RlockTest::new_node('acl', $redis,
	extra_conf => "rlock.redis_url = '$acl_url'\n");
my $p = $acl_node->background_psql('postgres', on_error_stop => 0);
q1($p, "SELECT rlock_acquire('noperm', '1 minute')");
($out, $err) = RlockTest::query_err($p, "SELECT rlock_release('noperm')");
like($err, qr/ERROR:  the Redis user of rlock.redis_url lacks a permission for lock "noperm"/,
	'a release refused by the ACL (PUBLISH) is an ERROR');
like($err, qr/HINT:  .*the command publish/i, 'whose hint names the missing command');
is(q1($p, "SELECT rlock_hold_count('noperm')"), '1', 'the lock is still held in Redis');
is(q1($p, "SELECT hold_count FROM rlock_locks WHERE name = 'noperm'"), '1',
	'and by the session');
$redis->cli('ACL', 'SETUSER', 'rl', '+publish');
is(q1($p, "SELECT rlock_release('noperm')"), 't', 'once PUBLISH is granted the release works');

$redis->cli('ACL', 'SETUSER', 'rl', '-subscribe');
$redis->cli('HSET', 'nosub', $java, '1');
$redis->cli('PEXPIRE', 'nosub', '60000');
($out, $err) = RlockTest::query_err($p, "SELECT rlock_try_acquire('nosub', '1 minute', '2 s')");
like($err, qr/WARNING:  the Redis user of rlock.redis_url lacks a permission for lock "nosub".*\n.*\n?HINT:  .*subscribe/is,
	'a wait refused SUBSCRIBE names the missing command');
is($out, 'f', '... and waits without messages (polling) until its end');
$redis->cli('ACL', 'SETUSER', 'rl', '+subscribe');
$redis->cli('DEL', 'nosub');

# A key refused inside a script (the acquire script looks for the fair
# queue, a key it derives from the name): Redis says so in a plain ERR.
$redis->cli('ACL', 'SETUSER', 'rl', 'resetkeys', '~aclkey*');
my $acl_state;
($out, $err, $acl_state) = RlockTest::run_sql($p, "SELECT rlock_try_acquire('aclkey', '1 minute')");
is($acl_state, '42501', 'an ACL refusal inside a script: SQLSTATE 42501');
like($err, qr/ERROR:  the Redis user of rlock.redis_url lacks a permission for lock "aclkey"/,
	'an ACL refusing a key the script derives from the name: the error says so');
like($err, qr/HINT:  Grant the Redis user of rlock.redis_url the locks' keys/,
	'whose hint names the missing keys');
note "key refused inside the script: $err";
$redis->cli('ACL', 'SETUSER', 'rl', '~*');
is($redis->cli('EXISTS', 'aclkey'), '0', 'nothing was taken');
is(q1($p, "SELECT rlock_try_acquire('aclkey', '1 minute'), rlock_release('aclkey')"), 't|t',
	'with every key allowed again it works');

q1($p, "SELECT rlock_acquire('oom', '1 minute')");
$redis->cli('CONFIG', 'SET', 'maxmemory', '1');
($out, $err) = RlockTest::query_err($p, "SELECT rlock_release('oom')");
$redis->cli('CONFIG', 'SET', 'maxmemory', '0');
like($err, qr/ERROR:  Redis is out of memory for lock "oom"/, 'a release refused for OOM is an ERROR');
is(q1($p, "SELECT rlock_hold_count('oom')"), '1', 'the hold is kept');
is(q1($p, "SELECT rlock_release('oom')"), 't', 'and released once Redis has room');
$p->quit;
$acl_node->stop;

# ---- waiting takes no room in the registry (rlock.max_locks = 16) ----

q1($a, "SELECT rlock_acquire('cap', '1 minute')");
my @w = map { $node->background_psql('postgres', on_error_stop => 0) } 1 .. 20;
for my $s (@w)
{
	$s->query_until(qr/started\n/,
		"\\echo started\nSELECT rlock_try_acquire('cap', '1 minute', '60 s') AND rlock_release('cap') AS ok;\n\\echo done\n");
}
RlockTest::wait_for_rlock_waiters($node, 'postgres', 20);
pass('20 sessions wait for one lock with rlock.max_locks = 16');
q1($a, "SELECT rlock_release('cap')");
my $all = 1;
for my $s (@w)
{
	my $o = $s->query_until(qr/done\n/, '');
	next if $o =~ /\bt\n/ && $s->{stderr} !~ /ERROR/;
	$all = 0;
	diag("a waiter said: $o / $s->{stderr}");
}
ok($all, 'and each gets it in turn, none refused for want of room');
$_->quit for @w;

# ---- ROLLBACK and exit never wait long, whatever command_timeout says ----

q1($a, "SET rlock.command_timeout = '60s'");
($out, $err) = RlockTest::query_err($a, "SET rlock.command_timeout = '2 days'");
like($err, qr/ERROR:  (invalid value for parameter|.*outside the valid range)/, 'command_timeout is at most a minute');
q1($a, 'BEGIN');
q1($a, "SELECT rlock_xact_acquire('rb', '1 minute')");
$proxy->stall;
my $t0 = time();
($out, $err) = RlockTest::query_err($a, 'ROLLBACK');
my $rb = time() - $t0;
cmp_ok($rb, '<', 15, sprintf('ROLLBACK with Redis unreachable returned after %.1f s, not the 60 s command_timeout', $rb));
like($err, qr/WARNING:  Redis at .* did not answer in time/, 'with a WARNING');
q1($a, "SELECT 1");
$proxy->resume;
q1($a, "SELECT rlock_acquire('exit_lock', '1 minute')");
$proxy->stall;
$t0 = time();
$node->safe_psql('postgres', "SELECT pg_terminate_backend($a_pid)");
ok(RlockTest::wait_until(sub {
		$node->safe_psql('postgres', "SELECT count(*) FROM pg_stat_activity WHERE pid = $a_pid") eq '0' }, 30),
	'a terminated session exits');
my $ex = time() - $t0;
cmp_ok($ex, '<', 15, sprintf('within %.1f s, not the 60 s command_timeout', $ex));
$proxy->resume;

# ---- the password shows nowhere ----

my $secret = 'S3cretPw9';
my $pw_redis = RlockTest::Redis->new(password => $secret);
my $pw_node = RlockTest::new_node('pw', $pw_redis);
$pw_node->safe_psql('postgres',
	'CREATE ROLE reader LOGIN; GRANT pg_read_all_settings TO reader');
my $settings = $pw_node->safe_psql('postgres',
	"SELECT setting || ' ' || reset_val || ' ' || boot_val FROM pg_settings WHERE name = 'rlock.redis_url'",
	extra_params => [ '-U', 'reader' ]);
unlike($settings, qr/$secret/, 'pg_settings (setting, reset_val, boot_val) never shows the password');
like($settings, qr/:\*{8}@/, 'it shows it masked');
unlike($pw_node->safe_psql('postgres', 'SHOW rlock.redis_url'), qr/$secret/, 'nor does SHOW');
ok($pw_node->safe_psql('postgres', 'SELECT rlock_ping() IS NOT NULL') eq 't',
	'and rlock still authenticates with it');
# (the test's own statements must not log the password either)
my $pw_s = $pw_node->background_psql('postgres', on_error_stop => 0);
q1($pw_s, "SET log_statement = 'none'");
q1($pw_s, "SET log_min_error_statement = 'panic'");
my $pw_url1 = 'redis://:' . $secret . '@127.0.0.1:' . $pw_redis->port . '/1';
q1($pw_s, "ALTER SYSTEM SET rlock.redis_url = '$pw_url1'");
$pw_node->reload;
ok(RlockTest::wait_until(sub {
		slurp_file($pw_node->logfile) =~ /parameter "rlock.redis_url" changed to "redis:\/\/:\*{8}\@/ }, 10),
	'a reload that changes the URL is logged, with the password masked');
($out, $err) = RlockTest::query_err($pw_s,
	"ALTER SYSTEM SET rlock.redis_url = 'redis://:${secret}\@127.0.0.1:99999/0'");
like($err, qr/invalid value for parameter "rlock.redis_url"/, 'an invalid URL is refused');
unlike($err, qr/$secret/, 'without showing the password');
is(q1($pw_s, 'SELECT rlock_ping() IS NOT NULL'), 't', 'rlock works with the new URL');
$pw_s->quit;
unlike(slurp_file($pw_node->logfile), qr/$secret/, 'the server log never shows the password');

done_testing();
