/*-------------------------------------------------------------------------
 *
 * lock_exclusive.c
 *	  The exclusive reentrant lock, on Redisson's RLock layout: a hash at the
 *	  lock's name mapping holder -> hold count, with the lease as its TTL;
 *	  the release message "0" on redisson_lock__channel:{name}; an unlock
 *	  latch per release request, so that a replayed release is harmless.
 *	  And its fenced variant (Redisson RFencedLock): the same lock, whose
 *	  every acquisition also increments redisson_lock_token:{name} and
 *	  returns the new value as a fencing token.
 *
 * This file owns the lock kind's protocol: how an acquisition is tried
 * (a blocked one waits in lock_wait.c, on the lock's channel) and how
 * releases are built.  What this session holds is recorded in holds.c; the round
 * trips themselves go through connection.c.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"

#include "connection.h"
#include "holds.h"
#include "lock_exclusive.h"
#include "lock_wait.h"
#include "lockname.h"
#include "registry.h"
#include "scripts.h"
#include "stats.h"

/* Message published on the lock's channel when it is released. */
#define RELEASE_MESSAGE		"0"

static void exclusive_build_release(RedisCmd *cmd, const char *key,
									const char *holder, int levels,
									int64 keep_lease_ms);
static void exclusive_build_reconcile(RedisCmd *cmd, const char *key,
									  const char *holder, int target);

static void
exclusive_build_count(RedisCmd *cmd, const char *key, const char *holder)
{
	rcmd_init(cmd);
	rcmd_str(cmd, "HGET");
	rcmd_str(cmd, key);
	rcmd_str(cmd, holder);
}

const RlockKindOps exclusive_ops = {
	.build_release = exclusive_build_release,
	.build_reconcile = exclusive_build_reconcile,
	.build_count = exclusive_build_count,
};

static void
exclusive_build_release(RedisCmd *cmd, const char *key, const char *holder,
						int levels, int64 keep_lease_ms)
{
	char	   *channel = lockname_derive(key, "redisson_lock__channel");
	char	   *latch = lockname_unlock_latch(key);

	rcmd_script(cmd, RLOCK_SCRIPT_RELEASE, 3);
	rcmd_str(cmd, key);
	rcmd_str(cmd, channel);
	rcmd_str(cmd, latch);
	rcmd_str(cmd, RELEASE_MESSAGE);
	rcmd_int(cmd, keep_lease_ms);
	rcmd_str(cmd, holder);
	rcmd_int(cmd, levels);
	rcmd_int(cmd, lockname_latch_ttl_ms());
}

static void
exclusive_build_reconcile(RedisCmd *cmd, const char *key, const char *holder,
						  int target)
{
	rcmd_script(cmd, RLOCK_SCRIPT_RECONCILE, 2);
	rcmd_str(cmd, key);
	rcmd_str(cmd, lockname_derive(key, "redisson_lock__channel"));
	rcmd_str(cmd, holder);
	rcmd_int(cmd, target);
	rcmd_str(cmd, RELEASE_MESSAGE);
}

/*
 * One attempt.  Returns true when acquired (and recorded in h, if any; the
 * fencing token in *token for a fenced acquisition); otherwise sets *pttl
 * to the holder's remaining lease (-1: none).
 */
