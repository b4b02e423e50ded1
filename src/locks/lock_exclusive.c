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
 * releases are built.  What this session holds is recorded in the held-lock
 * table (holds_table.c); the round trips themselves go through the route
 * layer (route_run).
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>

#include "miscadmin.h"

#include "redis/redis.h"
#include "holds/holds.h"
#include "locks/locks.h"
#include "locks/locks_int.h"
#include "base/base.h"

/* Message published on the lock's channel when it is released. */
#define RELEASE_MESSAGE		"0"

static const char *
exclusive_build_release(RedisCmd *cmd, RlockKind kind, const char *key,
						const char *holder, int levels, int64 keep_lease_ms)
{
	char	   *channel = lockname_derive(key, "redisson_lock__channel");
	char	   *latch = lockname_unlock_latch(key);

	rcmd_script(cmd, RLOCK_SCRIPT_RELEASE, 4);
	rcmd_str(cmd, key);
	rcmd_str(cmd, channel);
	rcmd_str(cmd, latch);
	rcmd_str(cmd, lockname_derive(key, "redisson_lock_queue"));
	rcmd_str(cmd, RELEASE_MESSAGE);
	rcmd_int(cmd, keep_lease_ms);
	rcmd_str(cmd, holder);
	rcmd_int(cmd, levels);
	rcmd_int(cmd, lockname_latch_ttl_ms());
	return latch;
}

void
exclusive_build_reconcile(RedisCmd *cmd, RlockKind kind, const char *key,
						  const char *holder, int target)
{
	rcmd_script(cmd, RLOCK_SCRIPT_RECONCILE, 2);
	rcmd_str(cmd, key);
	rcmd_str(cmd, lockname_derive(key, "redisson_lock__channel"));
	rcmd_str(cmd, holder);
	rcmd_int(cmd, target);
	rcmd_str(cmd, RELEASE_MESSAGE);
}

const RlockKindOps exclusive_ops = {
	.build_release = exclusive_build_release,
	.build_reconcile = exclusive_build_reconcile,
};

/*
 * The fencing token counter of ln cannot be incremented (why: "type",
 * "integer" or "max", from the acquire script, which refuses before it
 * writes anything; or from a GET).
 */
static void
token_error(const LockName *ln, const char *why)
{
	char	   *counter = lockname_derive(ln->key, "redisson_lock_token");

	if (why != NULL && strcmp(why, "max") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("fencing token of lock \"%s\" is out of range", ln->name),
				 errdetail("Its counter, Redis key \"%s\", has reached the largest 64-bit integer.",
						   counter)));
	ereport(ERROR,
			(errcode(ERRCODE_WRONG_OBJECT_TYPE),
			 errmsg("fencing token of lock \"%s\" is not an integer", ln->name),
			 errdetail("Its counter, Redis key \"%s\", holds %s.", counter,
					   why != NULL && strcmp(why, "type") == 0 ?
					   "another kind of Redis value" :
					   "a value that is not a 64-bit integer"),
			 errhint("Delete or repair that key; until then, no fenced acquisition of the lock can take it.")));
}

/* What an attempt needs, for the waiting loop (lock_wait.c). */
typedef struct ExclusiveAttempt
{
	const LockName *ln;
	HoldRequest req;
	const char *holder;
	int64	   *token;			/* fenced acquisitions */
} ExclusiveAttempt;

/*
 * The acquire script of ln for holder (a fenced acquisition when fenced:
 * the reply then carries the new token); with request_id, it carries a
 * latch (returned: to DEL once answered) that makes a replay after a lost
 * reply answer as the first time and change nothing.
 */
const char *
exclusive_build_acquire(RedisCmd *cmd, const LockName *ln, int64 lease_ms,
						const char *holder, bool fenced, bool request_id)
{
	char	   *latch = request_id ? lockname_unlock_latch(ln->key) : NULL;

	rcmd_script(cmd, RLOCK_SCRIPT_ACQUIRE, (fenced ? 2 : 1) + (latch ? 1 : 0));
	rcmd_arg(cmd, ln->key, ln->keylen);
	if (fenced)
		rcmd_str(cmd, lockname_derive(ln->key, "redisson_lock_token"));
	if (latch)
		rcmd_str(cmd, latch);
	rcmd_int(cmd, lease_ms);
	rcmd_str(cmd, holder);
	if (latch)
	{
		rcmd_int(cmd, lockname_latch_ttl_ms());
		cmd->request_id = true;
	}
	return latch;
}

