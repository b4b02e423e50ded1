
# Copyright (c) 2026, rlock developers

#
# Redisson's own scripts, for tests that play a Java client.
#
package RlockTest::Redisson;

use strict;
use warnings;

use Time::HiRes ();

# RlockTest loads this file; nothing here needs it.

=pod

=head1 RlockTest::Redisson

Redisson's fair-lock scripts (PROTOCOL.md), to drive a Redisson client
from redis-cli: $RlockTest::Redisson::fair_acquire (KEYS: lock, queue,
deadlines; ARGV: lease ms, holder, wait ms, now ms) and
$RlockTest::Redisson::fair_release (KEYS: lock, queue, deadlines, channel
prefix; ARGV: message, holder).

Its exclusive lock (RLock) too: $RlockTest::Redisson::acquire (KEYS: lock;
ARGV: lease ms, holder) and $RlockTest::Redisson::release (KEYS: lock,
channel, unlock latch; ARGV: message, lease ms, holder, publish command,
latch ms), and two functions that run them on an RlockTest::Redis (over
whatever it speaks: TCP, TLS, a Unix socket) or on an RlockTest::Cluster
(on the master of the name's slot, following MOVED and ASK: see
RlockTest::Cluster's call):

  RlockTest::Redisson::try_lock($redis_or_cluster, $name, $lease_ms, $holder)
      # '' (nil) when acquired, else the holder's PTTL
  RlockTest::Redisson::unlock($redis_or_cluster, $name, $holder, $verb)
      # 1 released (published "0"), 0 one level less, '' not held

for names without "{" (channel redisson_lock__channel:{name}, in the
name's slot).  $verb is how the release is published: 'publish' (the
default) or 'spublish' (Redisson 3.22+ against a Redis 7+ cluster: sharded
pub/sub, which only SSUBSCRIBE clients of the slot's shard receive).
An error reply comes back as its text, like the cli prints it.

Its RPermitExpirableSemaphore and RCountDownLatch, as Redisson 3.17+ (and
4.x) script them: the same keys, members, scores and messages, written
here from what Redisson's scripts do (not copied).  A semaphore "N" is the
available-permits key N (decimal text), the sorted set of permits out
"{N}:timeout" ("N:timeout" when N has a "{"), each member a permit id as
16 raw bytes scored by its expiry (epoch ms; a permit without lease has
the score 922337203685477, $RlockTest::Redisson::NON_EXPIRABLE), and the
channel "redisson_sc:{N}" ("redisson_sc:N" when N has a "{"), on which
the permits available are published.  A latch "N" is a counter key N and
the channel "redisson_countdownlatch__channel__{N}" (always in braces),
messages "0" (zero reached) and "1" (a new count).  Permit ids are shown
as the Java API shows them: 32 lowercase hex digits (the scripts turn
them into the raw bytes Redis stores, and back).

  my ($ids, $answer) = RlockTest::Redisson::sem_try_acquire($r, $name, $permits, $lease_ms, $verb)
      # tryAcquire(permits, lease): $answer 'OK' and $ids the new permit
      # ids (array ref), or $ids [] and $answer ':<score>' (the soonest
      # expiry of a permit out) or '' (nil: only permits without lease are
      # out).  $lease_ms undef: a permit without lease.  Expired permits
      # (at most $permits) come back first, published if any are available.
  RlockTest::Redisson::sem_release($r, $name, $id, $verb)
      # tryRelease(id): 1 given back (publishes the permits available),
      # 0 not out (or it had expired: given back all the same)
  RlockTest::Redisson::sem_try_set_permits($r, $name, $permits, $verb)  # 1 set (publishes), 0 already set
  RlockTest::Redisson::sem_add_permits($r, $name, $delta, $verb)        # publishes $delta when > 0
  RlockTest::Redisson::sem_available($r, $name, $verb)   # availablePermits (expired ones come back first)
  RlockTest::Redisson::sem_permits($r, $name)            # { id => score } of the permits out: Redisson's
      # ids as 32 hex digits, any other member (rlock's "<holder>:<k>") as it is
  RlockTest::Redisson::latch_try_set_count($r, $name, $count, $verb) # 1 set (publishes "1"), 0 counting
  RlockTest::Redisson::latch_count_down($r, $name, $verb)            # DECR; at 0 deletes, publishes "0"
  RlockTest::Redisson::latch_count($r, $name)                        # getCount: 0 when absent
  RlockTest::Redisson::latch_delete($r, $name, $verb)                # 1 deleted (publishes "1"), 0 absent
  RlockTest::Redisson::sem_keys($name)       # (permits key, "{N}:timeout", channel)
  RlockTest::Redisson::latch_channel($name)

$verb as for unlock: 'publish' (default) or 'spublish' (3.22+ on a Redis 7
cluster).

=cut

our $acquire = <<'LUA';
if (redis.call('exists', KEYS[1]) == 0) or
   (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])
LUA

our $release = <<'LUA';
local val = redis.call('get', KEYS[3])
if val ~= false then return tonumber(val) end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if counter > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  redis.call('set', KEYS[3], 0, 'px', ARGV[5])
  return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[4], KEYS[2], ARGV[1])
