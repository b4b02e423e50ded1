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
 * The wait honours cancel and statement_timeout (through the connection
 * layer's one wait, connection_wait.c), and lock_timeout when asked, as a blocking lock
 * acquisition does; its sleeps show in pg_stat_activity as the wait event
 * RlockLock (RlockSemaphore for permits; 'Extension' before PostgreSQL
 * 17, base/wait_events.c), its round trips as RlockRedis, and it shows
 * in the error context as "waiting for rlock lock".  rlock_stats counts its
 * time and outcome.  A waiter whose subscription the server refuses (an
 * error reply to SUBSCRIBE: a WARNING says so) polls instead, its sleeps
 * growing from WAIT_POLL_MIN_MS to WAIT_POLL_MAX_MS, never past the
 * holder's lease or the deadline.  A wait an ERROR ends does no Redis I/O
 * on its way out: leaving the channel is left to holds_xact.c's abort
 * path.
 *
 * An outage of Redis (a restart, a failover, a dropped connection, a
 * demoted master) does not end the wait: wait_on catches the ERROR,
 * backs off and resumes (subscribes again, attempts again) until the
 * wait's own end, when it fails with 08006 (wait_outage.c).
 *
 * The wait for an event rather than a lock (a count-down latch reaching
 * zero) uses the same subscription and sleeps: event_wait.c.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/memutils.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "redis/redis.h"
#include "holds/holds.h"
#include "locks/locks.h"
#include "locks/locks_int.h"
#include "base/base.h"


/* This backend is subscribed to a waiter's channel it has not left yet. */
static bool channel_pending = false;
/* ... on this connection */
static RedisConn *waiting_sub = NULL;

/*
 * What the attempt just made says of the permits left (lock_wait_permits):
 * none left for the next waiter, or some left but too few for this one.
 */
static bool permits_none_left = false;
static bool permits_too_few = false;

/* Where the attempt just made asks the wait to move (lock_wait_retarget). */
static RedisConn *retarget_sub = NULL;
static char *retarget_channel = NULL;

/*
 * Leave the channel (without waiting for Redis's answer); also registered
 * with holds_on_abort for waits an ERROR ended.
 */
void
lock_wait_leave(void)
{
	if (!channel_pending)
		return;
	channel_pending = false;
	route_unsubscribe_nowait(waiting_sub);
}

/*
 * Called by an attempt that failed on another lock than the one waited
 * for (a multi-lock's member, a Redlock's master): the wait moves to that
 * channel on sub (NULL: the same connection) before the next sleep.
 */
void
lock_wait_retarget(RedisConn *sub, const char *channel)
{
	retarget_sub = sub;
	if (retarget_channel != NULL)
		pfree(retarget_channel);
	retarget_channel = MemoryContextStrdup(TopMemoryContext, channel);
}

/*
 * Called by an attempt on a semaphore's permits (LOCK_WAIT_PERMITS) with
 * the permits available after it: when it took its permits and none are
 * left, the next waiter of this server is not woken (a release wakes only
 * as many waiters as permits appeared); when it could not take what it
 * asks for although some are available, the next waiter (who may ask for
 * fewer) looks.
 */
void
lock_wait_permits(bool took, int64 available)
{
	permits_none_left = took && available <= 0;
	permits_too_few = !took && available > 0;
}

/* The error context of a wait: arg names what is waited for. */
void
lock_wait_context(void *arg)
{
	errcontext("waiting for rlock %s", (const char *) arg);
}

/*
 * Start listening on channel: subscribed on sub, with the abort path told
 * to leave it (a wait an ERROR ends does no Redis I/O on its way out).
 * False when the server refused the subscription: the waiter polls.
 */
bool
lock_wait_listen(RedisConn *sub, const char *channel, const char *name,
		  TimestampTz deadline)
{
	holds_on_abort(lock_wait_leave);
	channel_pending = true;
	waiting_sub = sub;
	return route_subscribe(sub, channel, name, deadline);
}

/* The next sleep of a polling waiter (WAIT_POLL_*), doubled for the next. */
int64
lock_wait_poll_sleep(int *poll_ms, int64 pttl)
{
	int64		ms = *poll_ms;

	*poll_ms = Min(*poll_ms * 2, WAIT_POLL_MAX_MS);
	return pttl >= 0 ? Min(pttl, ms) + 1 : ms;
}

/* The queue a wait takes its turn in: foreign, a Redlock master's waits. */
#define queue_name(sub, foreign, channel) \
	waitqueue_name((foreign) ? rconn_address(sub) : NULL, (channel))

/*
 * Sleep on the process latch alone until "until": a waiter that does not
 * listen for messages (waitqueue_place) waits for its turn, or to be
 * told to listen.  Returns 2 when the latch was set, 0 at "until", as
 * route_wait_message does.
 */
int
lock_wait_turn(TimestampTz until)
{
	long		secs;
	int			usecs;
	int			rc;

	TimestampDifference(GetCurrentTimestamp(), until, &secs, &usecs);
	rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
				   secs * 1000 + (usecs + 999) / 1000, RLOCK_WAIT_EVENT);
	if (rc & WL_LATCH_SET)
		ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
	return (rc & WL_LATCH_SET) ? 2 : 0;
}

