/*-------------------------------------------------------------------------
 *
 * lock_redlock.c
 *	  The Redlock (Redisson RedissonRedLock): the exclusive lock of
 *	  lock_exclusive.c, same keys and scripts, on each of the N independent
 *	  masters of rlock.redlock_urls, held while a majority (N/2+1) of them
 *	  hold it.
 *
 * Acquisition asks every master at once (redlock.c) and succeeds when a
 * majority granted it within its validity: the lease, less the time the
 * round trip took, less a drift of 1 % of the lease plus 2 ms for the
 * masters' clocks.  Otherwise what some masters granted is given back on
 * every master before the attempt returns: the entry was uncertain while
 * the scripts were in flight, and the table's settle lowers this holder's
 * count to what it held before, on all of them (holds_batch.c calls this
 * kind's settle), which is also what an interrupted attempt gets at abort.
 *
 * Releases lower the count to the table's on every master (the reconcile
 * script: idempotent, so a master that missed an earlier release is put
 * right by the next one), and a Redlock that fewer than a majority still
 * had is reported lost.  A master that does not answer keeps the lock
 * until its lease runs out, which the others do not wait for.
 *
 * The watchdog renews a Redlock on every master and counts: held while a
 * majority holds it, lost when the masters that answered leave no
 * majority possible, and otherwise not known, for the fail-closed rule to
 * judge (registry.c).  The check before COMMIT asks the same way.  Those,
 * and the check of a session's Redlocks after the setting changed, are in
 * lock_redlock_keep.c.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "holds/holds.h"
#include "locks/locks.h"
#include "locks/locks_int.h"
#include "route/route.h"
#include "base/base.h"

/*
 * An attempt so many of whose masters refused the connection (refused,
 * credentials, database index, TLS; not a mere timeout) that no majority
 * can grant is tried again after a pause that doubles from the first to
 * the last, until the acquisition's wait ends: then it is an ERROR saying
 * why, never a silent false, never a reconnection loop.
 */
#define REDLOCK_BACKOFF_FIRST_MS	100
#define REDLOCK_BACKOFF_MAX_MS		2000

/* What the attempts of one acquisition share. */
typedef struct RedlockAttempt
{
	const LockName *ln;
	HoldRequest req;
	RedisConn  *conns[REDLOCK_MAX_MASTERS];
	int			n;
	int			listening;		/* the master a waiter listens on (-1) */
	bool		waiting;
	TimestampTz deadline;		/* when a failing majority is an ERROR */
	int			backoff_ms;		/* the next pause after such a failure */
	bool		again;			/* the attempt paused: try again at once */
	MemoryContext cxt;			/* the attempt's, reset by the next one */
} RedlockAttempt;

/* Why master m's round trip failed, as the ERROR it would raise. */
static ErrorData *
master_failure(RedisConn *conn, const char *name)
{
	MemoryContext cxt = CurrentMemoryContext;
	ErrorData  *volatile edata = NULL;

	PG_TRY();
	{
		rconn_report(conn, ERROR, name);
	}
	PG_CATCH();
	{
		/* no Redis I/O here: only the error is kept */
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
	}
	PG_END_TRY();
	return edata;
}

/*
 * A majority of the masters failed: ERROR with the SQLSTATE most of them
 * failed with, and each one's cause in the DETAIL.
 */
