/*-------------------------------------------------------------------------
 *
 * lock_multi.c
 *	  The multi-lock (Redisson RedissonMultiLock): a set of exclusive locks
 *	  of lock_exclusive.c, held all or none.
 *
 * Each member is an ordinary exclusive lock: same keys, same scripts,
 * renewed by the watchdog and shown by rlock_locks one by one, excluded by
 * a Redisson client that holds any of them.  What is particular is the
 * attempt: every member's acquire script goes out at once, in one round
 * trip per Redis node, and unless every member was granted, those that
 * were are given back before the attempt returns (holds_set.c).  Redisson
 * takes the members one after another and gives back on failure; rlock
 * asks once.
 *
 * A blocked multi-lock holds nothing of its set while it sleeps, so sessions
 * asking for overlapping sets in any order never deadlock.  It listens on
 * the channel of a member it missed (lock_wait.c), the one the last
 * attempt missed first, and tries the whole set again on its release.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "holds/holds.h"
#include "locks/locks.h"
#include "locks/locks_int.h"
#include "base/base.h"

/* What the attempts of one multi-lock acquisition share. */
typedef struct MultiAttempt
{
	const LockName *lns;
	int			n;
	HoldRequest req;
	const char *holder;
	RedisCmd   *cmds;			/* every name's acquire script, built once */
	AcquireResult *res;
	MemoryContext attempt_cxt;	/* what one attempt allocates */
	int			missed;			/* the member whose channel is listened on */
	bool		waiting;		/* lock_wait listens: moving it is up to us */
} MultiAttempt;

static char *
channel_of(const LockName *ln)
{
	return lockname_derive(ln->key, "redisson_lock__channel");
}

/*
 * One attempt at the whole set.  When it fails, *pttl is the remaining
 * lease of the member the wait listens on, and the wait moves to the
 * member missed first when that is another one.
 */
static bool
multi_try(void *arg, int64 *pttl)
{
	MultiAttempt *a = arg;
	int			missed = -1;
	MemoryContext oldcxt;
	bool		acquired;

	/* a long wait makes many attempts: each one's memory goes with the next */
	MemoryContextReset(a->attempt_cxt);
	oldcxt = MemoryContextSwitchTo(a->attempt_cxt);
	acquired = holds_run_acquire_set(a->lns, a->n, RLOCK_KIND_EXCLUSIVE,
									 &a->req, a->cmds, a->res);
	MemoryContextSwitchTo(oldcxt);
	if (acquired)
		return true;

	for (int i = 0; i < a->n; i++)
	{
		if (a->res[i].status > 1)
			exclusive_refused(&a->lns[i], &a->res[i]);
		if (a->res[i].status == 0 && missed < 0)
			missed = i;
	}
	if (missed < 0)
		missed = 0;				/* (every refusal raised an ERROR) */
	if (a->waiting && missed != a->missed)
		lock_wait_retarget(NULL, channel_of(&a->lns[missed]));
	a->missed = missed;
	*pttl = a->res[missed].status == 0 ? a->res[missed].value : -1;
	return false;
}

static bool
multi_acquire_untimed(const LockName *lns, int n, RlockScope scope, int64 lease_ms,
					  int64 wait_ms, bool honour_lock_timeout)
{
	MultiAttempt a;
	int64		pttl;
	LockName   *waited;
	int			nwaited = 0;

	a.holder = holds_prepare_set(lns, n, RLOCK_KIND_EXCLUSIVE, scope,
								 lease_ms, &a.req);
	a.lns = lns;
	a.n = n;
	a.cmds = palloc(n * sizeof(RedisCmd));
	for (int i = 0; i < n; i++)
		(void) exclusive_build_acquire(&a.cmds[i], &lns[i], a.req.lease_ms,
									   a.holder, false, false);
	a.res = palloc(n * sizeof(AcquireResult));
	a.attempt_cxt = AllocSetContextCreate(CurrentMemoryContext,
										  "rlock multi-lock attempt",
										  ALLOCSET_DEFAULT_SIZES);
	a.missed = -1;
	a.waiting = false;
	if (multi_try(&a, &pttl))
		return true;
	if (wait_ms == 0)
	{
		stats_count(RLOCK_STAT_FAILED);
		return false;
	}
	a.waiting = true;
	/* the wait graph knows the member missed first, then the others */
	waited = palloc(Min(n, WAIT_MAX_KEYS) * sizeof(LockName));
	waited[nwaited++] = lns[a.missed];
	for (int i = 0; i < n && nwaited < WAIT_MAX_KEYS; i++)
		if (i != a.missed)
			waited[nwaited++] = lns[i];
	wait_graph_next("multi", waited, nwaited);
	return lock_wait(&lns[a.missed], channel_of(&lns[a.missed]), wait_ms,
					 honour_lock_timeout, false, multi_try, NULL, &a);
}

bool
multi_release(const LockName *lns, int n)
{
	return holds_release_set(lns, n, RLOCK_KIND_EXCLUSIVE);
}

/* multi_acquire, its wait counted in the histogram of its kind */
bool
multi_acquire(const LockName *lns, int n, RlockScope scope, int64 lease_ms,
			  int64 wait_ms, bool honour_lock_timeout)
{
	volatile bool result = false;

	LOCKS_TIMED_CALL(RLOCK_HIST_MULTI, result,
					 multi_acquire_untimed(lns, n, scope, lease_ms, wait_ms,
										   honour_lock_timeout));
	return result;
}
