/*-------------------------------------------------------------------------
 *
 * scripts_sync.c
 *	  The Lua scripts of the objects that are not locks: the count-down
 *	  latch (Redisson RCountDownLatch).  scripts.c names them, computes
 *	  their digests and sends them.
 *
 * A latch is a string key holding its count (absent: zero); setting a
 * count publishes "1" on redisson_countdownlatch__channel__{N}, and the
 * count-down that reaches zero deletes the key and publishes "0" there
 * (PROTOCOL.md, as extended in the project's notes).  A name is one kind
 * of object: every latch script refuses a lock's hash, and a name whose
 * semaphore permits key ({N}:timeout) or marker ({N}:rlock_semaphore)
 * exists, before it writes anything.
 *
 * Only their own kind (SPEC.md 5.5): an integer string without rlock's
 * marker may be an application's counter or an object a Redisson client
 * made, and nothing tells them apart, so the scripts a role without a
 * grant reaches fail closed on it.  A latch count-down refuses an
 * unmarked count ("RLOCKKIND unmarked") unless the caller may adopt it
 * (ARGV flag: superuser or EXECUTE on rlock_latch_adopt), and never
 * touches a string that is not a positive decimal integer (Redisson
 * deletes a latch at zero); the semaphore's acquire refuses a permits key
 * or a {N}:timeout without the semaphore's marker unless the caller may
 * size semaphores (EXECUTE on rlock_semaphore_add_permits), which adopts
 * it.  Reading the permits available writes nothing.  A number outside
 * what the scripts handle exactly is "RLOCKRANGE", never a script error.
 *
 * Applied once (SPEC.md 6): a command resent after a lost reply must not
 * apply twice.  Every script here that changes a count (taking, giving
 * back, setting or adding permits, setting or counting down a latch,
 * deleting either) carries a request latch, a key of its own per call
 * (redisson_unlock_latch:{N}:<hex>, as a lock's release), where it writes
 * its answer: a replay finds it and answers as the first time, changing
 * nothing.  The others only read, or are idempotent (adopting, the
 * reconcile that sets a target).
 *
 * A semaphore is a string key holding the permits available, and the
 * sorted set {N}:timeout of the permits out, each an id scored by its
 * expiry (epoch ms); a release (or an expiry noticed) publishes the
 * permits available on redisson_sc:{N}.  The scripts that set or add
 * permits also write {N}:rlock_semaphore (if absent: whatever else has
 * that name is left alone), so that the latch's scripts refuse the name
 * even with no permit out: a role without the grant of
 * rlock_semaphore_add_permits cannot count a semaphore down and set it
 * anew through the latch.  (Taking permits does not mark it: a latch's
 * count taken as permits by mistake must stay usable as a latch.)  rlock's
 * permit ids are "<holder>:<k>", k = 1, 2, ...: a session's permits are
 * held like a lock's holds, one permit a hold (the k-th permit: k-th hold).
 *
 * Cost (SPEC.md 9, "Cost as work grows"): no script here reads the whole
 * of {N}:timeout.  A holder's permits are found by id (SEM_MINE: ZSCORE
 * of "<holder>:1", "<holder>:2", ...), kept contiguous from 1 by acquire
 * (adds above the highest, with ZADD NX: an id that exists is skipped,
 * never rescored, so that no permit leaves the total) and release (gives
 * back the highest); expired permits are found by ZRANGEBYSCORE 0 now,
 * the soonest expiry by ZRANGE 0 0, the count by ZCARD or ZCOUNT.  So a
 * call costs O(log n) per permit it reads or changes, whatever the number
 * n of permits out, and Redisson's clients read and write the same layout
 * as before (no key of rlock's own).  A gap among a holder's ids (one
 * taken away: Redisson's reclaim with LIMIT, a ZREM) reads as permits
 * lost, as any permit gone does.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "locks/scripts_lua.h"

/*
 * Lua: KEYS[1] the latch, KEYS[3] the permits key a semaphore of the same
 * name would have, KEYS[4] its marker.  Refuses what is not a latch ("RLOCKKIND lock" for a
 * hash, "RLOCKKIND semaphore", "RLOCKKIND value" for any other value, a
 * string that is not a decimal integer included), else sets "cur" to the
 * count (0 when absent; a Lua number, exact only to 2^53, so only compared),
 * "v" to the stored text (false when absent) and "t" to 'string' or 'none'.
 * One GET (TYPE only when it fails: a hash is a lock), none when "pre"
 * (an MGET's, with the request's latch) has the count; _MARKED also sets
 * "marked" (KEYS[5], the latch's marker, exists) by the same EXISTS,
 * KEYS[5] named thrice (EXISTS counts a key as often as it is named).
 */
