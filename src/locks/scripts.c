/*-------------------------------------------------------------------------
 *
 * scripts.c
 *	  The Lua scripts rlock runs in Redis, written from Redisson's lock
 *	  protocol (PROTOCOL.md), and their SHA1 digests for EVALSHA.
 *
 * Every operation on a lock is one atomic script, so the Redis state seen
 * by Redisson clients is always one of the protocol's states.  The scripts'
 * return values are rlock's own (Redisson never sees them): acquire reports
 * the resulting hold count, which lets a session notice and undo a hold it
 * took twice after a lost reply.  All names and values travel as KEYS and
 * ARGV, never spliced into the script text.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"


#include "lib/stringinfo.h"
#include "utils/memutils.h"

#include "base/base.h"
#include "locks/locks.h"
#include "locks/scripts_lua.h"

/*
 * Lua: refuse (before anything is written) a fencing token counter,
 * KEYS[2], that INCR would fail on: {4, 'type'} when it is not a string
 * (GET fails: WRONGTYPE; one call, where TYPE then GET were two),
 * {4, 'integer'} when it is not a decimal integer, {4, 'max'} when it has
 * reached the largest 64-bit integer.
 */
#define FENCE_CHECK_KEYS2 \
"  local ok, tv = pcall(redis.call, 'get', KEYS[2])\n" \
"  if not ok then return {4, 'type'} end\n" \
"  if tv then\n" \
"    if not string.match(tv, '^%-?%d+$') or #tv > 20 then return {4, 'integer'} end\n" \
"    if string.sub(tv, 1, 1) ~= '-' and (#tv > 19 or (#tv == 19 and tv >= '9223372036854775807')) then\n" \
"      return {4, 'max'}\n" \
"    end\n" \
"  end\n"

/*
 * acquire: KEYS[1] lock, KEYS[2] (fenced locks only) the fencing token
 * counter, and last (with ARGV[3]) the request's latch; ARGV[1] lease ms,
 * ARGV[2] holder, ARGV[3] (an owner token's or a fenced acquisition) the
 * latch's TTL ms.  A grant is recorded in the latch ("count:token") before
 * it is answered; a replay after a lost reply finds it and answers as the
 * first time, changing nothing.
 * Returns {1, count} when acquired ({1, count, token} for a fenced lock:
 * every acquisition, reentrant ones included, increments the counter),
 * {0, pttl} when held by another holder, {2, kind} when the name is a
 * read/write lock (kind: its mode) or a fair lock with waiters ("fair"),
 * {4, why} when the fencing token counter cannot be incremented.
 * A free name costs 4 calls (6 for a fenced lock, with its counter's GET
 * and INCR; its request latch's GET and SET aside).  The fair queue and
 * the lock are looked at by two single-key EXISTS, never one EXISTS of
 * both: in a Cluster slot being migrated, this script (one key declared)
 * runs on the importing node after an ASK, where a command naming several
 * keys that are not there yet is refused (TRYAGAIN), inside a script as
 * "non local key" (TAP 023_cluster_reshard).
 */
