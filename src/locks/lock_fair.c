/*-------------------------------------------------------------------------
 *
 * lock_fair.c
 *	  The fair lock, on Redisson's fair-lock layout: the exclusive lock's
 *	  hash, plus a FIFO queue of waiting holders (redisson_lock_queue:{name},
 *	  a list), their deadlines (redisson_lock_timeout:{name}, a sorted set of
 *	  epoch ms after which a waiter counts as gone), and one channel per
 *	  waiter (redisson_lock__channel:{name}:<holder>), on which a release
 *	  tells only the queue's head.
 *
 * Waiters acquire in the order they queued.  A waiter that stops waiting
 * leaves the queue at once, so that nobody behind it is stalled: when its
 * wait ends without the lock (try with a wait that expired), and when an
 * ERROR ends it (cancel, lock_timeout, statement_timeout, a FATAL from
 * pg_terminate_backend), from the abort or exit path (fair_cleanup,
 * registered with holds_on_abort: no Redis I/O in PG_CATCH).  A waiter
 * that dies without leaving (SIGKILL, a crash) is dropped when its deadline passes: every
 * attempt of a live waiter (one at least every 5 s) pushes its own
 * deadline to the holder's remaining lease plus FAIR_WAIT_MS, so live
 * waiters never expire and dead ones are gone within that time; and once
 * the lock is free, a head that is not the one asking has FAIR_WAIT_MS
 * to take it (the acquire script brings its deadline in), so a dead head
 * does not stall the queue until a long lease would have ended.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "redis/redis.h"
#include "holds/holds.h"
#include "locks/locks.h"
#include "locks/locks_int.h"
#include "base/base.h"

/*
 * How long past its predecessor's deadline (or the holder's lease) a queued
 * waiter counts as alive; the "thread wait time" of Redisson's fair lock.
 */
#define FAIR_WAIT_MS		10000

/* The queue this backend waits in, if any (for the exit callback). */
static char *queued_key = NULL;
static char *queued_holder = NULL;