#define LATCH_COUNT_OF_KEYS1 LATCH_COUNT_OF_KEYS1_AS("", "false")
#define LATCH_COUNT_MARKED_OF_KEYS1(pre) \
	LATCH_COUNT_OF_KEYS1_AS(", KEYS[5], KEYS[5], KEYS[5]", pre)
#define LATCH_COUNT_OF_KEYS1_AS(marker, pre) \
"local t = 'none'\n" \
"local gok, v = true, " pre "\n" \
"if not v then gok, v = pcall(redis.call, 'get', KEYS[1]) end\n" \
"if not gok then\n" \
"  if redis.call('type', KEYS[1])['ok'] == 'hash' then return redis.error_reply('RLOCKKIND lock') end\n" \
"  return redis.error_reply('RLOCKKIND value')\n" \
"end\n" \
"local mk = redis.call('exists', KEYS[3], KEYS[4]" marker ")\n" \
"local marked = mk >= 3\n" \
"if mk % 3 > 0 then return redis.error_reply('RLOCKKIND semaphore') end\n" \
"local cur = 0\n" \
"if v then\n" \
"  t = 'string'\n" \
"  if not string.match(v, '^%-?%d+$') then return redis.error_reply('RLOCKKIND value') end\n" \
"  local d = string.gsub(v, '^%-', '')\n" \
"  if #d > 19 or (#d == 19 and d > '9223372036854775807') then return redis.error_reply('RLOCKRANGE') end\n" \
"  cur = tonumber(v)\n" \
"end\n"

/*
 * Lua: refuse a stored count that is not a live latch's: a latch counting
 * holds a positive decimal integer (without sign or leading zero, as DECR
 * reads it); "0", a negative number or "007" is somebody else's value.
 */
#define LATCH_REFUSE_NOT_LIVE \
"if t == 'string' and not string.match(v, '^[1-9]%d*$') then return redis.error_reply('RLOCKKIND value') end\n"

/*
 * Lua: a script answered once per request (SPEC.md 6: a command resent
 * after a lost reply must not apply twice).  Its last key is the request's
 * latch (a key of its own per call), its last argument the latch's TTL ms:
 * the body runs as a function, an integer answer is kept in the latch, and
 * a replay answers it, changing nothing (an error wrote nothing: not kept).
 */
#define ONCE_BEGIN \
"local rqk = KEYS[#KEYS]\n" \
"local rqttl = ARGV[#ARGV]\n" \
"local rq = redis.call('get', rqk)\n" \
"if rq then return tonumber(rq) end\n" \
"local function once()\n"
#define ONCE_END \
"end\n" \
"local r = once()\n" \
"if type(r) == 'number' then redis.call('set', rqk, r, 'px', rqttl) end\n" \
"return r\n"

/*
 * latch count: KEYS[1] latch, KEYS[2] its channel, KEYS[3] the semaphore
 * permits key of the name, KEYS[4] the semaphore marker.  Returns the
 * count: -1 when absent, 0 at zero, else the stored text (a bulk string:
 * exact whatever its size).
 */
const char rlock_latch_count_body[] =
LATCH_COUNT_OF_KEYS1
"if t == 'none' then return -1 end\n"
"if cur <= 0 then return 0 end\n"
"return v\n";