redis.call('set', KEYS[3], 1, 'px', ARGV[5])
return 1
LUA

# Its RFencedLock's acquire (PROTOCOL.md): the exclusive acquire, and on
# success the token counter INCRed in the same script.  KEYS: lock, token
# counter (redisson_lock_token:{N}); ARGV: lease ms, holder.  Returns
# {0, token} when acquired, {pttl} when not (Redisson's reply shape aside,
# the same calls); its release is $release.
our $fenced_acquire = <<'LUA';
if (redis.call('exists', KEYS[1]) == 0) or
   (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {0, redis.call('incr', KEYS[2])}
end
return {redis.call('pttl', KEYS[1])}
LUA

my $unlock_request = 0;

# EVAL $script on $target: an RlockTest::Redis, or an RlockTest::Cluster
# (routed by the slot of $keys->[0]).
sub _eval
{
	my ($target, $script, $keys, @args) = @_;
	if (ref $target && $target->isa('RlockTest::Cluster'))
	{
		return scalar $target->call($keys->[0], 'EVAL', $script,
			scalar(@$keys), @$keys, @args);
	}
	return $target->eval($script, $keys, @args);
}

sub try_lock
{
	my ($target, $name, $lease_ms, $holder) = @_;
	return _eval($target, $acquire, [$name], $lease_ms, $holder);
}

sub unlock
{
	my ($target, $name, $holder, $verb) = @_;
	$verb //= 'publish';
	die "RlockTest::Redisson::unlock: the verb is publish or spublish, not $verb\n"
	  unless $verb eq 'publish' || $verb eq 'spublish';
	my $latch = sprintf('redisson_unlock_latch:{%s}:%032x', $name,
		++$unlock_request + int(rand(1 << 30)) * 65536);
	return _eval($target, $release,
		[ $name, "redisson_lock__channel:{$name}", $latch ],
		'0', 30000, $holder, $verb, 13500);
}

sub _verb
{
	my ($verb) = @_;
	$verb //= 'publish';
	die "RlockTest::Redisson: the verb is publish or spublish, not $verb\n"
	  unless $verb eq 'publish' || $verb eq 'spublish';
	return $verb;
}

# ---- RPermitExpirableSemaphore ----

our $NON_EXPIRABLE = '922337203685477';

sub sem_keys
{
	my ($name) = @_;
	return ($name, "$name:timeout", "redisson_sc:$name") if $name =~ /\{/;
	return ($name, "{$name}:timeout", "redisson_sc:{$name}");
}

# hex text <-> the raw bytes Redisson stores
my $lua_hex = <<'LUA';
local function raw(h)
  return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end))
end
local function hex(b)
  return (string.gsub(b, '.', function(c) return string.format('%02x', string.byte(c)) end))