static const char acquire_body[] =
"local nk = #KEYS\n"
"local rq = false\n"
"if ARGV[3] then\n"
"  rq = KEYS[nk]\n"
"  nk = nk - 1\n"
"  local v = redis.call('get', rq)\n"
"  if v then\n"
"    local a, b = string.match(v, '^(%d+):(.*)$')\n"
"    if b ~= '' then return {1, tonumber(a), tonumber(b)} end\n"
"    return {1, tonumber(a)}\n"
"  end\n"
"end\n"
FAIR_QUEUE_OF_KEYS1
"if redis.call('exists', fairq) == 1 then return {2, 'fair'} end\n"
"local free = redis.call('exists', KEYS[1]) == 0\n"
"if nk > 1 then\n"
FENCE_CHECK_KEYS2
"end\n"
"local n\n"
"if free then\n"
"  n = redis.call('hincrby', KEYS[1], ARGV[2], 1)\n"
"  redis.call('pexpire', KEYS[1], ARGV[1])\n"
"else\n"
"  local f = redis.call('hmget', KEYS[1], 'mode', ARGV[2])\n"
"  if f[1] then return {2, f[1]} end\n"
"  if not f[2] then return {0, redis.call('pttl', KEYS[1])} end\n"
"  n = redis.call('hincrby', KEYS[1], ARGV[2], 1)\n"
RAISE_TTL("KEYS[1]", "ARGV[1]")
"end\n"
"local tk = ''\n"
"if nk > 1 then tk = redis.call('incr', KEYS[2]) end\n"
"if rq then\n"
"  local v = string.format('%d', n) .. ':'\n"
"  if nk > 1 then v = v .. string.format('%d', tk) end\n"
"  redis.call('set', rq, v, 'px', ARGV[3])\n"
"end\n"
"if nk > 1 then return {1, n, tk} end\n"
"return {1, n}\n";

/*
 * release: KEYS[1] lock, KEYS[2] channel, KEYS[3] unlock latch, KEYS[4]
 * the fair queue; ARGV[1] release message, ARGV[2] lease ms for the
 * remaining holds (0: keep the TTL), ARGV[3] holder, ARGV[4] levels to
 * release, ARGV[5] latch TTL ms.
 * Returns nil when not held, 0 when still held, 1 when released (after
 * publishing on the channel, and telling the head of a fair queue that
 * waits for the same name).  Whatever Redis may refuse (an ACL on PUBLISH
 * or on the latch's key) comes before the lock is changed, so an error
 * reply means nothing was released (a refused PUBLISH takes the latch back).
 * The latch is written (SET NX) before anything else the request changes:
 * a replay after a lost reply finds it and answers as the first time,
 * changing nothing (one call fewer than reading it first, in vain).
 */
static const char release_body[] =
"local f = redis.call('hmget', KEYS[1], 'mode', ARGV[3])\n"
"if f[1] or not f[2] then\n"
/* not ours to release now: perhaps because this request already did it */
"  local v = redis.call('get', KEYS[3])\n"
"  if v then return tonumber(v) end\n"
"  if f[1] then return redis.error_reply('RLOCKKIND ' .. f[1]) end\n"
"  return nil\n"
"end\n"
"local n = tonumber(f[2]) - tonumber(ARGV[4])\n"
"if n > 0 then\n"
"  if not redis.call('set', KEYS[3], 0, 'px', ARGV[5], 'nx') then return tonumber(redis.call('get', KEYS[3])) end\n"
"  redis.call('hset', KEYS[1], ARGV[3], n)\n"
"  if tonumber(ARGV[2]) > 0 then\n"
RAISE_TTL("KEYS[1]", "ARGV[2]")
"  end\n"
"  return 0\n"
"end\n"
"if not redis.call('set', KEYS[3], 1, 'px', ARGV[5], 'nx') then return tonumber(redis.call('get', KEYS[3])) end\n"
PUBLISH_OR_UNDO("KEYS[2]", "ARGV[1]", "redis.call('del', KEYS[3]) ")
"local head = redis.call('lindex', KEYS[4], 0)\n"
"if head then redis.call('publish', KEYS[2] .. ':' .. head, ARGV[1]) end\n"
"redis.call('del', KEYS[1])\n"
"return 1\n";

/*
 * reconcile: KEYS[1] lock, KEYS[2] channel, KEYS[3] (fair locks only) the
 * queue; ARGV[1] holder, ARGV[2] the count this holder should have,
 * ARGV[3] release message.  Lowers the holder's count to the target
 * (dropping the lock at zero, and telling the fair queue's head on its own
 * channel, KEYS[2]:<head>).  Returns the count found (-1: none).
 */