/*
 * latch set count (trySetCount): keys as above, KEYS[5] the latch's
 * marker, KEYS[6] the request's latch (ONCE_BEGIN); ARGV[1] the count
 * (>= 0), ARGV[2] the expiry in ms (0: none), ARGV[3] the request latch's
 * TTL.
 * Only an absent latch takes a count: returns 1 when set (and marked), 0
 * when the latch is counting; a string that is not a positive count is
 * refused, never overwritten.  A count of 0 leaves it absent.  With an
 * expiry the count and its marker disappear after it, reached zero or not
 * (Lifecycle, SPEC.md 5.5; DECR keeps a key's expiry).  Announces the new
 * count ("1") before writing, so that a refused PUBLISH changes nothing.
 */
const char rlock_latch_set_count_body[] =
ONCE_BEGIN
LATCH_COUNT_OF_KEYS1
LATCH_REFUSE_NOT_LIVE
"if t == 'string' then return 0 end\n"
"if tonumber(ARGV[1]) <= 0 then\n"
"  redis.call('del', KEYS[1], KEYS[5])\n"
"  return 1\n"
"end\n"
PUBLISH_OR_REFUSE("KEYS[2]", "'1'")
"if tonumber(ARGV[2]) > 0 then\n"
"  redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[2])\n"
"  redis.call('set', KEYS[5], '1', 'px', ARGV[2])\n"
"else\n"
"  redis.call('mset', KEYS[1], ARGV[1], KEYS[5], '1')\n"
"end\n"
"return 1\n"
ONCE_END;

/*
 * latch count down: keys as set count's, KEYS[6] the request's latch
 * (read with the count: one MGET); ARGV[1] "1" when the caller may adopt
 * a count without the latch's marker (marking it), else it is refused
 * ("RLOCKKIND unmarked"); ARGV[2] the request latch's TTL ms.  Returns
 * the count after it (0, or the stored text: DECR's answer is a Lua
 * number, exact only to 2^53), -1 when absent (the caller warns); at one
 * the key and its marker go and "0" is published.  The answer is kept in
 * the request's latch (SPEC.md 6): a replay answers it, changing nothing.
 */
const char rlock_latch_count_down_body[] =
"local rq = redis.call('mget', KEYS[6], KEYS[1])\n"
"if rq[1] then return rq[1] end\n"
LATCH_COUNT_MARKED_OF_KEYS1("rq[2]")
"if t == 'none' then\n"
"  redis.call('del', KEYS[5])\n"
"  redis.call('set', KEYS[6], '-1', 'px', ARGV[2])\n"
"  return -1\n"
"end\n"
LATCH_REFUSE_NOT_LIVE
"if not marked then\n"
"  if ARGV[1] ~= '1' then return redis.error_reply('RLOCKKIND unmarked') end\n"
"  redis.call('set', KEYS[5], '1')\n"
"end\n"
"if cur == 1 then\n"
PUBLISH_OR_REFUSE("KEYS[2]", "'0'")
"  redis.call('del', KEYS[1], KEYS[5])\n"
"  redis.call('set', KEYS[6], '0', 'px', ARGV[2])\n"
"  return 0\n"
"end\n"
"redis.call('decr', KEYS[1])\n"
"local after = redis.call('get', KEYS[1])\n"
"redis.call('set', KEYS[6], after, 'px', ARGV[2])\n"
"return after\n";

/*
 * latch adopt: keys as set count's.  Marks a count a Redisson client set
 * (or any positive integer, at the caller's word) as the latch's, so that
 * roles without the grant count it down; returns 1, or 0 when absent.
 */
const char rlock_latch_adopt_body[] =
LATCH_COUNT_OF_KEYS1
"if t == 'none' then return 0 end\n"
LATCH_REFUSE_NOT_LIVE
"redis.call('set', KEYS[5], '1')\n"
"return 1\n";

/*
 * latch delete: keys as set count's (KEYS[6] the request's latch), ARGV[1]
 * the request latch's TTL (ONCE_BEGIN).  Deletes a latch rlock set (marked;
 * an unmarked count may be an application's counter: refused, "RLOCKKIND
 * unmarked", never deleted), publishing "0" first as Redisson's delete
 * does, so that its waiters wake (and find it absent).  Returns 1 when it
 * was there, 0 when absent.
 */