end
LUA

# KEYS: permits, timeout zset, channel.  ARGV: permits, expiry (score),
# now, the non-expirable score, verb, then one hex id per permit.
our $sem_try_acquire = $lua_hex . <<'LUA';
local want = tonumber(ARGV[1])
local gone = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, want)
if #gone > 0 then
  for _, m in ipairs(gone) do redis.call('zrem', KEYS[2], m) end
  local v = redis.call('incrby', KEYS[1], #gone)
  if v > 0 then redis.call(ARGV[5], KEYS[3], v) end
end
local have = redis.call('get', KEYS[1])
if have ~= false and tonumber(have) >= want then
  redis.call('decrby', KEYS[1], want)
  for i = 6, #ARGV do
    redis.call('zadd', KEYS[2], ARGV[2], raw(ARGV[i]))
  end
  local ttl = redis.call('pttl', KEYS[1])
  if ttl > 0 then redis.call('pexpire', KEYS[2], ttl) end
  return 'OK'
end
local first = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if first[1] ~= nil and tonumber(first[2]) ~= tonumber(ARGV[4]) then
  return ':' .. first[2]
end
return nil
LUA

# KEYS as above.  ARGV: hex id, now, verb.
our $sem_release = $lua_hex . <<'LUA';
local id = raw(ARGV[1])
local expiry = redis.call('zscore', KEYS[2], id)
if redis.call('zrem', KEYS[2], id) ~= 1 then return 0 end
local v = redis.call('incrby', KEYS[1], 1)
redis.call(ARGV[3], KEYS[3], v)
if tonumber(expiry) <= tonumber(ARGV[2]) then return 0 end
return 1
LUA

# ARGV: permits, verb.
our $sem_try_set_permits = <<'LUA';
if redis.call('get', KEYS[1]) ~= false then return 0 end
redis.call('set', KEYS[1], ARGV[1])
redis.call(ARGV[2], KEYS[3], ARGV[1])
return 1
LUA

# ARGV: delta, verb.
our $sem_add_permits = <<'LUA';
local cur = redis.call('get', KEYS[1])
if cur == false then cur = 0 end
redis.call('set', KEYS[1], tonumber(cur) + tonumber(ARGV[1]))
if tonumber(ARGV[1]) > 0 then redis.call(ARGV[2], KEYS[3], ARGV[1]) end
return 1
LUA

# ARGV: now, verb.
our $sem_available = <<'LUA';
local gone = redis.call('zrangebyscore', KEYS[2], 0, ARGV[1])
if #gone > 0 then
  for _, m in ipairs(gone) do redis.call('zrem', KEYS[2], m) end
  local v = redis.call('incrby', KEYS[1], #gone)
  if v > 0 then redis.call(ARGV[2], KEYS[3], v) end
  return v
end
local cur = redis.call('get', KEYS[1])
if cur == false then return 0 end
return tonumber(cur)
LUA

# the permits out, hex-encoded, and their scores
our $sem_permits = $lua_hex . <<'LUA';
local out = {}
local zs = redis.call('zrange', KEYS[2], 0, -1, 'withscores')
for j = 1, #zs, 2 do
  table.insert(out, hex(zs[j]))
  table.insert(out, zs[j + 1])
end
return out
LUA

sub _now_ms { return int(Time::HiRes::time() * 1000); }

sub _sem_eval
{
	my ($target, $script, $name, @args) = @_;
	return _eval($target, $script, [ sem_keys($name) ], @args);
}

sub new_permit_id
{
	return join('', map { sprintf('%08x', int(rand(4294967296))) } 1 .. 4);
}

sub sem_try_acquire
{
	my ($target, $name, $permits, $lease_ms, $verb) = @_;
	$verb = _verb($verb);
	my $now = _now_ms();
	my $expiry = defined $lease_ms && $lease_ms >= 0 ? $now + $lease_ms : $NON_EXPIRABLE;
	my @ids = map { new_permit_id() } 1 .. $permits;
	my $answer = _sem_eval($target, $sem_try_acquire, $name,
		$permits, $expiry, $now, $NON_EXPIRABLE, $verb, @ids);
	$answer //= '';
	return ($answer eq 'OK' ? \@ids : [], $answer);
}

sub sem_release
{
	my ($target, $name, $id, $verb) = @_;
	$verb = _verb($verb);
	die "RlockTest::Redisson::sem_release: a permit id is 32 hex digits, not $id\n"
	  unless $id =~ /^[0-9a-f]{32}$/;
	return _sem_eval($target, $sem_release, $name, $id, _now_ms(), $verb);
}

sub sem_try_set_permits
{
	my ($target, $name, $permits, $verb) = @_;
	return _sem_eval($target, $sem_try_set_permits, $name, $permits, _verb($verb));
}

sub sem_add_permits
{
	my ($target, $name, $delta, $verb) = @_;
	return _sem_eval($target, $sem_add_permits, $name, $delta, _verb($verb));
}

sub sem_available
{
	my ($target, $name, $verb) = @_;
	return _sem_eval($target, $sem_available, $name, _now_ms(), _verb($verb));
}

sub sem_permits
{
	my ($target, $name) = @_;
	my @l = split /\n/, (_sem_eval($target, $sem_permits, $name) // '');
	my %out;
	while (my ($h, $score) = splice(@l, 0, 2))
	{
		my $raw = pack('H*', $h);
		$out{ length($raw) == 16 ? $h : $raw } = $score;
	}
	return \%out;
}

# ---- RCountDownLatch ----

sub latch_channel { return "redisson_countdownlatch__channel__{$_[0]}"; }

# KEYS: counter, channel.  ARGV: count, verb.
our $latch_try_set_count = <<'LUA';
if redis.call('exists', KEYS[1]) ~= 0 then return 0 end
redis.call('set', KEYS[1], ARGV[1])
redis.call(ARGV[2], KEYS[2], '1')
return 1
LUA

# ARGV: verb.
our $latch_count_down = <<'LUA';
local v = redis.call('decr', KEYS[1])
if v <= 0 then redis.call('del', KEYS[1]) end
if v == 0 then redis.call(ARGV[1], KEYS[2], '0') end
return v
LUA

our $latch_count = <<'LUA';
local v = redis.call('get', KEYS[1])
if v == false then return 0 end
return tonumber(v)
LUA

sub latch_try_set_count
{
	my ($target, $name, $count, $verb) = @_;
	return _eval($target, $latch_try_set_count, [ $name, latch_channel($name) ],
		$count, _verb($verb));
}

sub latch_count_down
{
	my ($target, $name, $verb) = @_;
	return _eval($target, $latch_count_down, [ $name, latch_channel($name) ],
		_verb($verb));
}

# ARGV: verb.
our $latch_delete = <<'LUA';
if redis.call('del', KEYS[1]) == 1 then
  redis.call(ARGV[1], KEYS[2], '1')
  return 1
end
return 0
LUA

sub latch_delete
{
	my ($target, $name, $verb) = @_;
	return _eval($target, $latch_delete, [ $name, latch_channel($name) ],
		_verb($verb));
}

sub latch_count
{
	my ($target, $name) = @_;
	return _eval($target, $latch_count, [ $name, latch_channel($name) ]);
}

our $fair_acquire = <<'LUA';
while true do
  local first = redis.call('lindex', KEYS[2], 0)
  if first == false then break end
  local timeout = tonumber(redis.call('zscore', KEYS[3], first))
  if timeout <= tonumber(ARGV[4]) then
    redis.call('zrem', KEYS[3], first)
    redis.call('lpop', KEYS[2])
  else break end
end
if (redis.call('exists', KEYS[1]) == 0) and ((redis.call('exists', KEYS[2]) == 0)
    or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], ARGV[2])
  local keys = redis.call('zrange', KEYS[3], 0, -1)
  for i = 1, #keys, 1 do
    redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), keys[i])
  end
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
local timeout = redis.call('zscore', KEYS[3], ARGV[2])
if timeout ~= false then
  return timeout - tonumber(ARGV[3]) - tonumber(ARGV[4])
