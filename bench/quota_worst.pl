# Copyright (c) 2026, rlock developers
#
# The per-call Redis time of the worst scripts a role that is not a
# superuser can cause with the per-session caps at their defaults (issue 40,
# finding 6): M_SESSIONS sessions (default 100, max_connections' default)
# each holding the most they may of one semaphore (rlock.max_permits_per_
# session) and of one read lock (rlock.max_read_holds_per_lock read holds;
# M_CAP, default 100), the lock also with the most read holds for owner
# tokens it takes (rlock.max_owner_holds_per_lock, 1000).  The other sessions' holds are written into Redis directly, as they
# would be; one real plain session then takes and gives back, and Redis's
# INFO commandstats and SLOWLOG say what each EVALSHA cost.  Not part of the
# suite (it measures, asserts nothing); run it with
#   PROVE_TESTS=bench/quota_worst.pl bash test/run
# and read its diag lines.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use RlockTest;

my $redis = RlockTest::Redis->new;
my $node = RlockTest::new_node('measure', $redis, watchdog_timeout => '30s',
	extra_conf => "max_connections = 120\n");
$node->safe_psql('postgres', 'CREATE ROLE plain LOGIN');
my $sessions = $ENV{M_SESSIONS} // 100;
my $others = $sessions - 1;
my $cap = $ENV{M_CAP} // 100;

sub slow_reset { $redis->cli('CONFIG', 'SET', 'slowlog-log-slower-than', '0'); $redis->cli('CONFIG', 'SET', 'slowlog-max-len', '100000'); $redis->cli('SLOWLOG', 'RESET'); $redis->cli('CONFIG', 'RESETSTAT'); }
sub slow_max
{
	my ($what) = @_;
	my $log = $redis->cli('SLOWLOG', 'GET', '100000');
	# an entry: id, unix time, microseconds, the command's words, client
	my @lines = split /\n/, $log;
	my ($max, $n, $sum) = (0, 0, 0);
	for (my $i = 0; $i + 3 < @lines; $i++)
	{
		next unless $lines[$i + 1] =~ /^1[6-9]\d{8}$/ && $lines[$i] =~ /^\d+$/
		  && $lines[$i + 2] =~ /^\d+$/ && $lines[$i + 3] =~ /^evalsha$/i;
		my $us = $lines[$i + 2];
		$max = $us if $us > $max;
		$n++;
		$sum += $us;
	}
	my $cs = $redis->cli('INFO', 'commandstats');
	my ($calls, $upc) = $cs =~ /cmdstat_evalsha:calls=(\d+),usec=\d+,usec_per_call=([\d.]+)/;
	diag(sprintf("%s: %d evalsha, max %d us, mean %.0f us, commandstats %s calls, usec_per_call %s", $what, $n, $max, $n ? $sum / $n : 0, $calls // "?", $upc // '?'));
}

my $p = $node->background_psql('postgres', on_error_stop => 0, extra_params => [ '-U', 'plain' ]);
my $h = RlockTest::holder_of($p);
my ($uuid) = $h =~ /^(.*):\d+$/;

slow_reset();
for (1 .. 20) { $p->query_safe("SELECT rlock_acquire('m_x')"); $p->query_safe("SELECT rlock_release('m_x')"); }
slow_max("baseline: exclusive acquire+release");
$node->safe_psql('postgres', "SELECT rlock_semaphore_set_permits('m_sem0', 1000)");
slow_reset();
for (1 .. 20) { $p->query_safe("SELECT rlock_semaphore_acquire('m_sem0', 1)"); $p->query_safe("SELECT rlock_semaphore_release('m_sem0', 1)"); }
slow_max("baseline: semaphore acquire+release, nothing else out");
# --- semaphore: $others sessions' 1000 permits each, out, plus ours ---
$node->safe_psql('postgres', "SELECT rlock_semaphore_set_permits('m_sem', 1000000)");
$redis->cli('EVAL', "local now = redis.call('time')[1] * 1000 + 3600000 for s = 1, tonumber(ARGV[1]) do local m = {} for k = 1, tonumber(ARGV[3]) do table.insert(m, now) table.insert(m, ARGV[2] .. ':' .. (100000 + s) .. ':' .. k) end redis.call('zadd', KEYS[1], unpack(m)) end redis.call('decrby', KEYS[2], tonumber(ARGV[1]) * tonumber(ARGV[3])) return 1", '2', '{m_sem}:timeout', 'm_sem', $others, $uuid, $cap);
diag('zcard ' . $redis->cli('ZCARD', '{m_sem}:timeout'));
$p->query_safe("SELECT rlock_semaphore_acquire('m_sem', " . ($cap - 1) . ")");
slow_reset();
for (1 .. 20) { $p->query_safe("SELECT rlock_semaphore_acquire('m_sem', 1)"); $p->query_safe("SELECT rlock_semaphore_release('m_sem', 1)"); }
slow_max("semaphore acquire+release (1 permit), " . $redis->cli('ZCARD', '{m_sem}:timeout') . " permits out");
$p->query_safe("SELECT rlock_release_all()");
$redis->cli('DEL', '{m_sem}:timeout', 'm_sem');

# --- read lock: $others sessions' 1000 read holds each, plus 100 owner holds each ---
$redis->cli('EVAL', "local base = '{' .. KEYS[1] .. '}' redis.call('hset', KEYS[1], 'mode', 'read') for s = 1, tonumber(ARGV[1]) do local f = ARGV[2] .. ':' .. (100000 + s) redis.call('hset', KEYS[1], f, tonumber(ARGV[3])) for k = 1, tonumber(ARGV[3]) do redis.call('set', base .. ':' .. f .. ':rwlock_timeout:' .. k, 1, 'px', 3600000) end if s <= 10 then local o = 'rlock-owner:' .. string.format('%064d', s) redis.call('hset', KEYS[1], o, 100) for k = 1, 100 do redis.call('set', base .. ':' .. o .. ':rwlock_timeout:' .. k, 1, 'px', 3600000) end end end redis.call('pexpire', KEYS[1], 3600000) return 1", '1', 'm_rw', $others, $uuid, $cap);
diag('dbsize ' . $redis->cli('DBSIZE'));
slow_reset();
for (1 .. 20) { $p->query_safe("SELECT rlock_read_acquire('m_rw')"); }
slow_max("read acquire, " . $others . " x $cap read holds + 1000 for owner tokens (rlock.max_owner_holds_per_lock)");
slow_reset();
for (1 .. 20) { $p->query_safe("SELECT rlock_read_release('m_rw')"); }
slow_max("read release, " . $others . " x $cap read holds + 1000 for owner tokens (rlock.max_owner_holds_per_lock)");
# the worst single: release when we hold many too
slow_reset();
$p->query_safe("SELECT count(rlock_read_acquire('m_rw')) FROM generate_series(1, $cap)");
$p->query_safe("SELECT rlock_release_all()");
slow_max("$cap read acquires then release_all");
ok(1);
$p->quit;
done_testing();
