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

#include "common/cryptohash.h"
#include "common/sha1.h"
#include "utils/resowner.h"

#include "scripts.h"

/*
 * acquire: KEYS[1] lock, KEYS[2] (fenced locks only) the fencing token
 * counter; ARGV[1] lease ms, ARGV[2] holder.
 * Returns {1, count} when acquired ({1, count, token} for a fenced lock:
 * every acquisition, reentrant ones included, increments the counter),
 * {0, pttl} when held by another holder, {2, mode} when the name is a
 * read/write lock.
 */
static const char acquire_body[] =
"local n\n"
"if redis.call('exists', KEYS[1]) == 0 then\n"
"  n = redis.call('hincrby', KEYS[1], ARGV[2], 1)\n"
"elseif redis.call('hexists', KEYS[1], 'mode') == 1 then\n"
"  return {2, redis.call('hget', KEYS[1], 'mode')}\n"
"elseif redis.call('hexists', KEYS[1], ARGV[2]) == 1 then\n"
"  n = redis.call('hincrby', KEYS[1], ARGV[2], 1)\n"
"else\n"
"  return {0, redis.call('pttl', KEYS[1])}\n"
"end\n"
"redis.call('pexpire', KEYS[1], ARGV[1])\n"
"if #KEYS > 1 then return {1, n, redis.call('incr', KEYS[2])} end\n"
"return {1, n}\n";

/*
 * release: KEYS[1] lock, KEYS[2] channel, KEYS[3] unlock latch;
 * ARGV[1] release message, ARGV[2] lease ms for the remaining holds
 * (0: keep the TTL), ARGV[3] holder, ARGV[4] levels to release,
 * ARGV[5] latch TTL ms.
 * Returns nil when not held, 0 when still held, 1 when released.
 */
static const char release_body[] =
"local v = redis.call('get', KEYS[3])\n"
"if v then return tonumber(v) end\n"
"if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end\n"
"local n = redis.call('hincrby', KEYS[1], ARGV[3], -tonumber(ARGV[4]))\n"
"if n > 0 then\n"
"  if tonumber(ARGV[2]) > 0 then redis.call('pexpire', KEYS[1], ARGV[2]) end\n"
"  redis.call('set', KEYS[3], 0, 'px', ARGV[5])\n"
"  return 0\n"
"end\n"
"redis.call('del', KEYS[1])\n"
"redis.call('publish', KEYS[2], ARGV[1])\n"
"redis.call('set', KEYS[3], 1, 'px', ARGV[5])\n"
"return 1\n";

/*
 * reconcile: KEYS[1] lock, KEYS[2] channel; ARGV[1] holder, ARGV[2] the
 * count this holder should have, ARGV[3] release message.  Lowers the
 * holder's count to the target (dropping the lock at zero).  Returns the
 * count found (-1: none).
 */
static const char reconcile_body[] =
"local c = redis.call('hget', KEYS[1], ARGV[1])\n"
"if not c then return -1 end\n"
"c = tonumber(c)\n"
"local t = tonumber(ARGV[2])\n"
"if c > t then\n"
"  if t <= 0 then\n"
"    redis.call('del', KEYS[1])\n"
"    redis.call('publish', KEYS[2], ARGV[3])\n"
"  else\n"
"    redis.call('hset', KEYS[1], ARGV[1], t)\n"
"  end\n"
"end\n"
"return c\n";

/*
 * force release (Redisson forceUnlock): KEYS[1] lock, KEYS[2] channel;
 * ARGV[1] release message.  Returns 1 when something was deleted; refuses
 * (WRONGTYPE) to delete a key that is not a lock.
 */
static const char force_release_body[] =
"local t = redis.call('type', KEYS[1])['ok']\n"
"if t ~= 'hash' and t ~= 'none' then\n"
"  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')\n"
"end\n"
"if redis.call('del', KEYS[1]) == 1 then\n"
"  redis.call('publish', KEYS[2], ARGV[1])\n"
"  return 1\n"
"end\n"
"return 0\n";

/*
 * status: KEYS[1] lock.  Returns {pttl, field, value, ...}; {-2} when the
 * key does not exist; WRONGTYPE when it is not a hash.
 */
