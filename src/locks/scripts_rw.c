/*-------------------------------------------------------------------------
 *
 * scripts_rw.c
 *	  The Lua scripts of the read/write lock (Redisson RReadWriteLock,
 *	  PROTOCOL.md): read and write acquire and release, and reconcile.
 *	  scripts.c names them, computes their digests and sends them.
 *
 * A read/write lock's key is shared by many holds (readers, a writer that
 * also reads), each with its own promised lease: these scripts keep the key
 * alive as long as the longest of them, never shorter (SPEC 6).
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "locks/scripts_lua.h"

/*
 * Lua: the longest PTTL of this holder's read holds' timeout keys, 1 to
 * "count" (needs "base"), in "mine" (-2: none left).
 */
#define RW_MINE(field, count) \
"local mine = -2\n" \
"for k = 1, " count " do\n" \
"  mine = math.max(mine, redis.call('pttl', base .. ':' .. " field " .. ':rwlock_timeout:' .. k))\n" \
"end\n"

/*
 * Lua: drop the timeout keys of read holds "from" down to "to" + 1 of
 * field; the holds that remain (1 to "to") keep at least "mine", the
 * longest lease the holder had: a release lowers a count, and which of
 * the holder's holds it ends is not known, so what remains is promised
 * the longest.  A remaining hold whose own timeout key has already expired
 * (a short lease re-entered with a longer one) gets it back: otherwise
 * another reader's release would find no live read hold of this holder and
 * delete the lock under it.
 */
#define RW_DROP_READS(field, from, to) \
"for k = " from ", math.max(" to " + 1, 1), -1 do\n" \
"  redis.call('del', base .. ':' .. " field " .. ':rwlock_timeout:' .. k)\n" \
"end\n" \
"if mine > 0 then\n" \
"  for k = 1, " to " do\n" \
"    local tk = base .. ':' .. " field " .. ':rwlock_timeout:' .. k\n" \
"    if redis.call('pttl', tk) < mine then redis.call('set', tk, 1, 'px', mine) end\n" \
"  end\n" \
"end\n"

/*
 * Lua: the longest PTTL of any read hold's timeout key (needs "base"), in
 * "longest" (-3: none).  A lock left in read mode lives that long.
 */
#define RW_LONGEST_READ \
"local longest = -3\n" \
"for _, f in ipairs(redis.call('hkeys', KEYS[1])) do\n" \
"  if f ~= 'mode' and string.sub(f, -6) ~= ':write' then\n" \
"    for k = 1, tonumber(redis.call('hget', KEYS[1], f)) or 0 do\n" \
"      longest = math.max(longest, redis.call('pttl', base .. ':' .. f .. ':rwlock_timeout:' .. k))\n" \
"    end\n" \
"  end\n" \
"end\n"

/*
 * read acquire: KEYS[1] lock, KEYS[2] (an owner token's) the request's
 * latch (REQUEST_LATCH_BEGIN); ARGV[1] lease ms, ARGV[2] holder (the read
 * field), ARGV[3] "<holder>:write", ARGV[5] the latch's TTL ms.  Many readers share the lock; a writer
 * may also read (downgrade).  Each read hold k gets a timeout key with its
 * own lease, and the lock's TTL is at least the longest of them.
 * ARGV[4] (optional, > 0) bounds the read holds owner tokens' fields
 * ("rlock-owner:...") have in all: at that many, one more for an owner
 * token is refused, {4, their holds}, before anything is written (SPEC 8:
 * every read script on the lock reads each hold's timeout key).
 * Returns {1, count}, {0, pttl} when a writer holds it, {2, kind} when the
 * name is an exclusive or a fair lock.  A hash with a "mode" that is not a
 * read/write lock's (another mode, no expiry, a field that is not a
 * holder's count) is refused as WRONGTYPE: a lock function touches only
 * locks (SPEC 8).
 */
const char rlock_read_acquire_body[] =
REQUEST_LATCH_BEGIN("2")
FAIR_QUEUE_OF_KEYS1
"local mode = redis.call('hget', KEYS[1], 'mode')\n"
"if mode then\n"
"  local bad = (mode ~= 'read' and mode ~= 'write') or redis.call('pttl', KEYS[1]) < 0\n"
"  local kv = redis.call('hgetall', KEYS[1])\n"
"  local holders = 0\n"
"  local owned = 0\n"
"  for i = 1, #kv, 2 do\n"
"    if kv[i] ~= 'mode' then\n"
"      local c = tonumber(kv[i + 1])\n"
"      if not string.find(kv[i], ':', 1, true) or not c or c < 1 or c ~= math.floor(c) then bad = true end\n"
"      holders = holders + 1\n"
"      if c and string.sub(kv[i], 1, 12) == 'rlock-owner:' then owned = owned + c end\n"
"    end\n"
"  end\n"
"  if bad or holders == 0 then\n"
"    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')\n"
"  end\n"
"  local cap = tonumber(ARGV[4] or '0') or 0\n"
"  if cap > 0 and owned >= cap then return {4, owned} end\n"
"end\n"
"local n\n"
"if mode == false then\n"
"  if redis.call('exists', KEYS[1]) == 1 or redis.call('exists', fairq) == 1 then\n"
"    return {2, redis.call('exists', fairq) == 1 and 'fair' or 'exclusive'}\n"
"  end\n"
/* a new lock: its mode and this first hold in one call */
"  redis.call('hset', KEYS[1], 'mode', 'read', ARGV[2], 1)\n"
"  n = 1\n"
"elseif mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 0 then\n"
"  return {0, redis.call('pttl', KEYS[1])}\n"
"else\n"
"  n = redis.call('hincrby', KEYS[1], ARGV[2], 1)\n"
"end\n"
RW_TIMEOUT_BASE
"redis.call('set', base .. ':' .. ARGV[2] .. ':rwlock_timeout:' .. n, 1, 'px', ARGV[1])\n"
/* a new lock has no TTL yet: no need to ask */
"if mode == false or redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then\n"
"  redis.call('pexpire', KEYS[1], ARGV[1])\n"
"end\n"
"return {1, n}\n"
REQUEST_LATCH_END("ARGV[5]");