/*
 * A queued waiter's place (LOCK_WAIT_QUEUED) decides how it waits: the
 * first few of this server on the channel are subscribed to it, the
 * first two of those listen for its messages, the others sleep on their
 * latch (waitqueue_place).  Move up to the
 * place the queue gives us now: 1 when we moved (the caller then looks
 * whether we are first), 0 when not, -1 when the subscription we had is
 * gone (as a broken connection), -2 when the server refused it.  A
 * subscription made here waits for
 * Redis's confirmation: every release published after it reaches us, and
 * one published before found another waiter ahead listening, or finds us
 * first (we then look).
 */
static int
take_place(RedisConn *sub, const char *channel, const char *name,
		   TimestampTz deadline, bool *subscribed, bool *listening)
{
	bool		fresh = false;
	WaitPlace	place;

	if (*listening)
		return 0;
	place = waitqueue_place();
	if (!*subscribed && place != WAIT_PLACE_ASLEEP)
	{
		if (!lock_wait_listen(sub, channel, name, deadline))
			return -2;			/* refused: the waiter polls */
		*subscribed = fresh = true;
		place = waitqueue_place();	/* (we may have moved up meanwhile) */
	}
	if (place != WAIT_PLACE_LISTENS)
		return fresh ? 1 : 0;
	*listening = true;
	/* what reached a subscription made before was for those ahead */
	if (!fresh && !route_skip_messages(sub))
		return -1;
	return 1;
}

/*
 * Subscribe, then alternate attempts and sleeps until an attempt succeeds
 * (true) or the deadline passes (false).  For a kind whose newcomers
 * queue (LOCK_WAIT_QUEUED: the exclusive lock), only the first waiters of
 * this server are subscribed, and the first two of them listen for
 * messages (take_place); the others sleep on their latch until told to
 * move up, or to try.
 */
