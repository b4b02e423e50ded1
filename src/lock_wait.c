/*-------------------------------------------------------------------------
 *
 * lock_wait.c
 *	  How a blocked acquisition waits, for every lock kind: subscribed to
 *	  the lock's channel, woken by its release messages, and never sleeping
 *	  longer than the holder's remaining lease.
 *
 * The waiter subscribes before its next attempt, so that no release
 * between an attempt and the subscription goes unseen.  It then alternates
 * attempts (the lock kind's own script, through try_fn) and sleeps that
 * end on a message, on the holder's lease running out (a holder that died
 * without releasing is noticed when its key expires) or at the deadline.
 * The wait honours cancel and statement_timeout (through connection.c's
 * wait primitive), and lock_timeout when asked, as a blocking lock
 * acquisition does; it shows in pg_stat_activity as an Extension wait and
 * in the error context as "waiting for rlock lock".  rlock_stats counts its
 * time and outcome.  A wait an ERROR ends does no Redis I/O on its way
 * out: leaving the channel is left to holds_xact.c's abort path.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "connection.h"
#include "holds.h"
#include "lock_wait.h"
#include "stats.h"
#include "waitqueue.h"

/* Longest single sleep of a waiter between two attempts, in ms. */
#define WAIT_RECHECK_MS		5000

/* This backend is subscribed to a waiter's channel it has not left yet. */
static bool channel_pending = false;

/*
 * Leave the channel (without waiting for Redis's answer); also registered
 * with holds_on_abort for waits an ERROR ended.
 */
static void
leave_channel(void)
{
	if (!channel_pending)
		return;
	channel_pending = false;
	rconn_unsubscribe_nowait(rconn_backend_subscriber());
}

static void
waiting_context(void *arg)
{
	errcontext("waiting for rlock lock \"%s\"", (const char *) arg);
}

bool
lock_wait(const LockName *ln, const char *channel, int64 wait_ms,
		  bool honour_lock_timeout, bool shared, LockTryFn try_fn,
		  LockGiveUpFn give_up_fn, void *arg)
{
	RedisConn  *sub = rconn_backend_subscriber();
	TimestampTz start = GetCurrentTimestamp();
	TimestampTz deadline;
	ErrorContextCallback errcb;
	volatile bool armed = false;
	bool		acquired = false;
	bool		attempt_now = true;
	TimestampTz until = 0;

	deadline = (wait_ms < 0) ? DT_NOEND :
		TimestampTzPlusMilliseconds(start, wait_ms);

	errcb.callback = waiting_context;
	errcb.arg = (void *) ln->name;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;

	PG_TRY();
	{
		if (honour_lock_timeout && LockTimeout > 0)
		{
			enable_timeout_after(LOCK_TIMEOUT, LockTimeout);
			armed = true;
		}

		holds_on_abort(leave_channel);
		channel_pending = true;
		rconn_subscribe(sub, channel, ln->name, start);
		waitqueue_join(channel);
		for (;;)
		{
			int64		pttl = -1;
			TimestampTz now;
			int64		sleep_ms;
			int			rc;

			if (attempt_now)
			{
				if (try_fn(arg, &pttl))
				{
					acquired = true;
					break;
				}
				now = GetCurrentTimestamp();
				if (now >= deadline)
					break;

				/* sleep until a release message, or the lease runs out */
				sleep_ms = (pttl >= 0) ? Min(pttl + 1, WAIT_RECHECK_MS)
					: WAIT_RECHECK_MS;
				until = TimestampTzPlusMilliseconds(now, sleep_ms);
				if (until > deadline)
					until = deadline;
			}

			rc = rconn_wait_message(sub, until);
			if (rc < 0)
			{
				/* the connection broke: a failover is ridden out */
				rconn_subscribe(sub, channel, ln->name, deadline);
				attempt_now = true;
			}
			else if (rc == 0)
				attempt_now = true;	/* the lease ran out, or time to look */
			else
				attempt_now = waitqueue_is_first(); /* a release, or our turn */
		}
	}
	PG_CATCH();
	{
		/*
		 * No Redis I/O here: leaving the channel (and, for a fair waiter,
		 * its queue) is left to the abort path (leave_channel, and the
		 * kind's own clean-up).
		 */
		if (armed)
			disable_timeout(LOCK_TIMEOUT, false);
		waitqueue_leave(true);
		error_context_stack = errcb.previous;
		stats_add_elapsed(RLOCK_STAT_WAIT_US, start);
		stats_count(RLOCK_STAT_FAILED);
		PG_RE_THROW();
	}
	PG_END_TRY();

	if (armed)
		disable_timeout(LOCK_TIMEOUT, false);
	leave_channel();
	/* pass the turn on unless we took the lock for ourselves */
	waitqueue_leave(!acquired || shared);
	if (!acquired && give_up_fn != NULL)
		give_up_fn(arg);
	error_context_stack = errcb.previous;
	stats_add_elapsed(RLOCK_STAT_WAIT_US, start);
	stats_count(acquired ? RLOCK_STAT_CONTENDED : RLOCK_STAT_FAILED);

	return acquired;
}