/*
 * write acquire: KEYS[1] lock, KEYS[2] (an owner token's) the request's
 * latch; ARGV[1] lease ms, ARGV[2] "<holder>:write", ARGV[3] holder (its
 * read field), ARGV[4] the latch's TTL ms.  Returns {1, count}, {0, pttl} when held
 * by others, {2, kind} when the name is an exclusive or a fair lock,
 * {3, 0} when this holder holds it for reading only (an upgrade, which
 * would wait for itself forever).
 */
const char rlock_write_acquire_body[] =
REQUEST_LATCH_BEGIN("2")
FAIR_QUEUE_OF_KEYS1
"local mode = redis.call('hget', KEYS[1], 'mode')\n"
"if mode == false then\n"
"  if redis.call('exists', KEYS[1]) == 1 or redis.call('exists', fairq) == 1 then\n"
"    return {2, redis.call('exists', fairq) == 1 and 'fair' or 'exclusive'}\n"
"  end\n"
"  redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], 1)\n"
"  redis.call('pexpire', KEYS[1], ARGV[1])\n"
"  return {1, 1}\n"
"end\n"
"if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then\n"
"  local n = redis.call('hincrby', KEYS[1], ARGV[2], 1)\n"
"  local ttl = redis.call('pttl', KEYS[1])\n"
"  redis.call('pexpire', KEYS[1], math.max(ttl, 0) + tonumber(ARGV[1]))\n"
"  return {1, n}\n"
"end\n"
"if mode == 'read' and redis.call('hexists', KEYS[1], ARGV[3]) == 1 then\n"
"  return {3, 0}\n"
"end\n"
"return {0, redis.call('pttl', KEYS[1])}\n"
REQUEST_LATCH_END("ARGV[4]");

/*
 * Lua: a read/write release refuses a lock that is not a read/write lock
 * ("RLOCKKIND exclusive"); returns nil when there is no such lock.  Sets
 * "mode", and "c" to the field's count (false: none), read in the same
 * call.
 */
#define REFUSE_NON_RW_KEYS1(field) \
"local mf = redis.call('hmget', KEYS[1], 'mode', " field ")\n" \
"local mode, c = mf[1], mf[2]\n" \
"if mode == false then\n" \
"  if redis.call('exists', KEYS[1]) == 1 then\n" \
"    return redis.error_reply('RLOCKKIND exclusive')\n" \
"  end\n" \
"  return nil\n" \
"end\n"

/*
 * read release: KEYS[1] lock, KEYS[2] channel, KEYS[3] unlock latch;
 * ARGV[1] holder, ARGV[2] levels, ARGV[3] latch TTL ms.  Drops the timeout
 * keys of the released holds; while other holds remain the lock's TTL is
 * the longest remaining read timeout; the last release deletes the lock and
 * publishes "0".  The outcome is worked out before anything is written, so
 * that what Redis may refuse (PUBLISH, the latch's key) fails first.
 * Returns nil when not held, 0 when still held, 1 when released.
 */