static bool
wait_loop(RedisConn *sub, bool foreign, const LockName *ln,
		  const char *channel, TimestampTz start, TimestampTz deadline,
		  int share, LockTryFn try_fn, void *arg)
{
	char	   *queue = queue_name(sub, foreign, channel);
	MemoryContext outer = CurrentMemoryContext;
	MemoryContext iteration;
	bool		acquired = false;
	bool		attempt_now = true;
	bool		by_message = false; /* the attempt follows a message */
	bool		resubscribe = false;
	TimestampTz until = 0;
	bool		behind = (share & LOCK_WAIT_BEHIND) != 0;
	bool		queued = (share & LOCK_WAIT_QUEUED) != 0;
	bool		listening;
	bool		subscribed;
	bool		polling = false;	/* the subscription was refused */
	int			poll_ms = WAIT_POLL_MIN_MS;
	WaitPlace	place;

	share &= LOCK_WAIT_SHARE_MASK;

	/*
	 * What one round of the loop allocates (an attempt's command and reply,
	 * a message) goes with the round: a long wait woken often does not grow.
	 * What lasts the whole wait (its channel, its queue) is in outer.
	 */
	iteration = AllocSetContextCreate(outer, "rlock wait round",
									  ALLOCSET_SMALL_SIZES);

	retarget_sub = NULL;
	if (retarget_channel != NULL)
		pfree(retarget_channel);
	retarget_channel = NULL;
	waitqueue_join(queue);
	place = queued ? waitqueue_place() : WAIT_PLACE_LISTENS;
	listening = (place == WAIT_PLACE_LISTENS);
	subscribed = (place != WAIT_PLACE_ASLEEP);
	if (subscribed)
		polling = !lock_wait_listen(sub, channel, ln->name, start);
	else
		route_unsubscribe_nowait(sub);	/* a subscription kept: let it go */
	if (behind && !waitqueue_is_first())
	{
		/*
		 * Queued behind another waiter of this server: it
		 * tries when the lock is released, we when it has had it (or the
		 * turn passes to us).  We do not know the holder's lease, so we
		 * look again at the latest after WAIT_RECHECK_MS.
		 */
		attempt_now = false;
		until = TimestampTzPlusMilliseconds(start, WAIT_RECHECK_MS);
		if (until > deadline)
			until = deadline;
	}
	for (;;)
	{
		int64		pttl = -1;
		TimestampTz now;
		int64		sleep_ms;
		int			rc;
		int			moved;

		MemoryContextSwitchTo(outer);
		MemoryContextReset(iteration);
		MemoryContextSwitchTo(iteration);
		wait_graph_tick();		/* made known; a deadlock check when due */
		if (attempt_now)
		{
			permits_none_left = permits_too_few = false;
			if (try_fn(arg, &pttl))
			{
				acquired = true;
				wait_outage_answered(); /* (an outage ridden out) */
				break;
			}
			wait_outage_answered();	/* (a subscription alone is not: a
									 * demoted master takes it) */
			if (by_message && share == LOCK_WAIT_PERMITS && permits_too_few)
			{
				/*
				 * The permits that came back were too few for us: the next
				 * waiter may ask for fewer.  Let it look (once: it passes
				 * the turn on only when a message woke it), and queue
				 * again behind it.  When none came back to us (another
				 * server's waiter took them), we keep our place.
				 */
				waitqueue_leave(true);
				waitqueue_join(queue);
				listening = !queued || waitqueue_place() == WAIT_PLACE_LISTENS;
			}
			by_message = false;
			now = GetCurrentTimestamp();
			if (now >= deadline)
				break;
			if (retarget_channel != NULL)
			{
				/* listen where the attempt failed, then look again */
				if (retarget_sub != NULL && retarget_sub != sub)
				{
					route_unsubscribe_nowait(sub);
					sub = waiting_sub = retarget_sub;
				}
				channel = MemoryContextStrdup(outer, retarget_channel);
				pfree(retarget_channel);
				retarget_channel = NULL;
				retarget_sub = NULL;
				polling = !route_subscribe(sub, channel, ln->name, deadline);
				subscribed = true;
				pfree(queue);
				MemoryContextSwitchTo(outer);
				queue = queue_name(sub, foreign, channel);
				MemoryContextSwitchTo(iteration);
				waitqueue_leave(true);
				waitqueue_join(queue);
				listening = !queued || waitqueue_place() == WAIT_PLACE_LISTENS;
				resubscribe = false;
				continue;
			}
			if (resubscribe)
			{
				/* the connection broke: a failover is ridden out */
				polling = !route_subscribe(sub, channel, ln->name, deadline);
				resubscribe = false;
				continue;		/* subscribed: look again */
			}

			/* sleep until a release message, or the lease runs out */
			sleep_ms = (pttl >= 0) ? Min(pttl, WAIT_RECHECK_MS - 1) + 1
				: WAIT_RECHECK_MS;
			if (polling)
				sleep_ms = lock_wait_poll_sleep(&poll_ms, pttl);
			until = TimestampTzPlusMilliseconds(now, sleep_ms);
			if (until > deadline)
				until = deadline;
		}

		/*
		 * A queued waiter that moved up while it attempted (a turn's latch
		 * is consumed by a round trip's wait) takes its new place first.
		 */
		moved = (queued && !listening && !polling) ?
			take_place(sub, channel, ln->name, deadline, &subscribed,
					   &listening) : 0;
		if (moved == -2)
		{
			polling = true;
			continue;
		}
		if (moved != 0)
			rc = (moved < 0) ? -1 : 2;
		else
		{
			TimestampTz sleep_until = Min(until, wait_graph_due());
			RlockWaitEvent prev_event;

			/* the sleep shows as the lock's wait, the round trips not */
			prev_event = rlock_wait_event_set(share == LOCK_WAIT_PERMITS ?
											  RLOCK_WAIT_SEMAPHORE :
											  RLOCK_WAIT_LOCK);
			rc = (listening && !polling) ?
				route_wait_message(sub, sleep_until) :
				lock_wait_turn(sleep_until);
			rlock_wait_event_set(prev_event);
			if (rc == 0 && sleep_until < until)
			{
				attempt_now = false;	/* the wait graph's turn, not ours */
				continue;
			}
			if (rc >= 0 && queued && !listening && !polling)
			{
				/* woken by our turn, or time to look: where are we now? */
				moved = take_place(sub, channel, ln->name, deadline,
								   &subscribed, &listening);
				if (moved == -2)
					polling = true;
				else if (moved < 0)
					rc = -1;
				else if (moved > 0 && rc != 0)
					rc = 2;
			}
		}
		if (polling)
			attempt_now = (rc == 0 || waitqueue_is_first());
		else if (rc < 0 && route_node_can_move(sub))
		{
			/* the connection broke: a failover is ridden out */
			polling = !route_subscribe(sub, channel, ln->name, deadline);
			attempt_now = true;
		}
		else if (rc < 0)
		{
			/*
			 * The connection broke, and no failover is to be waited for.
			 * Look first: the attempt may move the wait elsewhere (a
			 * Redlock's master that died); else subscribe here again, and
			 * look once more.
			 */
			resubscribe = true;
			attempt_now = true;
		}
		else if (rc == 0)
			attempt_now = true;	/* the lease ran out, or time to look */
		else
		{
			attempt_now = waitqueue_is_first(); /* a release, or our turn */
			by_message = (rc == 1 && attempt_now);
		}
	}
	MemoryContextSwitchTo(outer);
	MemoryContextDelete(iteration);
	return acquired;
}

