/*-------------------------------------------------------------------------
 *
 * scripts_lua.h
 *	  Lua fragments shared by the scripts of several lock kinds
 *	  (scripts.c, scripts_fair.c, scripts_rw.c, scripts_sync.c), and the
 *	  script bodies kept outside scripts.c.
 *	  Internal to the scripts: the rest of rlock sees locks.h.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_SCRIPTS_LUA_H
#define RLOCK_SCRIPTS_LUA_H

/*
 * Lua: PUBLISH, which a Redis ACL may refuse; a release publishes before it
 * writes anything, so a refusal is returned as the script's error with
 * nothing changed, worded as Redis 7.2 words NOPERM (Redis 7.0 does not
 * name the command for a script) so that the hint can name it.
 */
#define PUBLISH_OR_REFUSE(ch, msg) PUBLISH_OR_UNDO(ch, msg, "")

/*
 * Lua: a release or reconcile of an exclusive or fair lock refuses a
 * read/write lock (an owner token must never touch another kind's fields).
 * Its error reply, "RLOCKKIND <mode>", is mapped to SQLSTATE 42809.
 */
#define REFUSE_RW_KEYS1 \
"local rwmode = redis.call('hget', KEYS[1], 'mode')\n" \
"if rwmode then return redis.error_reply('RLOCKKIND ' .. rwmode) end\n"

/*
 * The same for a script that wrote something before: undo, Lua run on a
 * refusal before the error is returned ("" or ending in a space), takes
 * it back.
 */
#define PUBLISH_OR_UNDO(ch, msg, undo) \
"do\n" \
"  local pr = redis.pcall('publish', " ch ", " msg ")\n" \
"  if type(pr) == 'table' and pr.err then\n" \
"    " undo "return redis.error_reply('NOPERM this user has no permissions to run the \\'publish\\' command (channel ' .. " ch " .. '): ' .. pr.err)\n" \
"  end\n" \
"end\n"

/*
 * Lua: make the TTL of key at least ms, never lower it.  A key shared by
 * several holds (re-entry, read holds inside a write hold, other holders'
 * read holds) must live as long as the longest of them: the holder of each
 * hold was promised its lease, and rlock records an expiry for every hold
 * it counts that Redis must not undercut (SPEC 6, "Agreement between Redis
 * and rlock").  A key without a TTL (-1) gets one.
 */
#define RAISE_TTL(key, ms) \
"do\n" \
"  local t = redis.call('pttl', " key ")\n" \
"  if t < tonumber(" ms ") then redis.call('pexpire', " key ", " ms ") end\n" \
"end\n"

/*
 * Lua: the name of the lock's fair-lock queue, redisson_lock_queue:{N}
 * (Redisson's prefixName rule), in "fairq".  Other kinds refuse a name
 * whose queue exists: fair waiters are queued on it.
 */
#define FAIR_QUEUE_OF_KEYS1 \
"local fairq = KEYS[1]\n" \
"if not string.find(fairq, '{', 1, true) then fairq = '{' .. fairq .. '}' end\n" \
"fairq = 'redisson_lock_queue:' .. fairq\n"

/*
 * Lua: the common prefix of a read/write lock's per-hold timeout keys,
 * "{N}" (or N itself when it has a hash tag already); a hold's timeout key
 * is <prefix>:<holder>:rwlock_timeout:<k>.
 */
#define RW_TIMEOUT_BASE \
"local base = KEYS[1]\n" \
"if not string.find(base, '{', 1, true) then base = '{' .. base .. '}' end\n"

/*
 * Lua: an acquire script made safe to resend by a request id (RedisCmd's
 * request_id).  With a key more, KEYS[k], the request's latch, its TTL
 * in ARGV[ttl]: a grant ({1, count}) is recorded there before it is
 * answered, and a replay after a lost reply finds it and answers as the
 * first time, changing nothing.  The body goes between the two, its
 * returns those of a function.
 */
#define REQUEST_LATCH_BEGIN(k) \
"local rq = #KEYS >= " k " and KEYS[" k "] or false\n" \
"if rq then\n" \
"  local v = redis.call('get', rq)\n" \
"  if v then return {1, tonumber(v)} end\n" \
"end\n" \
"local function body()\n"
#define REQUEST_LATCH_END(ttl) \
"end\n" \
"local r = body()\n" \
"if rq and type(r) == 'table' and r[1] == 1 then\n" \
"  redis.call('set', rq, string.format('%d', r[2]), 'px', " ttl ")\n" \
"end\n" \
"return r\n"

/* the read/write lock's scripts (scripts_rw.c) */
extern const char rlock_fair_acquire_body[];
extern const char rlock_fair_release_body[];
extern const char rlock_fair_give_up_body[];
extern const char rlock_read_acquire_body[];
extern const char rlock_write_acquire_body[];
extern const char rlock_read_release_body[];
extern const char rlock_write_release_body[];
extern const char rlock_rw_reconcile_body[];

/* the count-down latch's and the semaphore's scripts (scripts_sync.c) */
extern const char rlock_latch_count_body[];
extern const char rlock_latch_set_count_body[];
extern const char rlock_latch_count_down_body[];
extern const char rlock_latch_adopt_body[];
extern const char rlock_sem_acquire_body[];
extern const char rlock_sem_release_body[];
extern const char rlock_sem_reconcile_body[];
extern const char rlock_sem_set_permits_body[];
extern const char rlock_sem_add_permits_body[];
extern const char rlock_sem_available_body[];
extern const char rlock_latch_delete_body[];
extern const char rlock_sem_delete_body[];

/* scripts_wait.c */
extern const char rlock_wait_register_body[];
extern const char rlock_wait_read_body[];
extern const char rlock_lock_blockers_body[];
extern const char rlock_wait_forget_body[];

#endif							/* RLOCK_SCRIPTS_LUA_H */