end
local lastThreadId = redis.call('lindex', KEYS[2], -1)
local ttl
if lastThreadId ~= false and lastThreadId ~= ARGV[2] then
  ttl = tonumber(redis.call('zscore', KEYS[3], lastThreadId)) - tonumber(ARGV[4])
else
  ttl = redis.call('pttl', KEYS[1])
end
local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4])
if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then
  redis.call('rpush', KEYS[2], ARGV[2])
end
return ttl
LUA

our $fair_release = <<'LUA';
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then return nil end
if redis.call('hincrby', KEYS[1], ARGV[2], -1) > 0 then return 0 end
redis.call('del', KEYS[1])
local next = redis.call('lindex', KEYS[2], 0)
if next ~= false then
  redis.call('publish', KEYS[4] .. ':' .. next, ARGV[1])
end
return 1
LUA

# ---- RReadWriteLock ----
#
# Its scripts, written from PROTOCOL.md (a hash N with field "mode" and one
# field per holder; read holds' timeout keys "{N}:<id>:rwlock_timeout:<k>";
# channel "redisson_rwlock:{N}").  For Redisson id "<uuid>:<thread>":
#   write acquire  KEYS: N;  ARGV: lease ms, "<id>:write"
#   write release  KEYS: N, channel;  ARGV: message, lease ms, "<id>:write"
#   read acquire   KEYS: N, "{N}:<id>:rwlock_timeout";  ARGV: lease ms, id, "<id>:write"
#   read release   KEYS: N, channel, "{N}:<id>:rwlock_timeout", "{N}";  ARGV: message, id
# (test/t/008_rwlock.pl, bench/redisson_pairs.pl).

