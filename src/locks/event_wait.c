/*-------------------------------------------------------------------------
 *
 * event_wait.c
 *	  The wait for an event rather than a lock (event_wait: a count-down
 *	  latch reaching zero).
 *
 * It uses lock_wait.c's subscription, polling and sleeps, but every
 * waiter of this server wakes on each message (there is nothing to take
 * turns for), and the message's text goes to the check, which may decide
 * without a round trip.  Each round allocates in a context reset at the
 * next, so a long wait does not grow.
 *
 * An outage of Redis (a restart, a failover, a dropped connection) is
 * ridden out until the wait's end, as lock_wait.c's waits do
 * (wait_outage.c).
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "redis/redis.h"
#include "holds/holds.h"
#include "locks/locks.h"
#include "locks/locks_int.h"
#include "base/base.h"

/*
 * Subscribe, then alternate checks and sleeps until a check finds the
 * event (true) or the deadline passes (false).
 */
static bool
event_loop(RedisConn *sub, const LockName *ln, const char *channel,
		   TimestampTz start, TimestampTz deadline, EventCheckFn check_fn,
		   void *arg)
{
	const char *message = NULL;
	bool		look = true;
	bool		happened = false;
	bool		polling;		/* the subscription was refused */
	int			poll_ms = WAIT_POLL_MIN_MS;
	MemoryContext outer = CurrentMemoryContext;
	MemoryContext iteration;

	/* what a round allocates goes with it (as in wait_loop) */
	iteration = AllocSetContextCreate(outer, "rlock wait round",
									  ALLOCSET_SMALL_SIZES);
	polling = !lock_wait_listen(sub, channel, ln->name, start);
	for (;;)
	{
		TimestampTz now;
		TimestampTz until;
		int			rc;
		RlockWaitEvent prev_event;

		MemoryContextSwitchTo(iteration);
		wait_graph_tick();		/* made known (a latch's never checks) */
		if (look && check_fn(arg, message))
		{
			happened = true;
			wait_outage_answered(); /* (an outage ridden out) */
			break;
		}
		if (look)
			wait_outage_answered();
		now = GetCurrentTimestamp();
		if (now >= deadline)
			break;
		until = TimestampTzPlusMilliseconds(now, polling ?
											lock_wait_poll_sleep(&poll_ms, -1) :
											WAIT_RECHECK_MS);
		if (until > deadline)
			until = deadline;

		/* (the message of the round before was checked: it may go) */
		MemoryContextSwitchTo(outer);
		MemoryContextReset(iteration);
		MemoryContextSwitchTo(iteration);
		if (wait_graph_due() < until)
			until = wait_graph_due();
		/* the sleep shows as a latch's wait (RlockLatch), round trips not */
		prev_event = rlock_wait_event_set(RLOCK_WAIT_LATCH);
		rc = polling ? lock_wait_turn(until) : route_wait_message(sub, until);
		rlock_wait_event_set(prev_event);
		message = NULL;
		look = true;
		if (polling)
			continue;			/* look each time */
		if (rc < 0)
			polling = !route_subscribe(sub, channel, ln->name, deadline);
		else if (rc == 1)
			message = pstrdup(route_last_message(sub));
		else if (rc == 2)
			look = false;		/* the process latch, for someone else */
	}
	MemoryContextSwitchTo(outer);
	MemoryContextDelete(iteration);
	return happened;
}

bool
event_wait(const LockName *ln, const char *what, const char *channel,
		   int64 wait_ms, bool honour_lock_timeout, EventCheckFn check_fn,
		   void *arg)
{
	RedisConn  *sub = route_backend_subscriber();
	TimestampTz start = GetCurrentTimestamp();
	TimestampTz deadline;
	TimestampTz end;
	MemoryContext round_cxt;
	ErrorContextCallback errcb;
	volatile bool armed = false;
	volatile bool happened = false;
	char	   *context = psprintf("%s \"%s\"", what, ln->name);
	MemoryContext oldcxt = CurrentMemoryContext;
	RlockWaitEvent entry_event = rlock_wait_event_current;

	deadline = (wait_ms < 0) ? DT_NOEND :
		TimestampTzPlusMilliseconds(start, wait_ms);

	errcb.callback = lock_wait_context;
	errcb.arg = context;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;

	/* an outage is ridden out until the wait's end (wait_outage.c) */
	end = deadline;
	if (honour_lock_timeout && LockTimeout > 0)
		end = Min(end, TimestampTzPlusMilliseconds(start, LockTimeout));
	wait_outage_begin(context, ln->key);
	wait_graph_next("latch", ln, 1);
	wait_graph_begin(ln, false);
	round_cxt = AllocSetContextCreate(oldcxt, "rlock wait outage round",
									  ALLOCSET_SMALL_SIZES);
	for (;;)
	{
		volatile bool ended = false;
		WaitOutageAction action;

		PG_TRY();
		{
			if (honour_lock_timeout && LockTimeout > 0 && !armed)
			{
				enable_timeout_after(LOCK_TIMEOUT, LockTimeout);
				armed = true;
			}
			MemoryContextReset(round_cxt);
			MemoryContextSwitchTo(round_cxt);
			if (wait_outage_ongoing())
			{
				/* resume after a pause: subscribe again, look again */
				lock_wait_leave();
				wait_outage_pause(end);
			}
			happened = event_loop(sub, ln, channel, start, deadline,
								  check_fn, arg);
			MemoryContextSwitchTo(oldcxt);
			ended = true;
		}
		PG_CATCH();
		{
			/* no Redis I/O here: the abort path leaves the channel */
			MemoryContextSwitchTo(oldcxt);
			rlock_wait_event_set(entry_event);	/* an ERROR left a sleep */
			action = wait_outage_catch(end);
			if (action != WAIT_OUTAGE_RIDE)
			{
				wait_graph_abandon();
				if (armed)
					disable_timeout(LOCK_TIMEOUT, false);
				if (action == WAIT_OUTAGE_UNREACHABLE)
					wait_outage_fail(); /* (in the wait's error context) */
				error_context_stack = errcb.previous;
				wait_outage_end();
				PG_RE_THROW();
			}
		}
		PG_END_TRY();
		if (ended)
			break;
	}
	MemoryContextDelete(round_cxt);
	wait_outage_end();
	wait_graph_end();

	if (armed)
		disable_timeout(LOCK_TIMEOUT, false);
	lock_wait_leave();
	error_context_stack = errcb.previous;
	return happened;
}