static int64
epoch_ms(void)
{
	return GetCurrentTimestamp() / 1000 +
		(int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000;
}

static void
add_queue_keys(RedisCmd *cmd, const char *key)
{
	rcmd_str(cmd, key);
	rcmd_str(cmd, lockname_derive(key, "redisson_lock_queue"));
	rcmd_str(cmd, lockname_derive(key, "redisson_lock_timeout"));
}

static const char *
fair_build_release(RedisCmd *cmd, RlockKind kind, const char *key,
				   const char *holder, int levels, int64 keep_lease_ms)
{
	char	   *latch = lockname_unlock_latch(key);

	rcmd_script(cmd, RLOCK_SCRIPT_FAIR_RELEASE, 4);
	add_queue_keys(cmd, key);
	rcmd_str(cmd, latch);
	rcmd_str(cmd, holder);
	rcmd_int(cmd, levels);
	rcmd_int(cmd, keep_lease_ms);
	rcmd_int(cmd, lockname_latch_ttl_ms());
	rcmd_int(cmd, epoch_ms());
	rcmd_str(cmd, lockname_derive(key, "redisson_lock__channel"));
	return latch;
}

static void
fair_build_reconcile(RedisCmd *cmd, RlockKind kind, const char *key,
					 const char *holder, int target)
{
	rcmd_script(cmd, RLOCK_SCRIPT_RECONCILE, 3);
	rcmd_str(cmd, key);
	rcmd_str(cmd, lockname_derive(key, "redisson_lock__channel"));
	rcmd_str(cmd, lockname_derive(key, "redisson_lock_queue"));
	rcmd_str(cmd, holder);
	rcmd_int(cmd, target);
	rcmd_str(cmd, "0");
}

const RlockKindOps fair_ops = {
	.build_release = fair_build_release,
	.build_reconcile = fair_build_reconcile,
};

/*
 * Leave the queue of key (if queued).  Never throws: a failure is a
 * WARNING, and the waiter's deadline is the backstop.
 */
static void
give_up(const char *key, const char *holder)
{
	RedisCmd	cmd;
	RReply **replies;

	rcmd_script(&cmd, RLOCK_SCRIPT_FAIR_GIVE_UP, 3);
	add_queue_keys(&cmd, key);
	rcmd_str(&cmd, holder);
	rcmd_int(&cmd, FAIR_WAIT_MS);
	rcmd_str(&cmd, lockname_derive(key, "redisson_lock__channel"));
	if (route_run(route_backend(), &cmd, 1, &replies, WARNING, key) &&
		replies[0]->type == RREPLY_ERROR)
		rconn_reply_error(replies[0], WARNING, key);
}

static void
forget_queue(void)
{
	if (queued_key)
		pfree(queued_key);
	if (queued_holder)
		pfree(queued_holder);
	queued_key = queued_holder = NULL;
}

/*
 * Leave the queue this backend may still be in (an ERROR, a cancel or a
 * FATAL ended its wait): registered with holds_on_abort, so it runs from
 * the abort paths, at exit and before the next call, never from PG_CATCH.
 */
static void
fair_cleanup(void)
{
	if (queued_key != NULL)
	{
		give_up(queued_key, queued_holder);
		forget_queue();
	}
}

/* What an attempt needs, for the waiting loop (lock_wait.c). */
typedef struct FairAttempt
{
	const LockName *ln;
	HoldRequest req;
	const char *holder;
	bool		enqueue;		/* queue when the lock cannot be taken */
} FairAttempt;

/* One attempt: true when acquired; otherwise sets *pttl. */
static bool
fair_try(void *arg, int64 *pttl)
{
	FairAttempt *a = arg;
	const LockName *ln = a->ln;
	RedisCmd	cmd;
	AcquireResult res;
	char	   *latch;

	/*
	 * An owner token's acquisition carries a request id (a session's own
	 * is settled by its count after a lost reply, holds_acquire.c).
	 */
	latch = a->req.track ? NULL : lockname_unlock_latch(ln->key);
	rcmd_script(&cmd, RLOCK_SCRIPT_FAIR_ACQUIRE, latch ? 4 : 3);
	add_queue_keys(&cmd, ln->key);
	if (latch)
		rcmd_str(&cmd, latch);
	rcmd_int(&cmd, a->req.lease_ms);
	rcmd_str(&cmd, a->holder);
	rcmd_int(&cmd, FAIR_WAIT_MS);
	rcmd_int(&cmd, epoch_ms());
	rcmd_str(&cmd, a->enqueue ? "1" : "0");
	rcmd_str(&cmd, lockname_derive(ln->key, "redisson_lock__channel"));
	if (latch)
	{
		rcmd_int(&cmd, lockname_latch_ttl_ms());
		cmd.request_id = true;
	}
	res = holds_run_acquire(ln, RLOCK_KIND_FAIR, &a->req, &cmd);
	if (latch)
		route_defer_del(route_backend(), latch);

	if (res.status == 1)
		return true;
	if (res.status == 0)
	{
		*pttl = res.value;
		return false;
	}
	ereport(ERROR,
			(errcode(ERRCODE_WRONG_OBJECT_TYPE),
			 errmsg("lock \"%s\" is a read/write lock, not a fair lock",
					ln->name),
			 errhint("Use the rlock_read_* and rlock_write_* functions for it, or another name.")));
	return false;				/* keep compiler quiet */
}

/* The wait ended without the lock (no ERROR): leave the queue now. */
static void
fair_give_up(void *arg)
{
	fair_cleanup();
}

static bool
fair_acquire_untimed(const LockName *ln, RlockScope scope, int64 lease_ms,
					 int64 wait_ms, const char *owner, bool honour_lock_timeout)
{
	FairAttempt attempt;
	int64		pttl;
	bool		acquired;

	attempt.holder = holds_prepare_acquire(ln, RLOCK_KIND_FAIR, scope,
										   lease_ms, owner, &attempt.req);
	attempt.ln = ln;
	attempt.enqueue = (wait_ms != 0);

	if (!attempt.enqueue)
	{
		if (fair_try(&attempt, &pttl))
			return true;
		stats_count(RLOCK_STAT_FAILED);
		return false;
	}

	/*
	 * From the first attempt on, this backend may be queued; if an ERROR
	 * ends the wait, fair_cleanup leaves the queue from the abort path.
	 */
	holds_on_abort(fair_cleanup);
	forget_queue();
	queued_key = MemoryContextStrdup(TopMemoryContext, ln->key);
	queued_holder = MemoryContextStrdup(TopMemoryContext, attempt.holder);

	if (fair_try(&attempt, &pttl))
	{
		forget_queue();
		return true;
	}
	wait_graph_next("fair", ln, 1);
	acquired = lock_wait(ln, psprintf("%s:%s",
									  lockname_derive(ln->key, "redisson_lock__channel"),
									  attempt.holder),
						 wait_ms, honour_lock_timeout, false, fair_try,
						 fair_give_up, &attempt);
	if (acquired)
		forget_queue();
	return acquired;
}

/* fair_acquire, its wait counted in the histogram of its kind */
bool
fair_acquire(const LockName *ln, RlockScope scope, int64 lease_ms,
			 int64 wait_ms, const char *owner, bool honour_lock_timeout)
{
	volatile bool result = false;

	LOCKS_TIMED_CALL(RLOCK_KIND_FAIR, result,
					 fair_acquire_untimed(ln, scope, lease_ms, wait_ms, owner,
										  honour_lock_timeout));
	return result;
}