const char rlock_latch_delete_body[] =
ONCE_BEGIN
LATCH_COUNT_MARKED_OF_KEYS1("false")
"if t == 'none' then\n"
"  redis.call('del', KEYS[5])\n"
"  return 0\n"
"end\n"
LATCH_REFUSE_NOT_LIVE
"if not marked then return redis.error_reply('RLOCKKIND unmarked') end\n"
PUBLISH_OR_REFUSE("KEYS[2]", "'0'")
"redis.call('del', KEYS[1], KEYS[5])\n"
"return 1\n"
ONCE_END;

/*
 * Lua, for the semaphore's scripts: KEYS[1] the available permits (a
 * string, absent: 0), KEYS[2] {N}:timeout (the permits out: a sorted set
 * of permit ids scored by expiry, epoch ms), KEYS[3] the channel
 * redisson_sc:{N}.  "now" is Redis's clock (TIME), the clock the watchdog's
 * renewals and the check before COMMIT use too (renew in scripts.c), so
 * that rlock's permits expire by one clock.  Refuses a lock's hash
 * ("RLOCKKIND lock", or what "lock" says for SEM_PRELUDE_GUARDED) and any other
 * value ("RLOCKKIND value", or "value") before writing; then, when reclaim
 * is true, gives back the permits whose lease ran out (as Redisson's
 * scripts do), announcing the permits available on the channel before it
 * writes (a PUBLISH refused changes nothing).  Sets "avail" to the permits
 * available, "zc" to the permits out (kept as permits go), "t" and "zt"
 * to 'string'/'zset' or 'none'.  One call a key: GET (none when "pre", an
 * MGET's with the request's latch, has the permits; TYPE only when GET
 * fails: a hash is a lock), ZCARD (0: absent; WRONGTYPE: not a zset).
 * TIME only when "timed" or reclaim; the reclaim only when permits are
 * out.  Counts are kept below 10^15: exact in a Lua number.
 */
#define SEM_PRELUDE_GUARDED(reclaim, timed, lock, value, guard, pre) \
"local t, zt = 'none', 'none'\n" \
"local gok, v = true, " pre "\n" \
"if not v then gok, v = pcall(redis.call, 'get', KEYS[1]) end\n" \
"if not gok then\n" \
"  if redis.call('type', KEYS[1])['ok'] == 'hash' then return " lock " end\n" \
"  return " value "\n" \
"end\n" \
"local zok, zc = pcall(redis.call, 'zcard', KEYS[2])\n" \
"if not zok then return " value " end\n" \
"if zc > 0 then zt = 'zset' end\n" \
"local avail = 0\n" \
"if v then\n" \
"  t = 'string'\n" \
"  if not string.match(v, '^%-?%d+$') or #v > 15 then return " value " end\n" \
"  avail = tonumber(v)\n" \
"end\n" \
guard \
"local now = 0\n" \
"if " reclaim " or " timed " then\n" \
"  local tm = redis.call('time')\n" \
"  now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)\n" \
"end\n" \
"if " reclaim " and zc > 0 then\n" \
"  local expired = redis.call('zrangebyscore', KEYS[2], 0, now)\n" \
"  if #expired > 0 then\n" \
"    if avail + #expired > 0 then\n" \
PUBLISH_OR_REFUSE("KEYS[3]", "avail + #expired") \
"    end\n" \
"    for _, m in ipairs(expired) do redis.call('zrem', KEYS[2], m) end\n" \
"    zc = zc - #expired\n" \
"    avail = redis.call('incrby', KEYS[1], #expired)\n" \
"  end\n" \
"end\n"
#define SEM_PRELUDE_TIMED(reclaim, timed, pre) \
SEM_PRELUDE_GUARDED(reclaim, timed, "redis.error_reply('RLOCKKIND lock')", \
					"redis.error_reply('RLOCKKIND value')", "", pre)