static bool
try_once(const LockName *ln, bool track, RlockScope scope, int64 lease_ms,
		 bool watchdog, const char *holder, int64 *pttl, int64 *token)
{
	RedisCmd	cmd;
	redisReply *r;
	int64		status;
	int64		value;
	HeldLock   *h = NULL;

	rcmd_script(&cmd, RLOCK_SCRIPT_ACQUIRE, token ? 2 : 1);
	rcmd_arg(&cmd, ln->key, ln->keylen);
	if (token)
		rcmd_str(&cmd, lockname_derive(ln->key, "redisson_lock_token"));
	rcmd_int(&cmd, lease_ms);
	rcmd_str(&cmd, holder);

	/*
	 * From here until the answer is in, Redis may hold one more hold than
	 * the table.  (The entry is looked up afresh on every attempt: a refused
	 * attempt removes an entry that holds nothing.)
	 */
	if (track)
	{
		h = holds_enter(ln->key, RLOCK_KIND_EXCLUSIVE);
		holds_begin_acquire(h);
	}
	r = rconn_run1(rconn_backend(), &cmd, ln->name);

	if (r->type == REDIS_REPLY_ERROR)
	{
		/* the script did not run to completion: nothing was granted */
		if (h)
			holds_acquire_refused(h);
		rconn_reply_error(r, ERROR, ln->name);
	}
	if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
		r->element[0]->type != REDIS_REPLY_INTEGER)
		rconn_unexpected_reply(r, ln->name);	/* entry stays uncertain */
	status = r->element[0]->integer;

	if (status == 2)
	{
		char	   *mode = pnstrdup(r->element[1]->str, r->element[1]->len);

		if (h)
			holds_acquire_refused(h);
		if (strcmp(mode, "fair") == 0)
			ereport(ERROR,
					(errcode(ERRCODE_WRONG_OBJECT_TYPE),
					 errmsg("lock \"%s\" is a fair lock, not an exclusive lock",
							ln->name),
					 errdetail("Sessions are queued for it as a fair lock."),
					 errhint("Use the rlock_fair_* functions for it, or another name.")));
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("lock \"%s\" is a read/write lock, not an exclusive lock",
						ln->name),
				 errdetail("It is currently held in %s mode.", mode),
				 errhint("Use the rlock_read_* and rlock_write_* functions for it, or another name.")));
	}
	if (r->element[1]->type != REDIS_REPLY_INTEGER)
		rconn_unexpected_reply(r, ln->name);
	value = r->element[1]->integer;

	if (status == 1)
	{
		if (token != NULL)
		{
			if (r->elements != 3 ||
				r->element[2]->type != REDIS_REPLY_INTEGER)
				rconn_unexpected_reply(r, ln->name);	/* entry stays uncertain */
			*token = r->element[2]->integer;
		}
		if (h)
			holds_add(h, scope, lease_ms, watchdog, (int) value, ln->name);
		stats_count(RLOCK_STAT_ACQUISITIONS);
		return true;
	}
	if (h)
		holds_acquire_refused(h);
	*pttl = value;
	return false;
}

/* What an attempt needs, for the waiting loop (lock_wait.c). */
typedef struct ExclusiveAttempt
{
	const LockName *ln;
	bool		track;
	RlockScope	scope;
	int64		lease_ms;
	bool		watchdog;
	const char *holder;
	int64	   *token;
} ExclusiveAttempt;

static bool
exclusive_try(void *arg, int64 *pttl)
{
	ExclusiveAttempt *a = arg;

	return try_once(a->ln, a->track, a->scope, a->lease_ms, a->watchdog,
					a->holder, pttl, a->token);
}

bool
exclusive_acquire(const LockName *ln, RlockScope scope, int64 lease_ms,
				  int64 wait_ms, const char *owner, bool honour_lock_timeout,
				  int64 *token)
{
	HeldLock   *h;
	bool		watchdog = (lease_ms == 0);
	const char *holder;
	int64		pttl;
	ExclusiveAttempt attempt;

	holds_settle();
	rconn_ready(rconn_backend(), ln->name);

	if (watchdog)
		lease_ms = rlock_watchdog_timeout_ms;
	if (owner != NULL)
		holder = owner;
	else
	{
		holder = rlock_backend_holder();
		h = holds_find(ln->key, RLOCK_KIND_EXCLUSIVE);
		if (h != NULL)
			holds_check_lost(h, ln->name);
		h = holds_find_conflicting(ln->key, RLOCK_KIND_EXCLUSIVE);
		if (h != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_WRONG_OBJECT_TYPE),
					 errmsg("lock \"%s\" is held by this session in %s mode",
							ln->name, rlock_kind_name(h->kind))));
	}

	attempt.ln = ln;
	attempt.track = (owner == NULL);
	attempt.scope = scope;
	attempt.lease_ms = lease_ms;
	attempt.watchdog = watchdog;
	attempt.holder = holder;
	attempt.token = token;
	if (exclusive_try(&attempt, &pttl))
		return true;
	if (wait_ms == 0)
	{
		stats_count(RLOCK_STAT_FAILED);
		return false;
	}
	return lock_wait(ln, lockname_derive(ln->key, "redisson_lock__channel"),
					 wait_ms, honour_lock_timeout, exclusive_try, NULL,
					 &attempt);
}

