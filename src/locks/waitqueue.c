/*-------------------------------------------------------------------------
 *
 * waitqueue.c
 *	  Which of this server's sessions waiting for one lock tries next when
 *	  the lock's release message arrives.
 *
 * Every waiting session is subscribed to the lock's channel, and Redis
 * delivers each release message to all of them.  If all retried, one
 * release would cost a round trip per waiting session, all but one of them
 * refused (the herd).  Redisson wakes one local waiter per message; rlock
 * does the same per server: the sessions of this server waiting on one
 * channel take tickets in shared memory, and on a message only the one
 * with the oldest ticket tries.  When that one leaves without the lock (its
 * wait timed out or was cancelled), or takes a lock that others may share
 * (a read lock), it passes the turn on by setting the next one's latch.
 * Every waiter still retries when the holder's lease runs out and at least
 * every few seconds, so a lost wake-up costs time, never the lock.  For the
 * exclusive lock, whose newcomers queue behind the server's waiters, only
 * the first two waiters of a channel read its messages at all
 * (waitqueue_place): the others sleep on their latch, so a release wakes
 * two processes of the server however many wait, and a listener that
 * leaves tells the next in line to listen.  Only the first eight are
 * subscribed to the channel at all (waitqueue_place again): Redis writes
 * each release message to every subscriber's socket, and with 64 waiters
 * that writing, not the lock, was what a hand-over cost.  A waiter that
 * leaves the first eight tells the next in line to subscribe.  Eight
 * sessions taking turns on a hot name so stay subscribed from one wait to
 * the next (lock_wait.c keeps the subscription); with more, each hand-over
 * costs one subscription, in a waiter that is not next.  A newcomer that
 * finds waiters queues behind them without trying (waitqueue_has_waiters).
 *
 * One slot per PGPROC, written only by its owner (a ticket is taken from a
 * shared atomic counter); readers scan the slots without a lock.  Without
 * shared_preload_libraries there is no table and every waiter tries on
 * every message.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/shmem.h"

#include "base/base.h"
#include "locks/locks.h"
#include "locks/locks_int.h"

typedef struct WaitSlot
{
	pg_atomic_uint64 ticket;	/* 0: not waiting */
	pg_atomic_uint64 channel_hash;
} WaitSlot;

typedef struct WaitQueueShared
{
	pg_atomic_uint64 next_ticket;
	int			nslots;
	WaitSlot	slots[FLEXIBLE_ARRAY_MEMBER];
} WaitQueueShared;

/* How many of a channel's waiters of this server listen (waitqueue_place) */
#define WAITQUEUE_LISTENERS	2
/* ... are subscribed to it */
#define WAITQUEUE_SUBSCRIBED	8

static WaitQueueShared *wq = NULL;
static WaitSlot *my_slot = NULL;
static bool exit_callback_registered = false;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static Size
waitqueue_size(void)
{
	return add_size(offsetof(WaitQueueShared, slots),
					mul_size(rlock_max_backends(), sizeof(WaitSlot)));
}

static void
waitqueue_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(waitqueue_size());
}

static void
waitqueue_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	wq = ShmemInitStruct("rlock wait queue", waitqueue_size(), &found);
	if (!found)
	{
		pg_atomic_init_u64(&wq->next_ticket, 1);
		wq->nslots = rlock_max_backends();
		for (int i = 0; i < wq->nslots; i++)
		{
			pg_atomic_init_u64(&wq->slots[i].ticket, 0);
			pg_atomic_init_u64(&wq->slots[i].channel_hash, 0);
		}
	}
	LWLockRelease(AddinShmemInitLock);
}

void
waitqueue_install_hooks(void)
{
	RLOCK_SHMEM_REQUEST(prev_shmem_request_hook, waitqueue_shmem_request);
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = waitqueue_shmem_startup;
}

/* Backend exit while waiting (a FATAL error skips lock_wait's cleanup). */
static void
waitqueue_exit_callback(int code, Datum arg)
{
	waitqueue_leave(true);
}

