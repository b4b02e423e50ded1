/*-------------------------------------------------------------------------
 *
 * connection_retry.c
 *	  A blip ridden out: one node's round trip (rconn_run) and connect
 *	  (rconn_ready) retried, with backoff, while Redis refuses or resets
 *	  the connection, is still loading its data, or (Sentinel) names no
 *	  master, for up to rlock.retry_timeout (SPEC 6).
 *
 * Why here: every call of a backend that does not wait for a lock comes
 * through these two (route.c), so a one-second Redis restart is ridden out
 * once for all of them, as Redisson's retry attempts do.  What is retried
 * is only what cannot apply twice: a command Redis never saw (the connect
 * failed, or it answered LOADING), or, when the connection broke after the
 * commands went out, commands that are all resendable (rcmd_resendable: a
 * script marked "once", an acquire, is not; its caller settles a lost
 * reply itself).  A round trip that timed out is not retried: a slow Redis
 * is not a refused one, and rlock.command_timeout is its bound.
 *
 * Never retried: inside COMMIT, ROLLBACK, error clean-up and exit
 * (rconn_uninterruptible: their round trips stay bounded), and in rlock's
 * background worker (its renewals have their own schedule).  The pause
 * between attempts (50 ms doubling to 500 ms) is a WaitLatch, so cancel,
 * statement_timeout and termination are honoured; the retries end at
 * rlock.retry_timeout after the first failure or before statement_timeout
 * fires, whichever is first, and the call then fails with the last
 * failure's one ERROR.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "storage/latch.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "redis/redis.h"
#include "redis/redis_int.h"
#include "base/base.h"

#define RETRY_FIRST_PAUSE_MS	50
#define RETRY_MAX_PAUSE_MS		500

/* a wait rides outages out on its own budget (rconn_retry_suspend) */
static bool retry_suspended = false;

bool
rconn_retry_suspend(bool suspend)
{
	bool		was = retry_suspended;

	retry_suspended = suspend;
	return was;
}

/* Is this process one whose calls ride out a blip? */
static bool
may_retry(void)
{
	if (rlock_retry_timeout_ms <= 0 || retry_suspended ||
		rconn_uninterruptible())
		return false;
	/* rlock's own worker renews on its schedule: it does not linger */
	if (MyBgworkerEntry != NULL &&
		strcmp(MyBgworkerEntry->bgw_library_name, "rlock") == 0)
		return false;
	return true;
}

/* A failure that says Redis is briefly away, not that it is slow or wrong. */
static bool
failure_is_blip(RedisConn *conn, bool sent, const RedisCmd *cmds, int ncmds)
{
	switch (conn->failure)
	{
		case RF_CONNECT:
		case RF_NO_MASTER:
		case RF_NOT_MASTER:
			return true;
		case RF_LOST:
			/* broke after the commands went out: only what cannot apply twice */
			return !sent || rcmd_all_resendable(cmds, ncmds);
		default:
			return false;
	}
}

static bool
reply_is_loading(const RReply *r)
{
	return r != NULL && r->type == RREPLY_ERROR && r->len >= 7 &&
		strncmp(r->str, "LOADING", 7) == 0;
}

/*
 * Did some command get LOADING (it did not run), and may every command
 * that did not be sent again?
 */
static bool
replies_loading(RReply **replies, const RedisCmd *cmds, int ncmds)
{
	bool		loading = false;

	for (int i = 0; i < ncmds; i++)
	{
		if (reply_is_loading(replies[i]))
			loading = true;
		else if (!rcmd_resendable(&cmds[i]))
			return false;
	}
	return loading;
}

/*
 * When retries end: rlock.retry_timeout after the first failure, and
 * before statement_timeout fires (its ERROR would hide why).
 */
static TimestampTz
retry_deadline(TimestampTz first)
{
	TimestampTz end = TimestampTzPlusMilliseconds(first, rlock_retry_timeout_ms);

	if (get_timeout_active(STATEMENT_TIMEOUT))
	{
		TimestampTz st = get_timeout_finish_time(STATEMENT_TIMEOUT);

		if (st < end)
			end = st;
	}
	return end;
}

/*
 * Pause before the next attempt (pause_ms, doubled for the one after),
 * unless the deadline comes first: false then, nothing waited.
 */
static bool
retry_pause(TimestampTz deadline, int *pause_ms)
{
	TimestampTz now = GetCurrentTimestamp();
	long		left_ms;
	int			ms;

	if (now >= deadline)
		return false;
	left_ms = (long) ((deadline - now) / 1000);
	ms = (int) Min((long) *pause_ms, left_ms);
	if (ms > 0)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 ms, RLOCK_WAIT_EVENT);
		ResetLatch(MyLatch);
	}
	CHECK_FOR_INTERRUPTS();
	*pause_ms = Min(*pause_ms * 2, RETRY_MAX_PAUSE_MS);
	return GetCurrentTimestamp() < deadline;
}

/*
 * Run ncmds commands pipelined on one node's connection, riding out a blip
 * (see above).  On failure reports at elevel (returning false when elevel
 * < ERROR): one message, the last attempt's.
 */
bool
rconn_run(RedisConn *conn, RedisCmd *cmds, int ncmds,
		  RReply ***replies, int elevel, const char *what)
{
	TimestampTz deadline = 0;
	int			pause_ms = RETRY_FIRST_PAUSE_MS;

	for (;;)
	{
		RconnOp		op = {conn, cmds, ncmds, false, NULL};
		bool		blip;

		rconn_run_parallel(&op, 1);
		if (op.ok)
		{
			if (!replies_loading(op.replies, cmds, ncmds) || !may_retry())
			{
				*replies = op.replies;
				return true;
			}
			blip = true;
		}
		else
			blip = may_retry() &&
				failure_is_blip(conn, op.sent, cmds, ncmds);
		if (blip)
		{
			if (deadline == 0)
				deadline = retry_deadline(GetCurrentTimestamp());
			if (retry_pause(deadline, &pause_ms))
				continue;
		}
		if (op.ok)
		{
			/* still loading at the end: its error reply is the answer */
			*replies = op.replies;
			return true;
		}
		rconn_report(conn, elevel, what);
		return false;
	}
}

/*
 * Connect now if not connected (ERROR on failure, after riding out a
 * blip), so that a caller can tell "Redis never saw the command" apart
 * from "the command may have run".
 */
void
rconn_ready(RedisConn *conn, const char *what)
{
	TimestampTz deadline = 0;
	int			pause_ms = RETRY_FIRST_PAUSE_MS;

	while (!rconn_ensure(conn))
	{
		if (!may_retry() || !failure_is_blip(conn, false, NULL, 0))
			rconn_report(conn, ERROR, what);
		if (deadline == 0)
			deadline = retry_deadline(GetCurrentTimestamp());
		if (!retry_pause(deadline, &pause_ms))
			rconn_report(conn, ERROR, what);
	}
}