our $rw_write_acquire = <<'LUA';
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call('hset', KEYS[1], 'mode', 'write')
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], redis.call('pttl', KEYS[1]) + ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])
LUA
our $rw_write_release = <<'LUA';
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call('publish', KEYS[2], ARGV[1])
  return 1
end
if mode == 'write' then
  if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end
  if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 0
  end
  redis.call('hdel', KEYS[1], ARGV[3])
  if redis.call('hlen', KEYS[1]) == 1 then
    redis.call('del', KEYS[1])
    redis.call('publish', KEYS[2], ARGV[1])
  else
    redis.call('hset', KEYS[1], 'mode', 'read')
  end
  return 1
end
return nil
LUA
our $rw_read_acquire = <<'LUA';
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call('hset', KEYS[1], 'mode', 'read')
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('set', KEYS[2] .. ':1', 1)
  redis.call('pexpire', KEYS[2] .. ':1', ARGV[1])
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if mode == 'read' or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
  local ind = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('set', KEYS[2] .. ':' .. ind, 1)
  redis.call('pexpire', KEYS[2] .. ':' .. ind, ARGV[1])
  redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), ARGV[1]))
  return nil
end
return redis.call('pttl', KEYS[1])
LUA
our $rw_read_release = <<'LUA';
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call('publish', KEYS[2], ARGV[1])
  return 1
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then return nil end
local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if counter == 0 then redis.call('hdel', KEYS[1], ARGV[2]) end
redis.call('del', KEYS[3] .. ':' .. (counter + 1))
if redis.call('hlen', KEYS[1]) > 1 then
  local maxRemainTime = -3
  for n, key in ipairs(redis.call('hkeys', KEYS[1])) do
    counter = tonumber(redis.call('hget', KEYS[1], key))
    if type(counter) == 'number' then
      for i = counter, 1, -1 do
        maxRemainTime = math.max(maxRemainTime,
          redis.call('pttl', KEYS[4] .. ':' .. key .. ':rwlock_timeout:' .. i))
      end
    end
  end
  if maxRemainTime > 0 then
    redis.call('pexpire', KEYS[1], maxRemainTime)
    return 0
  end
  if mode == 'write' then return 0 end
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
return 1
LUA

