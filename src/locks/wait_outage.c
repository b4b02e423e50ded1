/*-------------------------------------------------------------------------
 *
 * wait_outage.c
 *	  A wait rides through Redis outages (SPEC 6): a connection refused or
 *	  reset, a Redis still LOADING, a Sentinel with no master yet or a node
 *	  that is not the master any more, a demoted master's READONLY.  The
 *	  wait (lock_wait.c, event_wait.c) catches such an ERROR, this file
 *	  decides whether it may be ridden out, and the wait backs off and
 *	  resumes: reconnects, subscribes again and attempts again, until its
 *	  own end (its budget, lock_timeout; statement_timeout and cancel end it
 *	  as always).
 *
 * What is ridden out is an ERROR of class 08 (connection exception),
 * 57P03 (cannot connect now: LOADING, BUSY, MASTERDOWN) or 25006 (a
 * replica's READONLY), the SQLSTATEs rlock's own round trips give those
 * failures (connection_error.c), but for 08P01 (a reply that breaks the
 * protocol: a broken server, not an outage); nothing else is caught.  The
 * ERROR is flushed inside the wait's PG_CATCH, which does no Redis I/O:
 * the pause and what follows it run after the catch block.  An
 * acquisition undone for want of replica acknowledgements (08006 too) is
 * not an outage: Redis answered.  The pauses start at
 * OUTAGE_BACKOFF_MIN_MS and double up to OUTAGE_BACKOFF_MAX_MS, on the
 * process latch (cancel and the timeouts end them); the first of an
 * outage is told in the server log (LOG).  When the wait's end comes
 * while Redis is still unreachable, the wait fails with 08006 naming what
 * it waited for and since when Redis was unreachable, the last failure in
 * the DETAIL, rather than with a lock timeout.
 *
 * Only waits ride outages out: the call's first attempt, before it waits
 * (and a try without a wait), fails as before.
 *
 * Waits do not nest, so the outage of the current wait is this file's one
 * static state.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "holds/holds.h"
#include "locks/locks.h"
#include "locks/locks_int.h"
#include "redis/redis.h"
#include "base/base.h"

/* The current wait's outage. */
static struct
{
	char	   *what;			/* 'lock "x"', for messages */
	char	   *key;			/* its Redis key, for rlock_events */
	TimestampTz since;			/* when Redis stopped answering; 0: it
								 * answers */
	int			backoff_ms;		/* the next pause */
	bool		gave_up;		/* the ERROR raised is the wait's own end */
	char	   *detail;			/* the last failure, as reported */
}			outage;

/* The last failure's message (NULL: none). */
static void
set_detail(const char *message)
{
	if (outage.detail != NULL)
		pfree(outage.detail);
	outage.detail = message ?
		MemoryContextStrdup(TopMemoryContext, message) : NULL;
}

/* Start a wait: Redis is taken to answer until it fails. */
void
wait_outage_begin(const char *what, const char *key)
{
	/* (kept where an ERROR's clean-up does not reach) */
	if (outage.what != NULL)
		pfree(outage.what);
	outage.what = NULL;			/* (never freed twice, were a strdup to fail) */
	outage.what = MemoryContextStrdup(TopMemoryContext, what);
	if (outage.key != NULL)
		pfree(outage.key);
	outage.key = NULL;
	outage.key = MemoryContextStrdup(TopMemoryContext, key);
	set_detail(NULL);
	outage.since = 0;
	outage.backoff_ms = OUTAGE_BACKOFF_MIN_MS;
	outage.gave_up = false;
	/* the wait's own budget rides outages out, not rlock.retry_timeout */
	(void) rconn_retry_suspend(true);
}

/* End a wait (returned, or leaving with its ERROR): calls retry again. */
void
wait_outage_end(void)
{
	(void) rconn_retry_suspend(false);
}

/* A round trip of the wait was answered: an outage (if any) is over. */
void
wait_outage_answered(void)
{
	if (outage.since != 0)
		rlock_event(LOG, RLOCK_EVENT_OUTAGE_RIDDEN_OUT, NULL, outage.key,
					rlock_backend_holder(),
					"rlock: waiting for %s: Redis answers again after %lld ms, the wait goes on",
					outage.what ? outage.what : "a lock",
					(long long) ((GetCurrentTimestamp() - outage.since) / 1000));
	outage.since = 0;
	outage.backoff_ms = OUTAGE_BACKOFF_MIN_MS;
}

/* Is Redis unreachable now, as far as the current wait knows? */
bool
wait_outage_ongoing(void)
{
	return outage.since != 0;
}