static const char reconcile_body[] =
REFUSE_RW_KEYS1
"local c = redis.call('hget', KEYS[1], ARGV[1])\n"
"if not c then return -1 end\n"
"c = tonumber(c)\n"
"local t = tonumber(ARGV[2])\n"
"if c > t then\n"
"  if t <= 0 then\n"
"    redis.call('del', KEYS[1])\n"
"    if #KEYS > 2 then\n"
"      local head = redis.call('lindex', KEYS[3], 0)\n"
"      if head then redis.call('publish', KEYS[2] .. ':' .. head, ARGV[3]) end\n"
"    else\n"
"      redis.call('publish', KEYS[2], ARGV[3])\n"
"    end\n"
"  else\n"
"    redis.call('hset', KEYS[1], ARGV[1], t)\n"
"  end\n"
"end\n"
"return c\n";

/*
 * force release (Redisson forceUnlock), any kind: KEYS[1] lock, KEYS[2]
 * channel, KEYS[3] read/write channel, KEYS[4] fair queue, KEYS[5] unlock
 * latch; ARGV[1] release message, ARGV[2] latch TTL ms.  Wakes the waiters
 * of the kind it was: "1" on the read/write channel, or the exclusive
 * channel and the fair queue's head.  A read/write lock's read holds'
 * timeout keys ({N}:<holder>:rwlock_timeout:<k>) go with it (up to a
 * count no rlock session reaches; any beyond expire with their lease).
 * Returns {1, its first holder's field, its number of holders} when it
 * deleted a lock (a replay: 1), else 0.  Deletes only a lock: refuses
 * (WRONGTYPE) a key that is not a
 * hash, and ("RLOCKNOTLOCK <why>") a hash without an expiry (every lock
 * has one) or with a field that is not a holder's hold count ("<id>:...",
 * a positive integer; "mode" aside): an application's hash in the lock
 * database.
 * Deleting whoever holds the lock is not idempotent: replayed after a lost
 * reply, it would delete the next holder's lock.  So, like release, it
 * records its answer in the request's latch before deleting, and a replay
 * finds the latch and answers as the first time, deleting nothing.
 */
static const char force_release_body[] =
"local v = redis.call('get', KEYS[5])\n"
"if v then return tonumber(v) end\n"
"local t = redis.call('type', KEYS[1])['ok']\n"
"if t ~= 'hash' and t ~= 'none' then\n"
"  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')\n"
"end\n"
"if t == 'none' then\n"
"  redis.call('set', KEYS[5], 0, 'px', ARGV[2])\n"
"  return 0\n"
"end\n"
"if redis.call('pttl', KEYS[1]) < 0 then return redis.error_reply('RLOCKNOTLOCK expiry') end\n"
"local f = redis.call('hgetall', KEYS[1])\n"
"local first, n = '', 0\n"
"for i = 1, #f, 2 do\n"
"  if f[i] == 'mode' then\n"
"    if f[i + 1] ~= 'read' and f[i + 1] ~= 'write' then return redis.error_reply('RLOCKNOTLOCK field') end\n"
"  elseif not string.find(f[i], ':', 1, true) or not string.match(f[i + 1], '^[1-9]%d*$') then\n"
"    return redis.error_reply('RLOCKNOTLOCK field')\n"
"  else\n"
"    n = n + 1\n"
"    if n == 1 then first = f[i] end\n"
"  end\n"
"end\n"
"redis.call('set', KEYS[5], 1, 'px', ARGV[2])\n"
"local rw = redis.call('hexists', KEYS[1], 'mode') == 1\n"
"redis.call('del', KEYS[1])\n"
"if rw then\n"
RW_TIMEOUT_BASE
"  for i = 1, #f, 2 do\n"
"    if f[i] ~= 'mode' and string.sub(f[i], -6) ~= ':write' then\n"
"      for k = 1, math.min(tonumber(f[i + 1]), 100000) do\n"
"        redis.call('del', base .. ':' .. f[i] .. ':rwlock_timeout:' .. k)\n"
"      end\n"
"    end\n"
"  end\n"
"  redis.call('publish', KEYS[3], '1')\n"
"else\n"
"  redis.call('publish', KEYS[2], ARGV[1])\n"
"  local head = redis.call('lindex', KEYS[4], 0)\n"
"  if head then redis.call('publish', KEYS[2] .. ':' .. head, ARGV[1]) end\n"
"end\n"
"return {1, first, n}\n";

