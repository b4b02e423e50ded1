/*-------------------------------------------------------------------------
 *
 * wait_events.c
 *	  The wait events rlock's waits show in pg_stat_activity: which wait is
 *	  which, and their ids (SPEC.md section 5.6, last point).
 *
 * Four of them, so that an operator tells a session blocked on a lock from
 * one waiting for semaphore permits, for a count-down latch, or for Redis
 * itself: RlockLock, RlockSemaphore, RlockLatch and RlockRedis.  From
 * PostgreSQL 17 they are named wait events (registered server-wide by the
 * first process that needs one, all four at once, so that pg_wait_events
 * lists them together); before, every one is the generic 'Extension'
 * (compat.h's RLOCK_WAIT_EVENT_NEW).
 *
 * Every wait rlock makes (a socket, a pause, a latch) passes
 * RLOCK_WAIT_EVENT, the current event; it is RlockRedis unless a wait loop
 * of src/locks/ (lock_wait.c, event_wait.c) set another around its sleeps.
 * So the round trips a lock wait makes between its sleeps (its attempts, a
 * subscription, a deadlock check) show RlockRedis, and the lower layers
 * need not know what is waited for.  The variable lives here, at the
 * bottom, because the layer that sets it (locks/) and the ones that wait
 * (net/, redis/, route/) may both use base/.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "base/base.h"

RlockWaitEvent rlock_wait_event_current = RLOCK_WAIT_REDIS;

/* The names, in the order of RlockWaitEvent. */
static const char *const wait_event_names[RLOCK_NUM_WAIT_EVENTS] = {
	"RlockRedis",
	"RlockLock",
	"RlockSemaphore",
	"RlockLatch"
};

/* Their ids in this process, once registered (0: not yet). */
static uint32 wait_event_ids[RLOCK_NUM_WAIT_EVENTS];

/* The wait_event_info of which, registering all four on first use. */
uint32
rlock_wait_event_info(RlockWaitEvent which)
{
	if (unlikely(wait_event_ids[0] == 0))
	{
		for (int i = 0; i < RLOCK_NUM_WAIT_EVENTS; i++)
			wait_event_ids[i] = RLOCK_WAIT_EVENT_NEW(wait_event_names[i]);
	}
	if ((int) which < 0 || which >= RLOCK_NUM_WAIT_EVENTS)
		which = RLOCK_WAIT_REDIS;
	return wait_event_ids[which];
}