# ---- What Redisson 3.2x-4.x sends, for the bench ----
#
# bench/redisson_pairs.pl measures Redis's time for what a Java client
# running Redisson (3.22 and later, up to 4.7: the scripts below are
# written from what its RedissonFairLock, RedissonReadLock,
# RedissonWriteLock and RPermitExpirableSemaphore send, not copied) asks
# of Redis for one try-acquire and its release.  Besides the scripts:
# every unlock of RedissonBaseLock's kinds (RLock, RFencedLock, fair, read,
# write) is followed by a DEL of its unlock latch (a second command per
# release; bench/replay.c sends it).  The tests' scripts above stay as
# they are (their replies are what the tests check).

# RedissonFairLock's tryLock() (no wait: the script it sends for
# EVAL_NULL_BOOLEAN).  KEYS: lock, queue, deadlines; ARGV: lease ms,
# holder, now ms, wait ms.  nil acquired, 1 not.
our $fair_try_acquire = <<'LUA';
while true do
  local first = redis.call('lindex', KEYS[2], 0)
  if first == false then break end
  local timeout = redis.call('zscore', KEYS[3], first)
  if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[3]) then
    redis.call('zrem', KEYS[3], first)
    redis.call('lpop', KEYS[2])
  else break end
end
if (redis.call('exists', KEYS[1]) == 0) and ((redis.call('exists', KEYS[2]) == 0)
    or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], ARGV[2])
  local keys = redis.call('zrange', KEYS[3], 0, -1)
  for i = 1, #keys, 1 do
    redis.call('zincrby', KEYS[3], -tonumber(ARGV[4]), keys[i])
  end
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return 1
LUA

# RedissonFairLock's unlock, with the unlock latch.  KEYS: lock, queue,
# deadlines, channel prefix, unlock latch; ARGV: message, lease ms,
# holder, now ms, publish command, latch ms.
our $fair_release_latch = <<'LUA';
local val = redis.call('get', KEYS[5])
if val ~= false then return tonumber(val) end
while true do
  local first = redis.call('lindex', KEYS[2], 0)
  if first == false then break end
  local timeout = redis.call('zscore', KEYS[3], first)
  if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[4]) then
    redis.call('zrem', KEYS[3], first)
    redis.call('lpop', KEYS[2])
  else break end
end
if redis.call('exists', KEYS[1]) == 0 then
  local nxt = redis.call('lindex', KEYS[2], 0)
  if nxt ~= false then redis.call(ARGV[5], KEYS[4] .. ':' .. nxt, ARGV[1]) end
  redis.call('set', KEYS[5], 1, 'px', ARGV[6])
  return 1
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if counter > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  redis.call('set', KEYS[5], 0, 'px', ARGV[6])
  return 0
end
redis.call('del', KEYS[1])
redis.call('set', KEYS[5], 1, 'px', ARGV[6])
local nxt = redis.call('lindex', KEYS[2], 0)
if nxt ~= false then redis.call(ARGV[5], KEYS[4] .. ':' .. nxt, ARGV[1]) end
return 1
LUA

# RedissonWriteLock's unlock, with the unlock latch.  KEYS: N, channel,
# unlock latch; ARGV: message, lease ms, "<id>:write", publish command,
# latch ms.
our $rw_write_release_latch = <<'LUA';
local val = redis.call('get', KEYS[3])
if val ~= false then return tonumber(val) end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call(ARGV[4], KEYS[2], ARGV[1])
  redis.call('set', KEYS[3], 1, 'px', ARGV[5])
  return nil