/*
 * status: KEYS[1] lock, KEYS[2] its fair queue, KEYS[3] the permits out of
 * a semaphore of that name ({N}:timeout); ARGV[1] this session's holder.
 * Returns {pttl, what, own, field, value, ...}: for a lock's hash, what is
 * 1 when fair waiters are queued (else 0), own this session's holds (its
 * field plus its write field), the pairs the hash's fields.  For a
 * semaphore with permits out, what is 2, pttl the lease left of the one
 * that expires first (by Redis's clock; -1 when all are Redisson's permits
 * without a lease), own this session's permits, the
 * pairs each holder with its permits: rlock's ids "<holder>:<k>" by holder,
 * any other id (a Java client's: 16 raw bytes, or 32 hex digits before
 * Redisson 3.17) alone, in hex.  {-2, 3, 0} for a count (a latch, or a
 * semaphore with no permit out), {-2, 0, 0} when nothing is there;
 * WRONGTYPE for any other value.  For a semaphore it reads the whole of
 * {N}:timeout (O(permits out)), the one script that does: it is
 * introspection (rlock_status lists every holder, which takes reading
 * them all), asked by a user's call, never on the path of an acquisition,
 * a release, a renewal or a COMMIT, whose scripts find a holder's permits
 * by id (scripts_sync.c, SEM_MINE; renew below).
 */
static const char status_body[] =
"local t = redis.call('type', KEYS[1])['ok']\n"
"local wrong = 'WRONGTYPE Operation against a key holding the wrong kind of value'\n"
"if t == 'hash' then\n"
"  local own = 0\n"
"  for _, f in ipairs({ARGV[1], ARGV[1] .. ':write'}) do\n"
"    own = own + (tonumber(redis.call('hget', KEYS[1], f)) or 0)\n"
"  end\n"
"  local r = redis.call('hgetall', KEYS[1])\n"
"  table.insert(r, 1, own)\n"
"  table.insert(r, 1, redis.call('exists', KEYS[2]))\n"
"  table.insert(r, 1, redis.call('pttl', KEYS[1]))\n"
"  return r\n"
"end\n"
"if t ~= 'none' and t ~= 'string' then return redis.error_reply(wrong) end\n"
"if t == 'string' and not string.match(redis.call('get', KEYS[1]), '^%-?%d+$') then\n"
"  return redis.error_reply(wrong)\n"
"end\n"
"if redis.call('type', KEYS[3])['ok'] ~= 'zset' then\n"
"  if t == 'none' then return {-2, 0, 0} end\n"
"  return {-2, 3, 0}\n"
"end\n"
"local tm = redis.call('time')\n"
"local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)\n"
"local zs = redis.call('zrange', KEYS[3], 0, -1, 'withscores')\n"
"local order, count, least, forever = {}, {}, -2, false\n"
"for j = 1, #zs, 2 do\n"
"  local sc = tonumber(zs[j + 1])\n"
"  if sc > now then\n"
"    local m = zs[j]\n"
"    local h = string.match(m, '^(%x+%-%x+%-%x+%-%x+%-%x+:.+):%d+$')\n"
"    if not h then\n"
"      h = m\n"
"      if not (#m == 32 and string.match(m, '^%x+$')) then\n"
"        h = string.gsub(m, '.', function(c) return string.format('%02x', string.byte(c)) end)\n"
"      end\n"
"    end\n"
"    if not count[h] then table.insert(order, h); count[h] = 0 end\n"
"    count[h] = count[h] + 1\n"
"    if sc >= 922337203685477 then forever = true\n"
"    elseif least < 0 or sc - now < least then least = sc - now end\n"
"  end\n"
"end\n"
"if least < 0 and forever then least = -1 end\n"
"local r = {least, 2, count[ARGV[1]] or 0}\n"
"for _, h in ipairs(order) do table.insert(r, h); table.insert(r, count[h]) end\n"
"return r\n";

