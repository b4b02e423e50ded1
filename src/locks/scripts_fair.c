/*-------------------------------------------------------------------------
 *
 * scripts_fair.c
 *	  The fair lock's Lua scripts (Redisson's fair-lock layout, PROTOCOL.md):
 *	  acquire (or queue), release (telling only the queue's head), give up.
 *	  scripts.c lists them with the others and computes their digests.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "locks/scripts_lua.h"

/*
 * Lua: drop queue heads whose deadline (ZSET KEYS[3]) is before ARGV[now],
 * but never "self", the waiter running the script: it is alive, and
 * refreshes its deadline instead.  Leaves the queue's head then in
 * "qhead" (false: nobody queues), so that the script does not ask again.
 */
#define FAIR_DROP_STALE_HEADS(now, self) \
"local qhead\n" \
"while true do\n" \
"  qhead = redis.call('lindex', KEYS[2], 0)\n" \
"  if qhead == false or qhead == " self " then break end\n" \
"  local d = tonumber(redis.call('zscore', KEYS[3], qhead))\n" \
"  if d ~= nil and d > tonumber(" now ") then break end\n" \
"  redis.call('zrem', KEYS[3], qhead)\n" \
"  redis.call('lpop', KEYS[2])\n" \
"end\n"

/*
 * fair acquire: KEYS[1] lock, KEYS[2] queue, KEYS[3] deadlines, KEYS[4]
 * (an owner token's) the request's latch, its TTL ms ARGV[7]; ARGV[1]
 * lease ms, ARGV[2] holder, ARGV[3] wait ms (how long a queued waiter
 * counts as alive past its predecessor's deadline), ARGV[4] now (epoch
 * ms), ARGV[5] '1' to queue when the lock cannot be taken, '0' not to,
 * ARGV[6] the channel prefix redisson_lock__channel:{N}.
 * The lock goes to the queue's head, or to anyone when nobody queues.  A
 * queued waiter that asks again is alive: its deadline is pushed out
 * (never in) to where Redisson's queue puts it, its predecessor's deadline
 * (the lock's expiry, at the head) plus its own wait, so that the chain
 * of deadlines stays cumulative with Redisson waiters in it, and only
 * waiters that stopped asking expire.  (No ZADD GT: Redis 6.0 lacks it.)
 * A free lock's head that is not the caller has its wait to take it: its
 * deadline is brought in to now plus the wait, so that a head that died
 * while the lock was held for long (its deadline was the holder's lease
 * plus the wait) is dropped that soon, not when that lease would have
 * ended.  A live head is told so on its own channel (ARGV[6], the channel
 * prefix redisson_lock__channel:{N}: a Redisson waiter may sleep until its
 * old deadline), and rlock's ask within 5 s anyway.
 * Returns {1, count}, {0, pttl}, or {2, mode} for a read/write lock.
 */
const char rlock_fair_acquire_body[] =
REQUEST_LATCH_BEGIN("4")
FAIR_DROP_STALE_HEADS("ARGV[4]", "ARGV[2]")
"if redis.call('hexists', KEYS[1], 'mode') == 1 then\n"
"  return {2, redis.call('hget', KEYS[1], 'mode')}\n"
"end\n"
"if redis.call('exists', KEYS[1]) == 0 then\n"
"  local head = qhead\n"
"  if head ~= false and head ~= ARGV[2] then\n"
"    local cap = tonumber(ARGV[4]) + tonumber(ARGV[3])\n"
"    if tonumber(redis.call('zscore', KEYS[3], head)) > cap then\n"
"      redis.call('zadd', KEYS[3], cap, head)\n"
"      redis.pcall('publish', ARGV[6] .. ':' .. head, '0')\n"
"    end\n"
"  end\n"
"  if head == false or head == ARGV[2] then\n"
"    if head == ARGV[2] then\n"
"      redis.call('lpop', KEYS[2])\n"
"      redis.call('zrem', KEYS[3], ARGV[2])\n"
"      for _, k in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do\n"
"        redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), k)\n"
"      end\n"
"    end\n"
"    redis.call('hset', KEYS[1], ARGV[2], 1)\n"
"    redis.call('pexpire', KEYS[1], ARGV[1])\n"
"    return {1, 1}\n"
"  end\n"
"elseif redis.call('hexists', KEYS[1], ARGV[2]) == 1 then\n"
"  local n = redis.call('hincrby', KEYS[1], ARGV[2], 1)\n"
RAISE_TTL("KEYS[1]", "ARGV[1]")
"  return {1, n}\n"
"end\n"
"local pttl = redis.call('pttl', KEYS[1])\n"
"if ARGV[5] ~= '1' then return {0, pttl} end\n"
"local now = tonumber(ARGV[4])\n"
"local wait = tonumber(ARGV[3])\n"
"local mine = redis.call('zscore', KEYS[3], ARGV[2])\n"
"if mine then\n"
"  local prev = false\n"
"  for _, q in ipairs(redis.call('lrange', KEYS[2], 0, -1)) do\n"
"    if q == ARGV[2] then break end\n"
"    prev = q\n"
"  end\n"
"  local want = now + math.max(pttl, 0) + wait\n"
"  if prev then\n"
"    local pd = redis.call('zscore', KEYS[3], prev)\n"
"    if pd then want = tonumber(pd) + wait end\n"
"  end\n"
"  if want > tonumber(mine) then redis.call('zadd', KEYS[3], want, ARGV[2]) end\n"
"  return {0, pttl}\n"
"end\n"
"local last = redis.call('lindex', KEYS[2], -1)\n"
"local base = math.max(pttl, 0)\n"
"if last ~= false then\n"
"  base = math.max(tonumber(redis.call('zscore', KEYS[3], last) or now) - now, 0)\n"
"end\n"
"redis.call('zadd', KEYS[3], now + base + wait, ARGV[2])\n"
"redis.call('rpush', KEYS[2], ARGV[2])\n"
"return {0, pttl}\n"
REQUEST_LATCH_END("ARGV[7]");