/* An ERROR of a failure a wait may ride out. */
static bool
rides_out(int sqlerrcode)
{
	/* (a server that breaks the protocol is not an outage: 08P01) */
	if (sqlerrcode == ERRCODE_PROTOCOL_VIOLATION)
		return false;
	return ERRCODE_TO_CATEGORY(sqlerrcode) ==
		ERRCODE_TO_CATEGORY(ERRCODE_CONNECTION_EXCEPTION) ||
		sqlerrcode == ERRCODE_CANNOT_CONNECT_NOW ||
		sqlerrcode == ERRCODE_READ_ONLY_SQL_TRANSACTION;
}

/*
 * In a wait's PG_CATCH (in a memory context that is not ErrorContext; no
 * Redis I/O): what to do with the ERROR being handled.  end is when the
 * wait ends (its budget, or lock_timeout's).  WAIT_OUTAGE_RIDE: it was
 * flushed, the caller pauses (wait_outage_pause) and resumes.
 * WAIT_OUTAGE_UNREACHABLE: the wait ends during an outage; the caller
 * cleans up and calls wait_outage_fail.  WAIT_OUTAGE_RETHROW: not ours.
 */
WaitOutageAction
wait_outage_catch(TimestampTz end)
{
	ErrorData  *edata;
	bool		rides;
	bool		lock_timeout;

	if (outage.gave_up)
		return WAIT_OUTAGE_RETHROW;
	edata = CopyErrorData();

	/*
	 * (An acquisition too few replicas acknowledged is undone with 08006 by
	 * holds_acks_refused: Redis answered, the replicas lag; not an outage.)
	 */
	rides = rides_out(edata->sqlerrcode) &&
		!(edata->funcname != NULL &&
		  strcmp(edata->funcname, "holds_acks_refused") == 0);
	lock_timeout = (edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE &&
					outage.since != 0);
	if (!rides && !lock_timeout)
	{
		FreeErrorData(edata);
		return WAIT_OUTAGE_RETHROW;
	}
	if (rides)
	{
		if (outage.since == 0)
			outage.since = GetCurrentTimestamp();
		set_detail(edata->message);
	}
	FreeErrorData(edata);
	if (rides && GetCurrentTimestamp() < end)
	{
		FlushErrorState();
		return WAIT_OUTAGE_RIDE;
	}
	return WAIT_OUTAGE_UNREACHABLE;
}

/*
 * The wait ended while Redis could not be reached: fail with 08006 naming
 * what was waited for.  Called from the PG_CATCH that caught the last
 * failure (WAIT_OUTAGE_UNREACHABLE), or after a pause.
 */
void
wait_outage_fail(void)
{
	outage.gave_up = true;
	FlushErrorState();
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("gave up waiting for %s: Redis unreachable since %s",
					outage.what, timestamptz_to_str(outage.since)),
			 outage.detail != NULL ?
			 errdetail_internal("Last failure: %s", outage.detail) : 0,
			 errhint("Check that Redis is running and that rlock.redis_url points at it; a longer wait rides out a longer outage.")));
}

/*
 * After a ridden failure, outside any PG_CATCH: pause (interruptible),
 * then give back whatever the lost attempt may have left uncertain (its
 * round trip reconnects).  Fails (wait_outage_fail) when end comes first;
 * an ERROR of the reconnect goes to the wait's catch as any other.
 */
void
wait_outage_pause(TimestampTz end)
{
	TimestampTz until;
	TimestampTz now = GetCurrentTimestamp();

	/* the first pause of an outage says so in the server log, once */
	if (outage.backoff_ms == OUTAGE_BACKOFF_MIN_MS)
	{
		const char *msg;

		msg = rlock_event_record(RLOCK_EVENT_OUTAGE_WAIT, NULL, outage.key,
								 rlock_backend_holder(),
								 "rlock: waiting for %s through a Redis outage",
								 outage.what);
		ereport(LOG,
				(errmsg_internal("%s", msg),
				 outage.detail != NULL ?
				 errdetail_internal("%s", outage.detail) : 0));
	}
	until = TimestampTzPlusMilliseconds(now, outage.backoff_ms);
	if (until > end)
		until = end;
	outage.backoff_ms = Min(outage.backoff_ms * 2, OUTAGE_BACKOFF_MAX_MS);
	while (now < until)
	{
		long		secs;
		int			usecs;

		TimestampDifference(now, until, &secs, &usecs);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 secs * 1000 + (usecs + 999) / 1000, RLOCK_WAIT_EVENT);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		now = GetCurrentTimestamp();
	}
	if (now >= end)
		wait_outage_fail();
	/* an attempt whose reply was lost: Redis and the table agree again */
	holds_settle_entries();
}