static bool wait_on(RedisConn *sub, bool foreign, const LockName *ln,
					const char *channel, int64 wait_ms,
					bool honour_lock_timeout, int share, LockTryFn try_fn,
					LockGiveUpFn give_up_fn, void *arg);

bool
lock_wait(const LockName *ln, const char *channel, int64 wait_ms,
		  bool honour_lock_timeout, int share, LockTryFn try_fn,
		  LockGiveUpFn give_up_fn, void *arg)
{
	return wait_on(route_backend_subscriber(), false, ln, channel, wait_ms,
				   honour_lock_timeout, share, try_fn, give_up_fn, arg);
}

/* lock_wait, listening on sub: a Redlock master's subscriber connection. */
bool
lock_wait_on(RedisConn *sub, const LockName *ln, const char *channel,
			 int64 wait_ms, bool honour_lock_timeout, int share,
			 LockTryFn try_fn, LockGiveUpFn give_up_fn, void *arg)
{
	return wait_on(sub, true, ln, channel, wait_ms, honour_lock_timeout,
				   share, try_fn, give_up_fn, arg);
}

static bool
wait_on(RedisConn *sub, bool foreign, const LockName *ln, const char *channel,
		int64 wait_ms, bool honour_lock_timeout, int share,
		LockTryFn try_fn, LockGiveUpFn give_up_fn, void *arg)
{
	TimestampTz start = GetCurrentTimestamp();
	TimestampTz deadline;
	TimestampTz end;
	MemoryContext round_cxt;
	volatile int round_share = share;
	ErrorContextCallback errcb;
	volatile bool armed = false;
	volatile bool acquired = false;
	MemoryContext oldcxt = CurrentMemoryContext;
	RlockWaitEvent entry_event = rlock_wait_event_current;

	deadline = (wait_ms < 0) ? DT_NOEND :
		TimestampTzPlusMilliseconds(start, wait_ms);

	errcb.callback = lock_wait_context;
	errcb.arg = psprintf((share & LOCK_WAIT_SHARE_MASK) == LOCK_WAIT_PERMITS ?
						 "semaphore \"%s\"" : "lock \"%s\"", ln->name);
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;

	/* the wait's end for an outage: its budget, or lock_timeout's */
	end = deadline;
	if (honour_lock_timeout && LockTimeout > 0)
		end = Min(end, TimestampTzPlusMilliseconds(start, LockTimeout));
	wait_outage_begin(errcb.arg, ln->key);
	wait_graph_begin(ln, true);
	/* what a round an outage interrupted left allocated goes with it */
	round_cxt = AllocSetContextCreate(oldcxt, "rlock wait outage round",
									  ALLOCSET_SMALL_SIZES);

	/* each round: the wait, until it ends or an outage interrupts it */
	for (;;)
	{
		volatile bool ended = false;
		WaitOutageAction action = WAIT_OUTAGE_RETHROW;

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
				/* resume after a pause: subscribe again, look at once */
				lock_wait_leave();
				wait_outage_pause(end);
				round_share &= ~LOCK_WAIT_BEHIND;
			}
			acquired = wait_loop(sub, foreign, ln, channel, start, deadline,
								 round_share, try_fn, arg);
			MemoryContextSwitchTo(oldcxt);
			ended = true;
		}
		PG_CATCH();
		{
			/*
			 * No Redis I/O here: leaving the channel (and, for a fair
			 * waiter, its queue) is left to the abort path (lock_wait_leave,
			 * and the kind's own clean-up), or to the next round of a wait
			 * that rides an outage out (wait_outage.c).
			 */
			MemoryContextSwitchTo(oldcxt);
			rlock_wait_event_set(entry_event);	/* an ERROR left a sleep */
			action = wait_outage_catch(end);
			waitqueue_leave(true);
			if (action != WAIT_OUTAGE_RIDE)
			{
				wait_graph_abandon();
				if (armed)
					disable_timeout(LOCK_TIMEOUT, false);
				stats_add_elapsed(RLOCK_STAT_WAIT_US, start);
				stats_count(RLOCK_STAT_FAILED);
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

	/*
	 * Having taken a lock that other sessions of this server wait for, keep
	 * the subscription: a session that comes back for the lock finds it
	 * still contended, and resumes it without a round trip.  Otherwise
	 * leave the channel.
	 */
	if (acquired && channel_pending && waitqueue_others_waiting())
	{
		channel_pending = false;
		route_keep_subscription(waiting_sub);
	}
	else
		lock_wait_leave();

	/*
	 * Pass the turn on unless we took the lock for ourselves, or the last
	 * of a semaphore's free permits.
	 */
	waitqueue_leave(!acquired ||
					((share & LOCK_WAIT_SHARE_MASK) != 0 && !permits_none_left));
	if (!acquired && give_up_fn != NULL)
		give_up_fn(arg);
	error_context_stack = errcb.previous;
	stats_add_elapsed(RLOCK_STAT_WAIT_US, start);
	stats_count(acquired ? RLOCK_STAT_CONTENDED : RLOCK_STAT_FAILED);

	return acquired;
}