#define SEM_PRELUDE(reclaim) SEM_PRELUDE_TIMED(reclaim, "true", "false")

/*
 * Lua: the permits "holder" (an ARGV) holds, "mine": their numbers k of
 * the ids "<holder>:<k>", ascending, "mine_sc" their expiries (by index,
 * as mine); "mine_exp" the latest expiry among them (0: none).  Found by
 * id, never by reading the whole {N}:timeout: ZSCORE of "<holder>:1",
 * "<holder>:2", ... while the id exists or k <= hint (the permits the
 * session believes it holds), so O((held + 1) log n) whatever the number
 * of permits out.  A holder's ids are kept contiguous, 1..m (acquire adds
 * above the highest, a release gives back the highest, they share one
 * expiry), so the probe sees them all; where something else made a gap
 * (Redisson's reclaim with LIMIT took some of them, a hostile ZREM), one
 * missing within 1..hint makes mine shorter than the session believes:
 * read as permits lost, as before (fail closed).  Ids of the holder's
 * beyond a gap above the hint are not seen: they expire with their lease.
 * (Redisson's ids are 16 raw bytes, or 32 hex digits, never taken for
 * ours.)
 */
#define SEM_MINE(holder, hint) \
"local mine = {}\n" \
"local mine_sc = {}\n" \
"local mine_exp = 0\n" \
"do\n" \
"  local pre = " holder " .. ':'\n" \
"  local hint = tonumber(" hint ")\n" \
"  local k = 1\n" \
"  while true do\n" \
"    local sc = redis.call('zscore', KEYS[2], pre .. k)\n" \
"    if sc then\n" \
"      sc = tonumber(sc)\n" \
"      table.insert(mine, k)\n" \
"      table.insert(mine_sc, sc)\n" \
"      mine_exp = math.max(mine_exp, sc)\n" \
"    elseif k > hint then\n" \
"      break\n" \
"    end\n" \
"    k = k + 1\n" \
"  end\n" \
"end\n"

/*
 * Lua: give back the "n" highest-numbered permits of "holder" in "mine",
 * announcing the permits available first.
 */
#define SEM_GIVE_BACK(holder, n) \
"do\n" \
"  local gb = " n "\n" \
"  if gb > 0 then\n" \
PUBLISH_OR_REFUSE("KEYS[3]", "avail + gb") \
"    local last = #mine\n" \
"    for i = last, last - gb + 1, -1 do\n" \
"      redis.call('zrem', KEYS[2], " holder " .. ':' .. mine[i])\n" \
"      zc = zc - 1\n" \
"      mine[i] = nil\n" \
"      mine_sc[i] = nil\n" \
"    end\n" \
"    avail = redis.call('incrby', KEYS[1], gb)\n" \
"  end\n" \
"end\n"

/*
 * Lua, for the semaphore's scripts that take, set, add or count permits:
 * refuse a name that rlock_latch_set_count made a count-down latch (its
 * marker {N}:rlock_latch, KEYS[n], exists while its count runs).  A
 * marker whose count is gone (Redisson counted it down to zero, or
 * deleted it) is deleted instead.
 */
#define SEM_REFUSE_LATCH(n, refusal) \
"if redis.call('exists', KEYS[" n "]) == 1 then\n" \
"  if redis.call('exists', KEYS[1]) == 1 then return " refusal " end\n" \
"  redis.call('del', KEYS[" n "])\n" \
"end\n"
/*
 * Lua: SEM_REFUSE_LATCH, and "marked" (KEYS[m] exists) by the same EXISTS
 * (KEYS[m] named twice: EXISTS counts a key as often as it is named).
 */
#define SEM_REFUSE_LATCH_MARKED(n, m, refusal) \
"local marked\n" \
"do\n" \
"  local ex = redis.call('exists', KEYS[" n "], KEYS[" m "], KEYS[" m "])\n" \
"  marked = ex >= 2\n" \
"  if ex % 2 == 1 then\n" \
"    if redis.call('exists', KEYS[1]) == 1 then return " refusal " end\n" \
"    redis.call('del', KEYS[" n "])\n" \
"  end\n" \
"end\n"

