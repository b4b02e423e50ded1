/*-------------------------------------------------------------------------
 *
 * scripts_wait.c
 *	  The Lua scripts of the wait graph (SPEC.md section 5.6): a waiter
 *	  makes its wait known, every wait is read at once, and a lock's
 *	  blockers are read from its keys.  scripts.c lists them with the others
 *	  and computes their digests.
 *
 * A wait is the hash {rlock:servers}:wait:<holder id>, expiring by itself
 * (the waiter refreshes it), indexed by the sorted set {rlock:servers}:waits
 * (member: the holder id, score: when the hash expires, epoch ms).  Both
 * share the hash tag of the servers' announcements (worker/announce.c), so
 * that one script reads every wait and every server's name at once, on one
 * node of a Cluster.  Times are Redis's (TIME): the servers' clocks never
 * meet.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "locks/scripts_lua.h"

#define NOW_MS \
"local tm = redis.call('time')\n" \
"local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)\n"

/*
 * wait register: KEYS[1] the wait's hash, KEYS[2] the index; ARGV[1] its
 * TTL ms, ARGV[2] how long the wait has lasted (ms), ARGV[3] when it began
 * as a former call answered (0: not known yet), ARGV[4] the holder id,
 * ARGV[5..] field, value pairs.  Writes the hash afresh with "since" (Redis
 * time, epoch ms), indexes it, drops expired members of the index; returns
 * since.
 */
const char	rlock_wait_register_body[] =
NOW_MS
"local since = tonumber(ARGV[3])\n"
"if since == nil or since <= 0 then since = now - tonumber(ARGV[2]) end\n"
"redis.call('del', KEYS[1])\n"
"redis.call('hset', KEYS[1], 'since', since, unpack(ARGV, 5))\n"
"redis.call('pexpire', KEYS[1], tonumber(ARGV[1]))\n"
"redis.call('zadd', KEYS[2], now + tonumber(ARGV[1]), ARGV[4])\n"
"redis.call('zremrangebyscore', KEYS[2], '-inf', now)\n"
"return since\n";

/*
 * wait read: KEYS[1] the waits' index, KEYS[2] the servers' index; ARGV[1]
 * the prefix of a wait's hash, ARGV[2] of a server's, ARGV[3] the most
 * waits read (0: only the servers).  Returns {now, {{holder, field, value, ...}, ...}, {uuid,
 * name, ...}}: the waits not expired, the servers announced.
 */
const char	rlock_wait_read_body[] =
NOW_MS
"local recs = {}\n"
"if tonumber(ARGV[3]) > 0 then\n"
"  local ms = redis.call('zrangebyscore', KEYS[1], now, '+inf', 'limit', 0, tonumber(ARGV[3]))\n"
"  for _, m in ipairs(ms) do\n"
"    local h = redis.call('hgetall', ARGV[1] .. m)\n"
"    if #h > 0 then table.insert(h, 1, m); table.insert(recs, h) end\n"
"  end\n"
"end\n"
"local srv = {}\n"
"for _, u in ipairs(redis.call('zrangebyscore', KEYS[2], now, '+inf', 'limit', 0, 1000)) do\n"
"  local n = redis.call('hget', ARGV[2] .. u, 'name')\n"
"  if n then table.insert(srv, u); table.insert(srv, n) end\n"
"end\n"
"return {now, recs, srv}\n";

/*
 * wait forget: KEYS[1] the waits' index; ARGV[1] the prefix of a wait's
 * hash, ARGV[2] the holder ids' prefix of a former run ("<uuid>:").
 * Deletes that run's waits; returns how many.
 */
const char	rlock_wait_forget_body[] =
"local n = 0\n"
"for _, m in ipairs(redis.call('zrange', KEYS[1], 0, -1)) do\n"
"  if string.sub(m, 1, #ARGV[2]) == ARGV[2] then\n"
"    redis.call('del', ARGV[1] .. m)\n"
"    redis.call('zrem', KEYS[1], m)\n"
"    n = n + 1\n"
"  end\n"
"end\n"
"return n\n";

/*
 * lock blockers: KEYS[1] the lock (a hash: exclusive, fenced, fair,
 * read/write, Redlock's on one master; or a semaphore's permits), KEYS[2]
 * the fair queue, KEYS[3] the semaphore's {N}:timeout; ARGV[1] the most
 * entries of each list.  Returns {mode, {holders}, {queue}}: mode is the
 * read/write lock's ("" for others), holders are the hash's fields (the
 * write side's ":write" taken off, "mode" left out) or the holders of the
 * permits not expired (a permit "<holder id>:<k>" names its holder; any
 * other, a Redisson client's, is shown as it is); queue is the fair queue.
 */
const char	rlock_lock_blockers_body[] =
"local most = tonumber(ARGV[1])\n"
"local t = redis.call('type', KEYS[1])['ok']\n"
"local mode, holders, queue = '', {}, {}\n"
"if t == 'hash' then\n"
"  local h = redis.call('hgetall', KEYS[1])\n"
"  for i = 1, #h, 2 do\n"
"    if h[i] == 'mode' then mode = h[i + 1]\n"
"    elseif #holders < most then\n"
"      local f = string.gsub(h[i], ':write$', '')\n"
"      table.insert(holders, f)\n"
"    end\n"
"  end\n"
"end\n"
"if redis.call('type', KEYS[3])['ok'] == 'zset' then\n"
NOW_MS
"  local seen = {}\n"
"  for _, m in ipairs(redis.call('zrangebyscore', KEYS[3], '(' .. now, '+inf', 'limit', 0, most * 4)) do\n"
"    local h = string.match(m, '^(%x+%-%x+%-%x+%-%x+%-%x+:.+):%d+$') or m\n"
"    if not seen[h] and #holders < most then seen[h] = true; table.insert(holders, h) end\n"
"  end\n"
"end\n"
"if redis.call('type', KEYS[2])['ok'] == 'list' then\n"
"  queue = redis.call('lrange', KEYS[2], 0, most - 1)\n"
"end\n"
"return {mode, holders, queue}\n";