/*
 * The name of the queue of the waits on channel whose messages come from
 * server (NULL: the backend's deployment; else a Redlock master's
 * address).  A plain lock and a Redlock of one name share the channel's
 * name but not its messages: in one queue, a waiter of one would wait for
 * its turn behind a waiter of the other, whose release messages it never
 * sees.  palloc'd.
 */
char *
waitqueue_name(const char *server, const char *channel)
{
	if (server == NULL)
		return pstrdup(channel);
	return psprintf("redlock@%s %s", server, channel);
}

/* Start waiting on channel (a queue's name): take a ticket. */
void
waitqueue_join(const char *channel)
{
	if (wq == NULL || MyProc == NULL || RLOCK_MY_PROC_NUMBER >= wq->nslots)
		return;
	if (!exit_callback_registered)
	{
		before_shmem_exit(waitqueue_exit_callback, (Datum) 0);
		exit_callback_registered = true;
	}
	my_slot = &wq->slots[RLOCK_MY_PROC_NUMBER];
	pg_atomic_write_u64(&my_slot->channel_hash,
						hash_bytes_extended((const unsigned char *) channel,
											strlen(channel), 0));
	pg_atomic_write_u64(&my_slot->ticket,
						pg_atomic_fetch_add_u64(&wq->next_ticket, 1));
}

/*
 * What one scan of the slots finds of the waiters of this server on one
 * channel, other than us: how many there are, how many are ahead of a
 * ticket, and the WAITQUEUE_SUBSCRIBED oldest (slot numbers, -1 past the
 * last found), oldest first.
 */
typedef struct ChannelView
{
	int			others;
	int			ahead;
	int			oldest[WAITQUEUE_SUBSCRIBED];
	uint64		oldest_ticket[WAITQUEUE_SUBSCRIBED];
} ChannelView;

/*
 * Scan every slot but skip (a slot number, -1: none) for waiters on the
 * channel of hash; ahead counts those whose ticket is older than mine.
 */
static void
scan_channel(uint64 hash, int skip, uint64 mine, ChannelView *view)
{
	view->others = 0;
	view->ahead = 0;
	for (int k = 0; k < WAITQUEUE_SUBSCRIBED; k++)
	{
		view->oldest[k] = -1;
		view->oldest_ticket[k] = PG_UINT64_MAX;
	}
	for (int i = 0; i < wq->nslots; i++)
	{
		WaitSlot   *s = &wq->slots[i];
		uint64		t;
		int			k;

		if (i == skip)
			continue;
		t = pg_atomic_read_u64(&s->ticket);
		if (t == 0 || pg_atomic_read_u64(&s->channel_hash) != hash)
			continue;
		view->others++;
		if (t < mine)
			view->ahead++;
		/* insert into the oldest few, kept in ticket order */
		for (k = WAITQUEUE_SUBSCRIBED; k > 0 && t < view->oldest_ticket[k - 1]; k--)
		{
			if (k < WAITQUEUE_SUBSCRIBED)
			{
				view->oldest_ticket[k] = view->oldest_ticket[k - 1];
				view->oldest[k] = view->oldest[k - 1];
			}
		}
		if (k < WAITQUEUE_SUBSCRIBED)
		{
			view->oldest_ticket[k] = t;
			view->oldest[k] = i;
		}
	}
}

/* The scan of our own channel, from our own ticket; false: not waiting. */
static bool
scan_mine(ChannelView *view)
{
	uint64		mine;

	if (my_slot == NULL || (mine = pg_atomic_read_u64(&my_slot->ticket)) == 0)
		return false;
	scan_channel(pg_atomic_read_u64(&my_slot->channel_hash),
				 (int) (my_slot - wq->slots), mine, view);
	return true;
}

/*
 * Is a session of this server other than us waiting on channel now?  (A
 * newcomer then queues behind it without trying first: the release that
 * frees the lock wakes the waiter ahead.)
 */