/*
 * Lua (a SEM_PRELUDE_GUARDED guard, after SEM_REFUSE_LATCH_MARKED): a
 * permits key or {N}:timeout without the semaphore's marker KEYS[m]
 * ("marked") is refused with refusal, unless adopt is "1": it is marked.
 */
#define SEM_REFUSE_UNMARKED(m, adopt, refusal) \
"if (t ~= 'none' or zt ~= 'none') and not marked then\n" \
"  if " adopt " ~= '1' then return " refusal " end\n" \
"  redis.call('set', KEYS[" m "], '1')\n" \
"end\n"

/*
 * semaphore acquire: KEYS as SEM_PRELUDE, KEYS[4] the latch marker
 * (SEM_REFUSE_LATCH), KEYS[5] the semaphore's marker (SEM_REFUSE_UNMARKED:
 * {2, 'unmarked'}); ARGV[1] permits, ARGV[2] the lease ms, ARGV[3] holder,
 * ARGV[4] the permits the holder's session believes it holds, ARGV[5] "1"
 * when the caller may adopt.  Ids of its own that Redis has while the
 * session believes it holds none (a release that a failover lost left
 * them there) are given back first, before looking at what is available,
 * so that a session never waits for permits of its own.  When Redis has
 * another number of them than the session believes (some were taken
 * away: lost), what is left of them is given back when the permits are
 * taken, and the count answered tells the session (a refusal leaves them:
 * the watchdog, the next release or the check before COMMIT reports
 * them).  Then takes the permits when enough are available: all of the
 * holder's permits, old and new, expire together, at the later of the new
 * lease's end and the expiry they had (never lowered: the session was
 * promised both): {1, permits held now, permits available after}; else
 * {0, ms until the soonest permit out expires (-1: none), permits
 * available}, or {3, total, held} when the semaphore has fewer permits in
 * all than the session would hold (it would wait for its own); {2, 'lock'}
 * or {2, 'value'} for a name that is not a semaphore.  KEYS[6]: the
 * request's latch (an MGET with KEYS[1]), ARGV[6] its TTL ms: a grant is
 * kept there ("<held> <available>"); a replay (SPEC.md 6) answers it again,
 * taking nothing more (a refusal is not kept: replayed, it looks again).
 */
const char rlock_sem_acquire_body[] =
"local rqs = redis.call('mget', KEYS[6], KEYS[1])\n"
"local rq = rqs[1]\n"
"if rq then\n"
"  local rh, ra = string.match(rq, '^(%d+) (%-?%d+)$')\n"
"  if rh then return {1, tonumber(rh), tonumber(ra)} end\n"
"end\n"
SEM_REFUSE_LATCH_MARKED("4", "5", "{2, 'latch'}")
SEM_PRELUDE_GUARDED("true", "true", "{2, 'lock'}", "{2, 'value'}",
					SEM_REFUSE_UNMARKED("5", "ARGV[5]", "{2, 'unmarked'}"), "rqs[2]")
SEM_MINE("ARGV[3]", "ARGV[4]")
"if #mine > 0 and tonumber(ARGV[4]) == 0 then\n"
SEM_GIVE_BACK("ARGV[3]", "#mine")
"  mine_exp = 0\n"
"end\n"
"local want = tonumber(ARGV[1])\n"
"local held = #mine\n"
"local total = avail + zc\n"
"if want > total - held then return {3, total, held} end\n"
"if avail < want then\n"
"  local first = redis.call('zrange', KEYS[2], 0, 0, 'withscores')\n"
"  if #first == 0 then return {0, -1, avail} end\n"
"  return {0, math.max(tonumber(first[2]) - now, 0), avail}\n"
"end\n"
"if #mine ~= tonumber(ARGV[4]) then\n"
SEM_GIVE_BACK("ARGV[3]", "#mine")
"  mine_exp = 0\n"
"end\n"
"local exp = math.max(now + tonumber(ARGV[2]), mine_exp)\n"
"local top = mine[#mine] or 0\n"
"avail = redis.call('decrby', KEYS[1], want)\n"
"for _, k in ipairs(mine) do\n"
"  redis.call('zadd', KEYS[2], 'xx', exp, ARGV[3] .. ':' .. k)\n"
"end\n"
"local k = top\n"
"for j = 1, want do\n"
"  repeat k = k + 1 until redis.call('zadd', KEYS[2], 'nx', exp, ARGV[3] .. ':' .. k) == 1\n"
"end\n"
"redis.call('set', KEYS[6], (#mine + want) .. ' ' .. avail, 'px', ARGV[6])\n"
"return {1, #mine + want, avail}\n";