/*
 * The acquire script refused ln for a reason of its own (status > 1): the
 * name is another kind of lock, or its fencing counter is unusable.
 */
void
exclusive_refused(const LockName *ln, const AcquireResult *res)
{
	if (res->status == 4)
		token_error(ln, res->word);
	if (res->word != NULL && strcmp(res->word, "fair") == 0)
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
			 res->word ? errdetail("It is currently held in %s mode.", res->word) : 0,
			 errhint("Use the rlock_read_* and rlock_write_* functions for it, or another name.")));
}

/*
 * One attempt.  Returns true when acquired (the fencing token in *token for
 * a fenced acquisition); otherwise sets *pttl to the holder's remaining
 * lease (-1: none).
 */
static bool
exclusive_try(void *arg, int64 *pttl)
{
	ExclusiveAttempt *a = arg;
	const LockName *ln = a->ln;
	RedisCmd	cmd;
	AcquireResult res;
	const char *latch;

	/*
	 * An owner token's or a fenced acquisition carries a request id: a
	 * replay after a lost reply answers as the first time (a session's
	 * own is settled by its count, holds_acquire.c).
	 */
	latch = exclusive_build_acquire(&cmd, ln, a->req.lease_ms, a->holder,
									a->token != NULL,
									a->token != NULL || !a->req.track);
	res = holds_run_acquire(ln, RLOCK_KIND_EXCLUSIVE, &a->req, &cmd);
	if (latch)
		route_defer_del(route_backend(), latch);

	switch (res.status)
	{
		case 1:
			if (a->token != NULL)
			{
				if (!res.has_extra)
					ereport(ERROR,
							(errcode(ERRCODE_PROTOCOL_VIOLATION),
							 errmsg("no fencing token in Redis's answer for lock \"%s\"",
									ln->name)));
				*a->token = res.extra;
			}
			return true;
		case 0:
			*pttl = res.value;
			return false;
		default:
			exclusive_refused(ln, &res);
	}
	return false;				/* keep compiler quiet */
}