static void
majority_failed(RedlockAttempt *a, ErrorData **why, const bool *silent)
{
	StringInfoData detail;
	int			nfailed = 0;
	int			best = -1;
	int			best_count = 0;
	const char *hint = NULL;	/* the failed masters' own, if all alike */
	bool		alike = true;

	initStringInfo(&detail);
	for (int m = 0; m < a->n; m++)
	{
		int			count = 0;

		if (why[m] == NULL)
			continue;
		nfailed++;
		for (int k = 0; k < a->n; k++)
			if (why[k] != NULL && silent[k] == silent[m] &&
				why[k]->sqlerrcode == why[m]->sqlerrcode)
				count++;
		if (why[m]->hint == NULL ||
			(hint != NULL && strcmp(hint, why[m]->hint) != 0))
			alike = false;
		hint = why[m]->hint;
		/* a refused connection says more than a silence */
		if (!silent[m])
			count += a->n;
		if (count > best_count)
		{
			best = m;
			best_count = count;
		}
		appendStringInfo(&detail, "%smaster %d (%s): %s%s%s",
						 detail.len > 0 ? "; " : "", m + 1,
						 rconn_address(a->conns[m]), why[m]->message,
						 why[m]->detail ? " " : "",
						 why[m]->detail ? why[m]->detail : "");
	}
	ereport(ERROR,
			(errcode(best >= 0 ? why[best]->sqlerrcode :
					 ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
			 errmsg("could not acquire Redlock \"%s\": %d of its %d masters failed, no majority can be reached",
					a->ln->name, nfailed, a->n),
			 errdetail("%s.", detail.data),
			 /* the masters' own hint when they all gave the same one */
			 (alike && hint != NULL) ? errhint("%s", hint) :
			 errhint("Check the masters of rlock.redlock_urls: their addresses, passwords and database indexes, and that they run.")));
}

static char *
channel_of(const LockName *ln)
{
	return lockname_derive(ln->key, "redisson_lock__channel");
}

/*
 * An attempt that failed: lower this holder's count to the table's on
 * every master where the script may have run (those that answered, and
 * those that failed after it was sent), all at once.  What a master that
 * does not answer keeps expires with its lease.
 */
static void
give_back(RedlockAttempt *a, HeldLock *h, RconnOp *ops)
{
	RedisConn  *conns[REDLOCK_MAX_MASTERS];
	int			n = 0;
	RedisCmd	cmd;

	for (int m = 0; m < a->n; m++)
	{
		if (ops[m].ok || ops[m].late ||
			!rconn_failed_before_sending(a->conns[m]))
			conns[n++] = a->conns[m];
	}
	if (n == 0)
		return;
	exclusive_build_reconcile(&cmd, RLOCK_KIND_EXCLUSIVE, a->ln->key,
							  a->req.holder, holds_total(h));
	(void) redlock_run(conns, n, &cmd, 1, DT_NOEND);
}

/* Does a master's answer grant the lock (rconn_run_quorum's counting)? */
static bool
grants(const RconnOp *op, void *arg)
{
	AcquireResult res;

	return op->replies[0]->type != RREPLY_ERROR &&
		holds_parse_acquire(op->replies[0], &res) && res.status == 1;
}

/*
 * One attempt on every master, returning once a majority granted (the
 * others' answers are not waited for, see route.h).  When it fails, *pttl
 * is the remaining lease of the holder on the master the wait listens on,
 * one that refused; when a majority failed, it paused and sets a->again
 * (or, its wait over, ERRORs).
 */
static bool
redlock_attempt(RedlockAttempt *a, int64 *pttl)
{
	RedisCmd	cmd;
	HeldLock   *h;
	RconnOp    *ops;
	HoldRequest req;
	int			granted = 0;
	int			answered = 0;
	int			refuser = -1;
	int64		refuser_pttl = -1;
	RedisConn  *refusers[REDLOCK_MAX_MASTERS];
	int			nrefusers = 0;
	AcquireResult other_kind = {0};
	char	   *error = NULL;
	int			error_master = -1;
	int64		elapsed_ms;
	int64		drift_ms = REDLOCK_DRIFT_MS(a->req.lease_ms);
	bool		ok;
	ErrorData  *why[REDLOCK_MAX_MASTERS];
	bool		silent[REDLOCK_MAX_MASTERS];
	int			nsilent = 0;
	int			dup_a;
	int			dup_b;
	const char *latch;

	/*
	 * With a request id: a master whose connection broke before it
	 * answered is asked again once (connection_exchange.c), and counts the
	 * hold once however often it ran the script.
	 */
	latch = exclusive_build_acquire(&cmd, a->ln, a->req.lease_ms,
									a->req.holder, false, true);
	h = holds_begin_elsewhere(a->ln, RLOCK_KIND_REDLOCK, &a->req);
	ops = redlock_run_majority(a->conns, a->n, &cmd, 1, grants, NULL,
							   &dup_a, &dup_b);
	/* (in front of each master's next round trip; else it expires) */
	for (int m = 0; m < a->n; m++)
		route_defer_del(a->conns[m], latch);
	elapsed_ms = (GetCurrentTimestamp() - a->req.sent_at) / 1000;

	/* copy what matters out: giving holds back uses the connections */
	for (int m = 0; m < a->n; m++)
	{
		AcquireResult res;
		RReply	   *r;

		why[m] = NULL;
		silent[m] = false;
		/* not waited for, or set aside (route.h); silent: counted below */
		if (ops[m].late && !rconn_silent(a->conns[m]))
			continue;
		if (!ops[m].ok)
		{
			/* before the give-back, which may reconnect it */
			silent[m] = redlock_failed_silently(a->conns[m]);
			if (silent[m])
				nsilent++;
			why[m] = master_failure(a->conns[m], a->ln->name);
			continue;
		}
		answered++;
		r = ops[m].replies[0];
		if (r->type == RREPLY_ERROR)
		{
			if (error == NULL)
			{
				error = pnstrdup(r->str, r->len);
				error_master = m;
			}
			continue;
		}
		if (!holds_parse_acquire(r, &res))
		{
			if (error == NULL)
				error = psprintf("unexpected reply from Redis at %s",
								 rconn_address(a->conns[m]));
			continue;
		}
		if (res.status == 1)
			granted++;
		else if (res.status == 0)
		{
			refusers[nrefusers++] = a->conns[m];
			if (refuser < 0 || m == a->listening)
			{
				refuser = m;
				refuser_pttl = res.value;
			}
		}
		else if (other_kind.status == 0)
			other_kind = res;
	}

	/* a majority, and time left of the lease once the drift is counted */
	ok = granted >= redlock_quorum(a->n) &&
		a->req.lease_ms - elapsed_ms - drift_ms > 0 && dup_a < 0;
	if (!ok)
		give_back(a, h, ops);
	/* the masters' clocks may drift: it may expire that much sooner */
	req = a->req;
	req.sent_at -= drift_ms * 1000;
	holds_end_elsewhere(h, &req, ok, a->ln->name);
	if (dup_a >= 0)
		redlock_refuse_masters(a->conns, dup_a, dup_b, a->ln->name);
	if (ok)
	{
		/*
		 * A waiter woken by the first master's release message may have
		 * asked the others before the release reached them: ask those that
		 * refused once more, so that the lock does not rest on a bare
		 * majority only because of that race.
		 */
		if (a->waiting && nrefusers > 0)
			(void) redlock_run(refusers, nrefusers, &cmd, 1, DT_NOEND);
		return true;
	}

	if (other_kind.status > 1)
		exclusive_refused(a->ln, &other_kind);
	if (error != NULL)
	{
		RReply		e = {0};

		e.type = RREPLY_ERROR;
		e.str = error;
		e.len = strlen(error);
		/* naming the master's setting, not rlock.redis_url */
		rconn_reply_error_of(error_master >= 0 ?
							 rconn_node(a->conns[error_master]) : NULL,
							 &e, ERROR, a->ln->name);
	}
	if (answered == 0 && nsilent == a->n)
		majority_failed(a, why, silent);	/* none answered at all */
	if (answered + nsilent < redlock_quorum(a->n) || answered == 0)
	{
		/*
		 * So many masters refused the connection (not merely slow to
		 * answer) that no majority can grant, or none answered (no master
		 * to listen on): pause and try again, or say why.
		 */
		long		pause_ms;
		TimestampTz now = GetCurrentTimestamp();

		if (now >= a->deadline)
			majority_failed(a, why, silent);
		pause_ms = a->backoff_ms;
		if (a->deadline != DT_NOEND)
			pause_ms = Min(pause_ms, (a->deadline - now + 999) / 1000);
		a->backoff_ms = Min(a->backoff_ms * 2, REDLOCK_BACKOFF_MAX_MS);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 pause_ms, RLOCK_WAIT_EVENT);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		a->again = true;
		return false;
	}
	a->backoff_ms = REDLOCK_BACKOFF_FIRST_MS;

	/* listen where it is held, else on a master that answered */
	for (int m = 0; m < a->n && refuser < 0; m++)
		if (ops[m].ok)
			refuser = m;
	Assert(refuser >= 0);
	if (a->waiting && refuser != a->listening)
		lock_wait_retarget(redlock_subscriber(refuser), channel_of(a->ln));
	a->listening = refuser;
	*pttl = refuser_pttl;
	return false;
}