/*
 * semaphore release: KEYS as SEM_PRELUDE, KEYS[4] the request's unlock
 * latch (read with the permits: one MGET); ARGV[1] holder, ARGV[2] permits
 * to give back, ARGV[3] latch TTL ms, ARGV[4] the permits the session
 * holds after it (-1: unknown), ARGV[5] the lease of those it keeps (ms;
 * 0: they keep their expiry, else it is raised to now + lease, never
 * lowered).  As a lock's release: nil when the holder has none, or fewer
 * than the session counted (lost: the rest is given back too), 0 when it
 * still holds some, 1 when it gave back its last; a replay: the latch's.
 */
const char rlock_sem_release_body[] =
"local lv = redis.call('mget', KEYS[4], KEYS[1])\n"
"if lv[1] then return tonumber(lv[1]) end\n"
SEM_PRELUDE_TIMED("false", "tonumber(ARGV[5]) > 0", "lv[2]")
SEM_MINE("ARGV[1]",
		 "(tonumber(ARGV[4]) >= 0 and tonumber(ARGV[4]) + tonumber(ARGV[2]) or tonumber(ARGV[2]))")
"if #mine == 0 then return nil end\n"
"local n = math.min(tonumber(ARGV[2]), #mine)\n"
"local keep = tonumber(ARGV[4])\n"
"if keep >= 0 then\n"
"  if #mine < keep + tonumber(ARGV[2]) then\n"
SEM_GIVE_BACK("ARGV[1]", "#mine")
"    return nil\n"
"  end\n"
"  n = #mine - keep\n"
"end\n"
SEM_GIVE_BACK("ARGV[1]", "n")
"if tonumber(ARGV[5]) > 0 then\n"
"  local exp = now + tonumber(ARGV[5])\n"
"  for i, k in ipairs(mine) do\n"
"    if mine_sc[i] < exp then redis.call('zadd', KEYS[2], 'xx', exp, ARGV[1] .. ':' .. k) end\n"
"  end\n"
"end\n"
"local done = 0\n"
"if #mine == 0 then done = 1 end\n"
"redis.call('set', KEYS[4], done, 'px', ARGV[3])\n"
"return done\n";

/*
 * semaphore reconcile: KEYS as SEM_PRELUDE; ARGV[1] holder, ARGV[2] the
 * permits it should hold, ARGV[3] the most it may have in Redis (the
 * probe's hint, SEM_MINE: after a loss the target is 0 while ids past a
 * gap remain).  Gives back those beyond, or all of them when Redis has
 * fewer (they were lost); returns the number found (-1: none).
 */
const char rlock_sem_reconcile_body[] =
SEM_PRELUDE("true")
SEM_MINE("ARGV[1]", "math.max(tonumber(ARGV[2]), tonumber(ARGV[3] or 0))")
"if #mine == 0 then return -1 end\n"
"local found = #mine\n"
"local target = math.max(tonumber(ARGV[2]), 0)\n"
"if found < target then target = 0 end\n"
SEM_GIVE_BACK("ARGV[1]", "found - target")
"return found\n";