/*
 * The current fencing token of a fenced lock: false when it was never
 * acquired as one.
 */
bool
exclusive_token(const LockName *ln, int64 *token)
{
	RedisCmd	cmd;
	redisReply *r;

	rcmd_init(&cmd);
	rcmd_str(&cmd, "GET");
	rcmd_str(&cmd, lockname_derive(ln->key, "redisson_lock_token"));
	r = rconn_run1(rconn_backend(), &cmd, ln->name);
	if (r->type == REDIS_REPLY_NIL)
		return false;
	if (r->type == REDIS_REPLY_ERROR)
		rconn_reply_error(r, ERROR, ln->name);
	if (r->type != REDIS_REPLY_STRING)
		rconn_unexpected_reply(r, ln->name);
	*token = strtoll(r->str, NULL, 10);
	return true;
}

bool
exclusive_release(const LockName *ln, const char *owner)
{
	HeldLock   *h;

	holds_settle();

	if (owner != NULL)
	{
		RedisCmd	cmd;
		redisReply *r;

		exclusive_build_release(&cmd, ln->key, owner, 1, 0);
		r = rconn_run1(rconn_backend(), &cmd, ln->name);
		if (r->type == REDIS_REPLY_ERROR)
			rconn_reply_error(r, ERROR, ln->name);
		if (r->type == REDIS_REPLY_NIL)
		{
			ereport(WARNING,
					(errmsg("lock \"%s\" is not held by owner \"%s\"",
							ln->name, owner)));
			return false;
		}
		if (r->type != REDIS_REPLY_INTEGER)
			rconn_unexpected_reply(r, ln->name);
		stats_count(RLOCK_STAT_RELEASES);
		return true;
	}

	h = holds_find(ln->key, RLOCK_KIND_EXCLUSIVE);
	if (h != NULL && holds_check_lost(h, ln->name))
		return false;
	if (h == NULL || holds_total(h) == 0)
	{
		HeldLock   *other = holds_find_conflicting(ln->key,
												   RLOCK_KIND_EXCLUSIVE);

		if (other != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_WRONG_OBJECT_TYPE),
					 errmsg("lock \"%s\" is held by this session in %s mode",
							ln->name, rlock_kind_name(other->kind))));
	}
	if (h == NULL || h->session_count == 0)
	{
		if (h != NULL && h->xact_count > 0)
			ereport(WARNING,
					(errmsg("lock \"%s\" is held by this session only at transaction level",
							ln->name),
					 errhint("Transaction-level locks are released when the transaction ends.")));
		else
			ereport(WARNING,
					(errmsg("lock \"%s\" is not held by this session", ln->name)));
		return false;
	}
	return holds_release_session(h);
}

bool
exclusive_force_release(const LockName *ln)
{
	RedisCmd	cmd;
	redisReply *r;
	HeldLock   *h;

	holds_settle();
	rcmd_script(&cmd, RLOCK_SCRIPT_FORCE_RELEASE, 4);
	rcmd_arg(&cmd, ln->key, ln->keylen);
	rcmd_str(&cmd, lockname_derive(ln->key, "redisson_lock__channel"));
	rcmd_str(&cmd, lockname_derive(ln->key, "redisson_rwlock"));
	rcmd_str(&cmd, lockname_derive(ln->key, "redisson_lock_queue"));
	rcmd_str(&cmd, RELEASE_MESSAGE);
	r = rconn_run1(rconn_backend(), &cmd, ln->name);
	if (r->type != REDIS_REPLY_INTEGER)
		rconn_unexpected_reply(r, ln->name);

	/* whatever this session held of it, as any kind, is gone now */
	for (int k = 0; k < RLOCK_NUM_KINDS; k++)
	{
		h = holds_find(ln->key, k);
		if (h != NULL)
			holds_forget(h);
	}
	return r->integer == 1;
}