end
if mode == 'write' then
  if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end
  local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1)
  if counter > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('set', KEYS[3], 0, 'px', ARGV[5])
    return 0
  end
  redis.call('hdel', KEYS[1], ARGV[3])
  if redis.call('hlen', KEYS[1]) == 1 then
    redis.call('del', KEYS[1])
    redis.call(ARGV[4], KEYS[2], ARGV[1])
  else
    redis.call('hset', KEYS[1], 'mode', 'read')
  end
  redis.call('set', KEYS[3], 1, 'px', ARGV[5])
  return 1
end
return nil
LUA

# RedissonReadLock's unlock, with the unlock latch.  KEYS: N, channel,
# "{N}:<id>:rwlock_timeout", "{N}", unlock latch; ARGV: message, id,
# publish command, latch ms.
our $rw_read_release_latch = <<'LUA';
local val = redis.call('get', KEYS[5])
if val ~= false then return tonumber(val) end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call(ARGV[3], KEYS[2], ARGV[1])
  redis.call('set', KEYS[5], 1, 'px', ARGV[4])
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then return nil end
local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if counter == 0 then redis.call('hdel', KEYS[1], ARGV[2]) end
redis.call('del', KEYS[3] .. ':' .. (counter + 1))
if redis.call('hlen', KEYS[1]) > 1 then
  local maxRemainTime = -3
  for n, key in ipairs(redis.call('hkeys', KEYS[1])) do
    counter = tonumber(redis.call('hget', KEYS[1], key))
    if type(counter) == 'number' then
      for i = counter, 1, -1 do
        maxRemainTime = math.max(maxRemainTime,
          redis.call('pttl', KEYS[4] .. ':' .. key .. ':rwlock_timeout:' .. i))
      end
    end
  end
  if maxRemainTime > 0 then
    redis.call('pexpire', KEYS[1], maxRemainTime)
    redis.call('set', KEYS[5], 0, 'px', ARGV[4])
    return 0
  end
  if mode == 'write' then
    redis.call('set', KEYS[5], 0, 'px', ARGV[4])
    return 0
  end
end
redis.call('del', KEYS[1])
redis.call(ARGV[3], KEYS[2], ARGV[1])
redis.call('set', KEYS[5], 1, 'px', ARGV[4])
return 1
LUA

# RPermitExpirableSemaphore's tryAcquire and tryRelease as Redisson sends
# them: permit ids as their 16 raw bytes (Java decodes the hex; no hex
# work in the script).  tryAcquire KEYS: permits, "{N}:timeout", channel;
# ARGV: permits, expiry, now, the non-expirable score, publish command,
# then one raw id per permit.  tryRelease KEYS: permits, channel,
# "{N}:timeout"; ARGV: raw id, 1, now, publish command.
our $sem_try_acquire_raw = <<'LUA';
local gone = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1])
if #gone > 0 then
  redis.call('zrem', KEYS[2], unpack(gone))
  local v = redis.call('incrby', KEYS[1], #gone)
  if tonumber(v) > 0 then redis.call(ARGV[5], KEYS[3], v) end
end
local have = redis.call('get', KEYS[1])
if have ~= false and tonumber(have) >= tonumber(ARGV[1]) then
  redis.call('decrby', KEYS[1], ARGV[1])
  for i = 6, #ARGV, 1 do
    redis.call('zadd', KEYS[2], ARGV[2], ARGV[i])
  end
  local ttl = redis.call('pttl', KEYS[1])
  if ttl > 0 then redis.call('pexpire', KEYS[2], ttl) end
  return 'OK'
end
local v = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES')
if v[1] ~= nil and v[2] ~= ARGV[4] then return ':' .. tostring(v[2]) end
return nil
LUA

our $sem_release_raw = <<'LUA';
local expire = redis.call('zscore', KEYS[3], ARGV[1])
local removed = redis.call('zrem', KEYS[3], ARGV[1])
if tonumber(removed) ~= 1 then return 0 end
local value = redis.call('incrby', KEYS[1], ARGV[2])
redis.call(ARGV[4], KEYS[2], value)
if tonumber(expire) <= tonumber(ARGV[3]) then return 0 end
return 1
LUA

1;