static bool
exclusive_acquire_untimed(const LockName *ln, RlockScope scope, int64 lease_ms,
						  int64 wait_ms, const char *owner, bool honour_lock_timeout,
						  int64 *token)
{
	int64		pttl;
	ExclusiveAttempt attempt;
	char	   *channel = NULL;

	attempt.holder = holds_prepare_acquire(ln, RLOCK_KIND_EXCLUSIVE, scope,
										   lease_ms, owner, &attempt.req);
	attempt.ln = ln;
	attempt.token = token;

	/*
	 * Other sessions of this server already wait for the lock: queue behind
	 * them rather than try first (lock_wait.c, LOCK_WAIT_BEHIND), unless
	 * this session holds it (a re-entry succeeds at once) or asks with an
	 * owner token (whoever holds it may be waiting for us).  (Not for a try
	 * without a wait: nothing to look up then.)
	 */
	if (wait_ms != 0 && owner == NULL)
	{
		HeldLock   *mine = holds_find(ln->key, RLOCK_KIND_EXCLUSIVE);

		channel = lockname_derive(ln->key, "redisson_lock__channel");
		if ((mine == NULL || (holds_total(mine) == 0 && !mine->uncertain)) &&
			waitqueue_has_waiters(channel))
		{
			wait_graph_next(token ? "fenced" : "exclusive", ln, 1);
			return lock_wait(ln, channel, wait_ms, honour_lock_timeout,
							 LOCK_WAIT_BEHIND | LOCK_WAIT_QUEUED,
							 exclusive_try, NULL, &attempt);
		}
	}

	if (exclusive_try(&attempt, &pttl))
		return true;
	if (wait_ms == 0)
	{
		stats_count(RLOCK_STAT_FAILED);
		return false;
	}
	if (channel == NULL)
		channel = lockname_derive(ln->key, "redisson_lock__channel");
	wait_graph_next(token ? "fenced" : "exclusive", ln, 1);
	return lock_wait(ln, channel, wait_ms, honour_lock_timeout,
					 owner == NULL ? LOCK_WAIT_QUEUED : 0, exclusive_try, NULL,
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
	RReply *r;

	rcmd_init(&cmd);
	rcmd_str(&cmd, "GET");
	rcmd_str(&cmd, lockname_derive(ln->key, "redisson_lock_token"));
	r = route_run1(route_backend(), &cmd, ln->name);
	if (r->type == RREPLY_NIL)
		return false;
	if (rconn_reply_is(r, "WRONGTYPE"))
		token_error(ln, "type");
	if (r->type == RREPLY_ERROR)
		rconn_reply_error(r, ERROR, ln->name);
	if (r->type != RREPLY_STRING)
		rconn_unexpected_reply(r, ln->name);
	{
		char	   *end;

		errno = 0;
		*token = strtoll(r->str, &end, 10);
		if (r->len == 0 || *end != '\0' || errno != 0)
			token_error(ln, "integer");
	}
	return true;
}

/*
 * The event (and LOG line) of a force release that deleted a lock: the
 * first holder it took the lock from (shown masked when it is an owner
 * token's: not in the words of the LOG line).
 */
static void
force_release_event(const LockName *ln, const char *first, size_t len,
					int64 nholders)
{
	char		holder[RLOCK_EVENT_HOLDER_LEN];

	/* (a write hold's field is its holder's, ":write" added) */
	if (len > 6 && strncmp(first + len - 6, ":write", 6) == 0)
		len -= 6;
	rlock_printable_into(holder, sizeof(holder), first, len);
	rlock_event(LOG, RLOCK_EVENT_FORCE_RELEASE, NULL, ln->key, holder,
				"rlock: lock \"%s\" was force-released by pid %d, taken from %lld holder(s)",
				ln->key, MyProcPid, (long long) nholders);
}

bool
exclusive_force_release(const LockName *ln)
{
	RedisCmd	cmd;
	RReply *r;
	HeldLock   *h;
	RedisConn  *conn = route_backend();
	char	   *latch = lockname_unlock_latch(ln->key);

	holds_settle();
	/* (the latch makes a replay after a lost reply delete nothing) */
	rcmd_script(&cmd, RLOCK_SCRIPT_FORCE_RELEASE, 5);
	rcmd_arg(&cmd, ln->key, ln->keylen);
	rcmd_str(&cmd, lockname_derive(ln->key, "redisson_lock__channel"));
	rcmd_str(&cmd, lockname_derive(ln->key, "redisson_rwlock"));
	rcmd_str(&cmd, lockname_derive(ln->key, "redisson_lock_queue"));
	rcmd_str(&cmd, latch);
	rcmd_str(&cmd, RELEASE_MESSAGE);
	rcmd_int(&cmd, lockname_latch_ttl_ms());
	r = route_run1(conn, &cmd, ln->name);
	if (rconn_reply_is(r, "RLOCKNOTLOCK"))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("Redis key of lock \"%s\" is not a lock", ln->name),
				 strcmp(rconn_error_word(r, "RLOCKNOTLOCK"), "expiry") == 0 ?
				 errdetail("It is a hash without an expiry time; every lock has one.") :
				 errdetail("It is a hash with a field that is not a holder's hold count."),
				 errhint("rlock_force_release deletes only locks; the key was left as it was.")));
	/* 1 or 0; or, when it deleted a lock, {1, first holder, holders} */
	if (r->type == RREPLY_ARRAY && r->elements == 3 &&
		r->element[0]->type == RREPLY_INTEGER && r->element[0]->integer == 1 &&
		r->element[1]->type == RREPLY_STRING &&
		r->element[2]->type == RREPLY_INTEGER)
		force_release_event(ln, r->element[1]->str, r->element[1]->len,
							r->element[2]->integer);
	else if (r->type != RREPLY_INTEGER)
		rconn_unexpected_reply(r, ln->name);
	route_defer_del(conn, latch);

	/* whatever this session held of it, as any kind, is gone now */
	for (int k = 0; k < RLOCK_NUM_KINDS; k++)
	{
		if (!kind_is_local(k))
			continue;			/* (a Redlock lives on its own masters) */
		h = holds_find(ln->key, k);
		if (h != NULL)
			holds_forget(h);
	}
	return r->type == RREPLY_ARRAY || r->integer == 1;
}

/* exclusive_acquire, its wait counted in the histogram of its kind */
bool
exclusive_acquire(const LockName *ln, RlockScope scope, int64 lease_ms,
				  int64 wait_ms, const char *owner, bool honour_lock_timeout,
				  int64 *token)
{
	volatile bool result = false;

	LOCKS_TIMED_CALL(RLOCK_KIND_EXCLUSIVE, result,
					 exclusive_acquire_untimed(ln, scope, lease_ms, wait_ms,
											   owner, honour_lock_timeout,
											   token));
	return result;
}