bool
waitqueue_has_waiters(const char *channel)
{
	ChannelView view;

	if (wq == NULL || MyProc == NULL || RLOCK_MY_PROC_NUMBER >= wq->nslots)
		return false;
	scan_channel(hash_bytes_extended((const unsigned char *) channel,
									 strlen(channel), 0),
				 RLOCK_MY_PROC_NUMBER, 0, &view);
	return view.others > 0;
}

/* While waiting: does another session of this server wait on our channel? */
bool
waitqueue_others_waiting(void)
{
	ChannelView view;

	return scan_mine(&view) && view.others > 0;
}

/*
 * Where this waiter's place among the waiters of this server on its
 * channel puts it (one scan of the slots; not waiting: WAIT_PLACE_LISTENS).
 *
 * Only the first WAITQUEUE_LISTENERS listen for release messages: the
 * first tries on a message, the second reads it only to be ready the
 * moment the first leaves (a message it then reads is one published
 * after).  Only the first WAITQUEUE_SUBSCRIBED are subscribed at all:
 * Redis writes every message to every subscriber, read or not.  The
 * others wait on their latch, left unwoken by the messages that reach
 * their connection meanwhile, until one ahead leaves and tells the next in
 * line to listen, or to subscribe (waitqueue_leave): one that starts to
 * listen skips what arrived before.  So a release wakes two sessions of
 * the server, not every one waiting.
 */
WaitPlace
waitqueue_place(void)
{
	ChannelView view;

	if (!scan_mine(&view) || view.ahead < WAITQUEUE_LISTENERS)
		return WAIT_PLACE_LISTENS;
	if (view.ahead < WAITQUEUE_SUBSCRIBED)
		return WAIT_PLACE_SUBSCRIBED;
	return WAIT_PLACE_ASLEEP;
}

/* Should this waiter try on the message that just arrived? */
bool
waitqueue_is_first(void)
{
	ChannelView view;

	return !scan_mine(&view) || view.ahead == 0;
}

/*
 * After we left: tell the waiters at the positions of view (a scan made
 * after we left) that the departures may have moved into the zone (the
 * first "zone" positions: the listeners, the subscribed) to look at their
 * place, to start listening or subscribe.  ahead: how many were ahead of
 * us before we left; opened: the waiters gone since, we included.
 */
static void
wake_zone(const ChannelView *view, int ahead, int opened, int zone)
{
	int			first = Max(Max(ahead - (opened - 1), zone - opened), 0);

	for (int k = first; k < zone; k++)
		if (view->oldest[k] >= 0)
			SetLatch(&ProcGlobal->allProcs[view->oldest[k]].procLatch);
}

/*
 * Stop waiting.  With pass_on (the wait ended without the lock, or with a
 * lock others may share), set the latch of the next waiter on the channel,
 * so that it tries now.
 *
 * Waiters may leave at the same moment: each scan made before the other
 * left would name the same one to move up, and nobody the one after it.
 * So our ticket is cleared first, then (after a full barrier) the slots are
 * scanned again: of two leaving at once, at least the later sees both gone,
 * and tells every position the departures opened (the waiters fewer than
 * the scan before we left found, we included), not only the last one.
 */
void
waitqueue_leave(bool pass_on)
{
	ChannelView before;
	ChannelView after;
	int			opened;

	if (!scan_mine(&before))
		return;
	pg_atomic_write_u64(&my_slot->ticket, 0);
	pg_memory_barrier();
	scan_channel(pg_atomic_read_u64(&my_slot->channel_hash),
				 (int) (my_slot - wq->slots), PG_UINT64_MAX, &after);
	opened = 1 + Max(before.others - after.others, 0);

	/* the next to try, when we pass the turn on */
	if (pass_on && after.oldest[0] >= 0)
		SetLatch(&ProcGlobal->allProcs[after.oldest[0]].procLatch);
	/* a listener leaves: the next in line listen from now on */
	wake_zone(&after, before.ahead, opened, WAITQUEUE_LISTENERS);
	/* a subscribed waiter leaves: the next in line subscribe */
	wake_zone(&after, before.ahead, opened, WAITQUEUE_SUBSCRIBED);
}