/*
 * renew (the watchdog, for many locks at once; and the check before
 * COMMIT): KEYS the locks; for KEYS[i], ARGV[3i - 2] the holder's field,
 * ARGV[3i - 1] how to treat it: 'x' renew (exclusive and fair locks, and
 * the write side of a read/write lock, whose field is "<holder>:write"),
 * 'r' renew a read hold (its timeout keys are extended too), 'c' only
 * check (a fixed lease); for a semaphore, whose KEYS[i] is then its
 * {N}:timeout (declared, as every key a script touches must be; same slot
 * as N), 's' renew and 't' check the holder's permits, the members
 * "<field>:<k>" of {N}:timeout (scored by expiry, epoch ms, never
 * lowered), whose PTTL is the soonest of theirs: found by id, k = 1, 2,
 * ... up to the first that is missing or expired (ZSCORE each, never a
 * read of the whole set: O((held + 1) log n) however many permits are
 * out), so the count is that of 1..k-1, which falls short of what the
 * session holds when one of them is gone (a gap: lost, as the callers
 * read a count below the session's);
 * ARGV[3i] the lease ms to renew with.  Returns, per key, the holder's
 * count (0: gone) and the key's PTTL afterwards.
 */
static const char renew_body[] =
"local r = {}\n"
"local now = nil\n"
"for i = 1, #KEYS do\n"
"  local field = ARGV[3 * i - 2]\n"
"  local how = ARGV[3 * i - 1]\n"
"  local c = false\n"
"  if how == 's' or how == 't' then\n"
"    if not now then\n"
"      local tm = redis.call('time')\n"
"      now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)\n"
"    end\n"
"    local z = KEYS[i]\n"
"    local pre = field .. ':'\n"
"    local n, least = 0, -2\n"
"    while true do\n"
"      local id = pre .. (n + 1)\n"
"      local sc = redis.pcall('zscore', z, id)\n"
"      if type(sc) ~= 'string' or tonumber(sc) <= now then break end\n"
"      sc = tonumber(sc)\n"
"      if how == 's' and sc < now + tonumber(ARGV[3 * i]) then\n"
"        sc = now + tonumber(ARGV[3 * i])\n"
"        redis.call('zadd', z, 'xx', sc, id)\n"
"      end\n"
"      n = n + 1\n"
"      if least < 0 or sc - now < least then least = sc - now end\n"
"    end\n"
"    r[2 * i - 1] = n\n"
"    r[2 * i] = least\n"
"  else\n"
"    c = redis.pcall('hget', KEYS[i], field)\n"
"  end\n"
"  if how == 's' or how == 't' then\n"
"  elseif type(c) == 'string' then\n"
"    if how ~= 'c' then\n"
RAISE_TTL("KEYS[i]", "ARGV[3 * i]")
"      if how == 'r' then\n"
"        local base = KEYS[i]\n"
"        if not string.find(base, '{', 1, true) then base = '{' .. base .. '}' end\n"
"        for k = 1, tonumber(c) do\n"
RAISE_TTL("base .. ':' .. field .. ':rwlock_timeout:' .. k", "ARGV[3 * i]")
"        end\n"
"      end\n"
"    end\n"
"    r[2 * i - 1] = tonumber(c)\n"
"    r[2 * i] = redis.call('pttl', KEYS[i])\n"
"  else\n"
"    r[2 * i - 1] = 0\n"
"    r[2 * i] = -2\n"
"  end\n"
"end\n"
"return r\n";