static const char status_body[] =
"local t = redis.call('type', KEYS[1])['ok']\n"
"if t == 'none' then return {-2} end\n"
"if t ~= 'hash' then\n"
"  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')\n"
"end\n"
"local r = redis.call('hgetall', KEYS[1])\n"
"table.insert(r, 1, redis.call('pttl', KEYS[1]))\n"
"return r\n";

/*
 * renew (the watchdog, for many locks at once): KEYS the locks; ARGV[1] the
 * lease ms, ARGV[1 + i] the holder of KEYS[i].  Extends each lock its holder
 * still holds; returns an array of 1 (renewed) / 0 (gone).
 */
static const char renew_body[] =
"local r = {}\n"
"for i = 1, #KEYS do\n"
"  if redis.pcall('hexists', KEYS[i], ARGV[i + 1]) == 1 then\n"
"    redis.call('pexpire', KEYS[i], ARGV[1])\n"
"    r[i] = 1\n"
"  else\n"
"    r[i] = 0\n"
"  end\n"
"end\n"
"return r\n";

static RlockScript scripts[RLOCK_NUM_SCRIPTS] = {
	[RLOCK_SCRIPT_ACQUIRE] = {"acquire", acquire_body},
	[RLOCK_SCRIPT_RELEASE] = {"release", release_body},
	[RLOCK_SCRIPT_RECONCILE] = {"reconcile", reconcile_body},
	[RLOCK_SCRIPT_FORCE_RELEASE] = {"force release", force_release_body},
	[RLOCK_SCRIPT_STATUS] = {"status", status_body},
	[RLOCK_SCRIPT_RENEW] = {"renew", renew_body},
};

static bool digests_ready = false;

static void
compute_sha1(RlockScript *s)
{
	pg_cryptohash_ctx *ctx;
	uint8		digest[SHA1_DIGEST_LENGTH];
	static const char hex[] = "0123456789abcdef";

	ctx = pg_cryptohash_create(PG_SHA1);
	if (ctx == NULL ||
		pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) s->body,
							 strlen(s->body)) < 0 ||
		pg_cryptohash_final(ctx, digest, sizeof(digest)) < 0)
		elog(ERROR, "could not compute SHA1 of rlock script \"%s\"", s->name);
	pg_cryptohash_free(ctx);
	for (int i = 0; i < SHA1_DIGEST_LENGTH; i++)
	{
		s->sha1[2 * i] = hex[digest[i] >> 4];
		s->sha1[2 * i + 1] = hex[digest[i] & 0x0f];
	}
	s->sha1[40] = '\0';
}

/*
 * Compute every script's digest at once, on first use.  pg_cryptohash needs
 * a resource owner; outside a transaction (backend exit, a worker between
 * transactions) a temporary one is used.
 */
static void
compute_all_sha1(void)
{
	ResourceOwner saved = CurrentResourceOwner;
	volatile ResourceOwner tmp = NULL;

	if (CurrentResourceOwner == NULL)
		CurrentResourceOwner = tmp = ResourceOwnerCreate(NULL, "rlock scripts");
	PG_TRY();
	{
		for (int i = 0; i < RLOCK_NUM_SCRIPTS; i++)
			compute_sha1(&scripts[i]);
	}
	PG_FINALLY();
	{
		if (tmp != NULL)
		{
			ResourceOwnerRelease(tmp, RESOURCE_RELEASE_BEFORE_LOCKS, false,
								 true);
			ResourceOwnerRelease(tmp, RESOURCE_RELEASE_LOCKS, false, true);
			ResourceOwnerRelease(tmp, RESOURCE_RELEASE_AFTER_LOCKS, false,
								 true);
			CurrentResourceOwner = saved;
			ResourceOwnerDelete(tmp);
		}
	}
	PG_END_TRY();
	digests_ready = true;
}

void
rcmd_script(RedisCmd *cmd, RlockScriptId id, int nkeys)
{
	RlockScript *s = &scripts[id];

	if (!digests_ready)
		compute_all_sha1();
	rcmd_init(cmd);
	rcmd_arg(cmd, "EVALSHA", 7);
	rcmd_arg(cmd, s->sha1, 40);
	rcmd_int(cmd, nkeys);
	cmd->script = s;
}