/* The attempt, again after each pause a failing majority asked for. */
static bool
redlock_try(void *arg, int64 *pttl)
{
	RedlockAttempt *a = arg;
	MemoryContext oldcxt;
	bool		ok;

	do
	{
		a->again = false;
		MemoryContextReset(a->cxt);
		oldcxt = MemoryContextSwitchTo(a->cxt);
		ok = redlock_attempt(a, pttl);
		MemoryContextSwitchTo(oldcxt);
	} while (!ok && a->again);
	return ok;
}

static bool
redlock_acquire_untimed(const LockName *ln, RlockScope scope, int64 lease_ms,
						int64 wait_ms, bool honour_lock_timeout)
{
	RedlockAttempt a;
	int64		pttl;
	bool		acquired = false;

	redlock_recheck_holds();
	a.n = redlock_masters(a.conns, ln->name);
	(void) holds_prepare_acquire(ln, RLOCK_KIND_REDLOCK, scope, lease_ms,
								 NULL, &a.req);
	a.ln = ln;
	a.listening = -1;
	a.waiting = false;
	a.backoff_ms = REDLOCK_BACKOFF_FIRST_MS;
	a.cxt = AllocSetContextCreate(CurrentMemoryContext, "rlock Redlock attempt",
								  ALLOCSET_SMALL_SIZES);
	a.deadline = wait_ms < 0 ? DT_NOEND :
		TimestampTzPlusMilliseconds(GetCurrentTimestamp(), wait_ms);
	if (honour_lock_timeout && LockTimeout > 0)
		a.deadline = Min(a.deadline,
						 TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													 LockTimeout));
	if (redlock_try(&a, &pttl))
		acquired = true;
	else if (wait_ms == 0)
		stats_count(RLOCK_STAT_FAILED);
	else
	{
		a.waiting = true;
		wait_graph_next("redlock", ln, 1);
		acquired = lock_wait_on(redlock_subscriber(a.listening), ln,
								channel_of(ln), wait_ms, honour_lock_timeout,
								false, redlock_try, NULL, &a);
	}
	MemoryContextDelete(a.cxt);
	return acquired;
}

bool
redlock_release(const LockName *ln)
{
	bool		held = holds_find(ln->key, RLOCK_KIND_REDLOCK) != NULL;

	redlock_recheck_holds();
	if (!held)
		redlock_require_configured(ln->name);
	else if (holds_find(ln->key, RLOCK_KIND_REDLOCK) == NULL)
		return false;			/* the new masters do not have it: said lost */
	return holds_release(ln, RLOCK_KIND_REDLOCK, NULL);
}

/* redlock_acquire, its wait counted in the histogram of its kind */
bool
redlock_acquire(const LockName *ln, RlockScope scope, int64 lease_ms,
				int64 wait_ms, bool honour_lock_timeout)
{
	volatile bool result = false;

	LOCKS_TIMED_CALL(RLOCK_KIND_REDLOCK, result,
					 redlock_acquire_untimed(ln, scope, lease_ms, wait_ms,
											 honour_lock_timeout));
	return result;
}