/*
 * The scripts; those marked true ("once") would apply twice if resent after
 * they ran (a lost reply): the connection layer never resends them
 * (rcmd_resendable), their callers settle a lost reply (holds_acquire.c).
 * The others are idempotent, or carry a request id (a release's unlock
 * latch; every semaphore and latch script that changes a count:
 * scripts_sync.c) that makes a replay answer as the first time.
 */
static RlockScript scripts[RLOCK_NUM_SCRIPTS] = {
	[RLOCK_SCRIPT_ACQUIRE] = {"acquire", acquire_body, "", true},	/* (or a
																	 * request id) */
	[RLOCK_SCRIPT_RELEASE] = {"release", release_body},
	[RLOCK_SCRIPT_RECONCILE] = {"reconcile", reconcile_body},
	[RLOCK_SCRIPT_FORCE_RELEASE] = {"force release", force_release_body},
	[RLOCK_SCRIPT_STATUS] = {"status", status_body},
	[RLOCK_SCRIPT_RENEW] = {"renew", renew_body},
	[RLOCK_SCRIPT_READ_ACQUIRE] = {"read acquire", rlock_read_acquire_body, "", true},
	[RLOCK_SCRIPT_WRITE_ACQUIRE] = {"write acquire", rlock_write_acquire_body, "", true},
	[RLOCK_SCRIPT_READ_RELEASE] = {"read release", rlock_read_release_body},
	[RLOCK_SCRIPT_WRITE_RELEASE] = {"write release", rlock_write_release_body},
	[RLOCK_SCRIPT_RW_RECONCILE] = {"read/write reconcile", rlock_rw_reconcile_body},
	[RLOCK_SCRIPT_FAIR_ACQUIRE] = {"fair acquire", rlock_fair_acquire_body, "", true},
	[RLOCK_SCRIPT_FAIR_RELEASE] = {"fair release", rlock_fair_release_body},
	[RLOCK_SCRIPT_FAIR_GIVE_UP] = {"fair give-up", rlock_fair_give_up_body},
	[RLOCK_SCRIPT_LATCH_COUNT] = {"latch count", rlock_latch_count_body},
	[RLOCK_SCRIPT_LATCH_SET_COUNT] = {"latch set count", rlock_latch_set_count_body},
	[RLOCK_SCRIPT_LATCH_COUNT_DOWN] = {"latch count down", rlock_latch_count_down_body},
	[RLOCK_SCRIPT_LATCH_ADOPT] = {"latch adopt", rlock_latch_adopt_body},
	[RLOCK_SCRIPT_SEM_ACQUIRE] = {"semaphore acquire", rlock_sem_acquire_body},
	[RLOCK_SCRIPT_SEM_RELEASE] = {"semaphore release", rlock_sem_release_body},
	[RLOCK_SCRIPT_SEM_RECONCILE] = {"semaphore reconcile", rlock_sem_reconcile_body},
	[RLOCK_SCRIPT_SEM_SET_PERMITS] = {"semaphore set permits", rlock_sem_set_permits_body},
	[RLOCK_SCRIPT_SEM_ADD_PERMITS] = {"semaphore add permits", rlock_sem_add_permits_body},
	[RLOCK_SCRIPT_SEM_AVAILABLE] = {"semaphore available", rlock_sem_available_body},
	[RLOCK_SCRIPT_LATCH_DELETE] = {"latch delete", rlock_latch_delete_body},
	[RLOCK_SCRIPT_SEM_DELETE] = {"semaphore delete", rlock_sem_delete_body},
	[RLOCK_SCRIPT_WAIT_REGISTER] = {"wait register", rlock_wait_register_body},
	[RLOCK_SCRIPT_WAIT_READ] = {"wait read", rlock_wait_read_body},
	[RLOCK_SCRIPT_LOCK_BLOCKERS] = {"lock blockers", rlock_lock_blockers_body},
	[RLOCK_SCRIPT_WAIT_FORGET] = {"wait forget", rlock_wait_forget_body},
};