/*
 * fair release: KEYS[1] lock, KEYS[2] queue, KEYS[3] deadlines, KEYS[4]
 * unlock latch; ARGV[1] holder, ARGV[2] levels, ARGV[3] lease ms of the
 * remaining holds (0: keep), ARGV[4] latch TTL ms, ARGV[5] now (epoch
 * ms), ARGV[6] the channel prefix redisson_lock__channel:{N}.  As the
 * exclusive release, but the last release tells only the queue's head, on
 * its own channel (with nobody queued, the lock's channel, where waiters
 * of the same name as an exclusive lock listen).
 */
const char rlock_fair_release_body[] =
"local v = redis.call('get', KEYS[4])\n"
"if v then return tonumber(v) end\n"
/* REFUSE_RW_KEYS1, and this holder's count in the same call */
"local f = redis.call('hmget', KEYS[1], 'mode', ARGV[1])\n"
"if f[1] then return redis.error_reply('RLOCKKIND ' .. f[1]) end\n"
FAIR_DROP_STALE_HEADS("ARGV[5]", "false")
"local c = f[2]\n"
"if not c then return nil end\n"
"local n = tonumber(c) - tonumber(ARGV[2])\n"
"if n > 0 then\n"
"  redis.call('set', KEYS[4], 0, 'px', ARGV[4])\n"
"  redis.call('hset', KEYS[1], ARGV[1], n)\n"
"  if tonumber(ARGV[3]) > 0 then\n"
RAISE_TTL("KEYS[1]", "ARGV[3]")
"  end\n"
"  return 0\n"
"end\n"
"local head = qhead\n"
"local ch = ARGV[6]\n"
"if head then ch = ARGV[6] .. ':' .. head end\n"
PUBLISH_OR_REFUSE("ch", "'0'")
"redis.call('set', KEYS[4], 1, 'px', ARGV[4])\n"
"redis.call('del', KEYS[1])\n"
"return 1\n";

/*
 * fair give-up (a waiter stops waiting): KEYS[1] lock, KEYS[2] queue,
 * KEYS[3] deadlines; ARGV[1] holder, ARGV[2] wait ms, ARGV[3] channel
 * prefix.  Leaves the queue, moves the deadlines of those behind it in by
 * the wait, and when it was the head of a free lock tells the next head.
 * Returns 1 when it was queued.
 */
const char rlock_fair_give_up_body[] =
"local queue = redis.call('lrange', KEYS[2], 0, -1)\n"
"local i = 1\n"
"while i <= #queue and queue[i] ~= ARGV[1] do i = i + 1 end\n"
"if i > #queue then\n"
"  redis.call('zrem', KEYS[3], ARGV[1])\n"
"  return 0\n"
"end\n"
"for j = i + 1, #queue do\n"
"  redis.call('zincrby', KEYS[3], -tonumber(ARGV[2]), queue[j])\n"
"end\n"
"redis.call('zrem', KEYS[3], ARGV[1])\n"
"redis.call('lrem', KEYS[2], 0, ARGV[1])\n"
"if i == 1 and redis.call('exists', KEYS[1]) == 0 then\n"
"  local head = redis.call('lindex', KEYS[2], 0)\n"
"  if head then redis.call('publish', ARGV[3] .. ':' .. head, '0') end\n"
"end\n"
"return 1\n";