const char rlock_read_release_body[] =
"local v = redis.call('get', KEYS[3])\n"
"if v then return tonumber(v) end\n"
REFUSE_NON_RW_KEYS1("ARGV[1]")
"if c == false then return nil end\n"
"c = tonumber(c)\n"
"local n = c - tonumber(ARGV[2])\n"
RW_TIMEOUT_BASE
RW_MINE("ARGV[1]", "c")
"local others = 0\n"
"local maxttl = -3\n"
"for _, f in ipairs(redis.call('hkeys', KEYS[1])) do\n"
"  if f ~= 'mode' and (f ~= ARGV[1] or n > 0) then others = others + 1 end\n"
"  if f == ARGV[1] then\n"
"    if n > 0 then maxttl = math.max(maxttl, mine) end\n"
"  elseif f ~= 'mode' then\n"
"    for k = tonumber(redis.call('hget', KEYS[1], f)) or 0, 1, -1 do\n"
"      maxttl = math.max(maxttl, redis.call('pttl', base .. ':' .. f .. ':rwlock_timeout:' .. k))\n"
"    end\n"
"  end\n"
"end\n"
"local r = 1\n"
"if others > 0 and (maxttl > 0 or mode == 'write') then r = 0 end\n"
"if r == 1 then\n"
PUBLISH_OR_REFUSE("KEYS[2]", "'0'")
"end\n"
"redis.call('set', KEYS[3], r, 'px', ARGV[3])\n"
RW_DROP_READS("ARGV[1]", "c", "n")
"if r == 1 then\n"
"  redis.call('del', KEYS[1])\n"
"else\n"
"  if n > 0 then redis.call('hset', KEYS[1], ARGV[1], n)\n"
"  else redis.call('hdel', KEYS[1], ARGV[1]) end\n"
"  if mode == 'write' then\n"
"    if maxttl > 0 then\n"
RAISE_TTL("KEYS[1]", "maxttl")
"    end\n"
"  elseif maxttl > 0 then\n"
"    redis.call('pexpire', KEYS[1], maxttl)\n"
"  end\n"
"end\n"
"return r\n";

/*
 * write release: KEYS[1] lock, KEYS[2] channel, KEYS[3] unlock latch;
 * ARGV[1] "<holder>:write", ARGV[2] levels, ARGV[3] latch TTL ms, ARGV[4]
 * lease ms of the remaining write holds (0: keep the TTL).  The last write
 * hold's release deletes the lock, or leaves it in read mode when the
 * writer also reads; either way it publishes "1" (first: Redis may refuse
 * it), which wakes readers and writers.  Returns nil when not held, 0 when
 * still held, 1 when released.
 */
const char rlock_write_release_body[] =
"local v = redis.call('get', KEYS[3])\n"
"if v then return tonumber(v) end\n"
REFUSE_NON_RW_KEYS1("ARGV[1]")
"if mode ~= 'write' then return nil end\n"
"if c == false then return nil end\n"
"local n = tonumber(c) - tonumber(ARGV[2])\n"
"if n > 0 then\n"
"  redis.call('set', KEYS[3], 0, 'px', ARGV[3])\n"
"  redis.call('hset', KEYS[1], ARGV[1], n)\n"
"  if tonumber(ARGV[4]) > 0 then\n"
RAISE_TTL("KEYS[1]", "ARGV[4]")
"  end\n"
"  return 0\n"
"end\n"
PUBLISH_OR_REFUSE("KEYS[2]", "'1'")
"redis.call('set', KEYS[3], 1, 'px', ARGV[3])\n"
"redis.call('hdel', KEYS[1], ARGV[1])\n"
"if redis.call('hlen', KEYS[1]) == 1 then\n"
"  redis.call('del', KEYS[1])\n"
"else\n"
"  redis.call('hset', KEYS[1], 'mode', 'read')\n"
RW_TIMEOUT_BASE
RW_LONGEST_READ
"  if longest > 0 then\n"
RAISE_TTL("KEYS[1]", "longest")
"  end\n"
"end\n"
"return 1\n";

/*
 * read/write reconcile: KEYS[1] lock, KEYS[2] channel; ARGV[1] the
 * holder's field, ARGV[2] the count it should have, ARGV[3] 'r' or 'w'.
 * Lowers the count to the target, as the releases would.  Returns the
 * count found (-1: none).
 */
const char rlock_rw_reconcile_body[] =
"local mode = redis.call('hget', KEYS[1], 'mode')\n"
"if mode == false then\n"
"  if redis.call('exists', KEYS[1]) == 1 then\n"
"    return redis.error_reply('RLOCKKIND exclusive')\n"
"  end\n"
"  return -1\n"
"end\n"
"local c = redis.call('hget', KEYS[1], ARGV[1])\n"
"if not c then return -1 end\n"
"c = tonumber(c)\n"
"local t = tonumber(ARGV[2])\n"
"if c > t then\n"
"  if t <= 0 and (redis.call('hlen', KEYS[1]) <= 2 or ARGV[3] == 'w') then\n"
"    redis.call('publish', KEYS[2], ARGV[3] == 'w' and '1' or '0')\n"
"  end\n"
RW_TIMEOUT_BASE
"  if ARGV[3] == 'r' then\n"
RW_MINE("ARGV[1]", "c")
RW_DROP_READS("ARGV[1]", "c", "t")
"  end\n"
"  if t > 0 then\n"
"    redis.call('hset', KEYS[1], ARGV[1], t)\n"
"  else\n"
"    redis.call('hdel', KEYS[1], ARGV[1])\n"
"    if redis.call('hlen', KEYS[1]) <= 1 then\n"
"      redis.call('del', KEYS[1])\n"
"    elseif ARGV[3] == 'w' and redis.call('hget', KEYS[1], 'mode') == 'write' then\n"
"      redis.call('hset', KEYS[1], 'mode', 'read')\n"
RW_LONGEST_READ
"      if longest > 0 then\n"
RAISE_TTL("KEYS[1]", "longest")
"      end\n"
"    end\n"
"  end\n"
"end\n"
"return c\n";