/*
 * The same scripts publishing with SPUBLISH (sharded pub/sub: a Redis 7
 * Cluster, rlock.publish_mode), made from the bodies above on first use.
 */
static RlockScript sharded_scripts[RLOCK_NUM_SCRIPTS];

static bool digests_ready = false;

/*
 * A script's SHA1, as Redis names it for EVALSHA, by libcrypto (which
 * every supported PostgreSQL version can link with; pg_cryptohash needs 14
 * and a resource owner).
 */
static void
compute_sha1(RlockScript *s)
{
	if (!net_sha1_hex(s->body, strlen(s->body), s->sha1))
		elog(ERROR, "could not compute SHA1 of rlock script \"%s\"", s->name);
}

/* body with every redis.call('publish', ...) made 'spublish' (malloc'd). */
static char *
sharded_body(const char *body)
{
	const char *from = "'publish'";
	const char *to = "'spublish'";
	StringInfoData buf;
	const char *p = body;
	const char *hit;

	initStringInfo(&buf);
	while ((hit = strstr(p, from)) != NULL)
	{
		appendBinaryStringInfo(&buf, p, hit - p);
		appendStringInfoString(&buf, to);
		p = hit + strlen(from);
	}
	appendStringInfoString(&buf, p);
	return MemoryContextStrdup(TopMemoryContext, buf.data);
}

/* Compute every script's digest at once, on first use. */
static void
compute_all_sha1(void)
{
	for (int i = 0; i < RLOCK_NUM_SCRIPTS; i++)
	{
		compute_sha1(&scripts[i]);
		sharded_scripts[i].name = scripts[i].name;
		sharded_scripts[i].once = scripts[i].once;
		sharded_scripts[i].body = sharded_body(scripts[i].body);
		compute_sha1(&sharded_scripts[i]);
	}
	digests_ready = true;
}

void
rcmd_script(RedisCmd *cmd, RlockScriptId id, int nkeys)
{
	RlockScript *s;

	if (!digests_ready)
		compute_all_sha1();
	s = route_sharded_publish() ? &sharded_scripts[id] : &scripts[id];
	rcmd_init(cmd);
	rcmd_arg(cmd, "EVALSHA", 7);
	rcmd_arg(cmd, s->sha1, 40);
	rcmd_int(cmd, nkeys);
	cmd->script = s;
}

int
rcmd_renew_calls(const RenewArg *args, int n, int maxper, RedisCmd **cmds,
				 int **order, int **starts)
{
	const char **keys = palloc(Max(n, 1) * sizeof(char *));
	int			ncalls;

	for (int i = 0; i < n; i++)
		keys[i] = args[i].key;
	*order = palloc(Max(n, 1) * sizeof(int));
	*starts = palloc((n + 1) * sizeof(int));
	ncalls = route_slot_groups(keys, n, maxper, *order, *starts);
	*cmds = palloc(Max(ncalls, 1) * sizeof(RedisCmd));
	for (int g = 0; g < ncalls; g++)
	{
		RedisCmd   *cmd = &(*cmds)[g];
		int			from = (*starts)[g];
		int			to = (*starts)[g + 1];

		rcmd_script(cmd, RLOCK_SCRIPT_RENEW, to - from);
		for (int j = from; j < to; j++)
		{
			const RenewArg *a = &args[(*order)[j]];

			/* a semaphore's permits are members of {N}:timeout */
			if (a->how[0] == 's' || a->how[0] == 't')
				rcmd_str(cmd, lockname_suffixed(a->key, "timeout"));
			else
				rcmd_str(cmd, a->key);
		}
		for (int j = from; j < to; j++)
		{
			const RenewArg *a = &args[(*order)[j]];

			rcmd_str(cmd, a->field);
			rcmd_str(cmd, a->how);
			rcmd_int(cmd, a->lease_ms);
		}
	}
	pfree(keys);
	return ncalls;
}