/*
 * semaphore set permits (trySetPermits): KEYS as SEM_PRELUDE, KEYS[4] its
 * marker, KEYS[5] the latch marker, KEYS[6] the request's latch; ARGV[1]
 * the permits, ARGV[2] the request latch's TTL (ONCE_BEGIN: a replay
 * answers 1 again).  Only a semaphore never set (its key absent,
 * no permit out, not marked: one whose key went, say counted down to
 * nothing as a latch, is not set anew by a role without the grant of add
 * permits): returns 1 when set, 0 otherwise.
 */
const char rlock_sem_set_permits_body[] =
ONCE_BEGIN
SEM_REFUSE_LATCH("5", "redis.error_reply('RLOCKKIND latch')")
SEM_PRELUDE("false")
"if t ~= 'none' or redis.call('exists', KEYS[2], KEYS[4]) > 0 then return 0 end\n"
PUBLISH_OR_REFUSE("KEYS[3]", "ARGV[1]")
"redis.call('set', KEYS[1], ARGV[1])\n"
"redis.call('set', KEYS[4], '1', 'NX')\n"
"return 1\n"
ONCE_END;

/*
 * semaphore add permits: KEYS as set permits'; ARGV[1] permits to add
 * (may be negative), ARGV[2] the request latch's TTL (ONCE_BEGIN: resent
 * after a lost reply, it adds nothing more).  Returns the permits available after it, or
 * "RLOCKRANGE" when that would leave the range of an integer, or go
 * further out of it, counting the permits out, which come back (a
 * Redisson semaphore's permits are a Java int, and
 * rlock_semaphore_available returns an integer).
 */
const char rlock_sem_add_permits_body[] =
ONCE_BEGIN
SEM_REFUSE_LATCH("5", "redis.error_reply('RLOCKKIND latch')")
SEM_PRELUDE("true")
"local after = avail + tonumber(ARGV[1])\n"
"local out = zc\n"
"if (after + out > 2147483647 and after > avail) or (after < -2147483648 and after < avail) then\n"
"  return redis.error_reply('RLOCKRANGE')\n"
"end\n"
"if tonumber(ARGV[1]) > 0 and after > 0 then\n"
PUBLISH_OR_REFUSE("KEYS[3]", "after")
"end\n"
"redis.call('set', KEYS[4], '1', 'NX')\n"
"return redis.call('incrby', KEYS[1], ARGV[1])\n"
ONCE_END;

/*
 * semaphore available: KEYS as SEM_PRELUDE, KEYS[4] the latch marker.
 * Returns the permits available, the permits out whose lease ran out
 * counted as available; a read: it writes nothing (it neither gives them
 * back nor deletes a latch's stale marker).
 */
const char rlock_sem_available_body[] =
"if redis.call('exists', KEYS[4], KEYS[1]) == 2 then return redis.error_reply('RLOCKKIND latch') end\n"
SEM_PRELUDE("false")
"if zt == 'zset' then avail = avail + redis.call('zcount', KEYS[2], 0, now) end\n"
"return avail\n";

/*
 * semaphore delete: KEYS as set permits'; ARGV[1] the request latch's
 * TTL (ONCE_BEGIN).  Deletes a semaphore rlock set
 * or adopted (marked; an unmarked value may be an application's:
 * "RLOCKKIND unmarked", never deleted), its permits out with it: their
 * holders find them gone at their next renewal or call and report them
 * lost.  Publishes "0" on its channel first, so that its waiters wake and
 * look again.  Returns 1 when it was there, 0 when absent.
 */
const char rlock_sem_delete_body[] =
ONCE_BEGIN
SEM_REFUSE_LATCH("5", "redis.error_reply('RLOCKKIND latch')")
SEM_PRELUDE("false")
"if t == 'none' and zt == 'none' then\n"
"  redis.call('del', KEYS[4])\n"
"  return 0\n"
"end\n"
"if redis.call('exists', KEYS[4]) == 0 then return redis.error_reply('RLOCKKIND unmarked') end\n"
PUBLISH_OR_REFUSE("KEYS[3]", "'0'")
"redis.call('del', KEYS[1], KEYS[2], KEYS[4])\n"
"return 1\n"
ONCE_END;
