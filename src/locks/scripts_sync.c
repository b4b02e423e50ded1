/*-------------------------------------------------------------------------
 *
 * scripts_sync.c
 *	  The Lua scripts of the objects that are not locks: the count-down
 *	  latch (Redisson RCountDownLatch).  scripts.c names them, computes
 *	  their digests and sends them.
 *
 * A latch is a string key holding its count (absent: zero); setting a
 * count publishes "1" on redisson_countdownlatch__channel:{N}, and the
 * count-down that reaches zero deletes the key and publishes "0" there
 * (PROTOCOL.md, as extended in the project's notes).  A name is one kind
 * of object: every latch script refuses a lock's hash, and a name whose
 * semaphore permits key ({N}:timeout) exists, before it writes anything.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "locks/scripts_lua.h"

/*
 * Lua: KEYS[1] the latch, KEYS[3] the permits key a semaphore of the same
 * name would have.  Refuses what is not a latch ("RLOCKKIND lock" for a
 * hash, "RLOCKKIND semaphore", "RLOCKKIND value" for any other value, a
 * string that is not a decimal integer included), else sets "cur" to the
 * count (0 when absent; a Lua number, exact only to 2^53, so only compared)
 * and "v" to the stored text (false when absent).
 */
#define LATCH_COUNT_OF_KEYS1 \
"local t = redis.call('type', KEYS[1])['ok']\n" \
"if t == 'hash' then return redis.error_reply('RLOCKKIND lock') end\n" \
"if t ~= 'none' and t ~= 'string' then return redis.error_reply('RLOCKKIND value') end\n" \
"if redis.call('exists', KEYS[3]) == 1 then return redis.error_reply('RLOCKKIND semaphore') end\n" \
"local cur = 0\n" \
"local v = false\n" \
"if t == 'string' then\n" \
"  v = redis.call('get', KEYS[1])\n" \
"  if not string.match(v, '^%-?%d+$') or #v > 20 then return redis.error_reply('RLOCKKIND value') end\n" \
"  cur = tonumber(v)\n" \
"end\n"

/*
 * latch count: KEYS[1] latch, KEYS[2] its channel, KEYS[3] the semaphore
 * permits key of the name.  Returns the count: 0 at zero or absent, else
 * the stored text (a bulk string: exact whatever its size).
 */
const char rlock_latch_count_body[] =
LATCH_COUNT_OF_KEYS1
"if cur <= 0 then return 0 end\n"
"return v\n";

/*
 * latch set count (trySetCount): keys as above; ARGV[1] the count (>= 0).
 * Only a latch at zero (or absent) takes a count: returns 1 when set, 0
 * when the latch is counting.  A count of 0 leaves it absent.  Announces
 * the new count ("1") before writing, so that a refused PUBLISH changes
 * nothing.
 */
const char rlock_latch_set_count_body[] =
LATCH_COUNT_OF_KEYS1
"if cur > 0 then return 0 end\n"
"if tonumber(ARGV[1]) <= 0 then\n"
"  redis.call('del', KEYS[1])\n"
"  return 1\n"
"end\n"
PUBLISH_OR_REFUSE("KEYS[2]", "'1'")
"redis.call('set', KEYS[1], ARGV[1])\n"
"return 1\n";

/*
 * latch count down: keys as above.  Returns the count after it (0, or the
 * stored text: DECR's answer would pass through a Lua number, exact only
 * to 2^53); at zero the key is deleted and "0" published (once: a latch
 * already at zero or absent stays so, silently).
 */
const char rlock_latch_count_down_body[] =
LATCH_COUNT_OF_KEYS1
"if t == 'none' then return 0 end\n"
"if cur <= 1 then\n"
"  if cur == 1 then\n"
PUBLISH_OR_REFUSE("KEYS[2]", "'0'")
"  end\n"
"  redis.call('del', KEYS[1])\n"
"  return 0\n"
"end\n"
"redis.call('decr', KEYS[1])\n"
"return redis.call('get', KEYS[1])\n";
