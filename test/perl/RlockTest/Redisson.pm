
# Copyright (c) 2026, rlock developers

#
# Redisson's own scripts, for tests that play a Java client.
#
package RlockTest::Redisson;

use strict;
use warnings;

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

1;
