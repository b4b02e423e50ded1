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
 * (waitqueue_listens): the others sleep on their latch, so a release wakes
 * two processes of the server however many wait, and a listener that
 * leaves tells the next in line to listen.  A newcomer that finds waiters
 * queues behind them without trying (waitqueue_has_waiters).
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

/* How many of a channel's waiters of this server listen (waitqueue_listens) */
#define WAITQUEUE_LISTENERS	2

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

/* Start waiting on channel: take a ticket. */
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
 * The waiter of this server with the oldest ticket on the same channel,
 * other than us (-1: none); with mine_first, whether ours is older still.
 */
static int
oldest_other(bool *mine_first)
{
	uint64		hash = pg_atomic_read_u64(&my_slot->channel_hash);
	uint64		mine = pg_atomic_read_u64(&my_slot->ticket);
	uint64		best = PG_UINT64_MAX;
	int			best_i = -1;

	for (int i = 0; i < wq->nslots; i++)
	{
		WaitSlot   *s = &wq->slots[i];
		uint64		t;

		if (s == my_slot)
			continue;
		t = pg_atomic_read_u64(&s->ticket);
		if (t == 0 || pg_atomic_read_u64(&s->channel_hash) != hash)
			continue;
		if (t < best)
		{
			best = t;
			best_i = i;
		}
	}
	if (mine_first)
		*mine_first = (best_i < 0 || mine < best);
	return best_i;
}

/*
 * Is a session of this server other than us waiting on channel now?  (A
 * newcomer then queues behind it without trying first: the release that
 * frees the lock wakes the waiter ahead.)
 */
bool
waitqueue_has_waiters(const char *channel)
{
	uint64		hash;

	if (wq == NULL || MyProc == NULL || RLOCK_MY_PROC_NUMBER >= wq->nslots)
		return false;
	hash = hash_bytes_extended((const unsigned char *) channel,
							   strlen(channel), 0);
	for (int i = 0; i < wq->nslots; i++)
	{
		WaitSlot   *s = &wq->slots[i];

		if (i == RLOCK_MY_PROC_NUMBER)
			continue;
		if (pg_atomic_read_u64(&s->ticket) != 0 &&
			pg_atomic_read_u64(&s->channel_hash) == hash)
			return true;
	}
	return false;
}

/* While waiting: does another session of this server wait on our channel? */
bool
waitqueue_others_waiting(void)
{
	if (my_slot == NULL || pg_atomic_read_u64(&my_slot->ticket) == 0)
		return false;
	return oldest_other(NULL) >= 0;
}

/*
 * Does this waiter listen for release messages?  Only the first
 * WAITQUEUE_LISTENERS waiters of this server on a channel do: the first
 * tries on a message, the second reads it only to be ready the moment the
 * first leaves (a message it then reads is one published after).  The
 * others wait on their latch, left unwoken by the messages that reach
 * their connection meanwhile, until one of the listeners leaves and tells
 * the next in line to listen (waitqueue_leave): it then skips what
 * arrived before.  So a release wakes two sessions of the server, not
 * every one waiting.
 */
bool
waitqueue_listens(void)
{
	uint64		hash;
	uint64		mine;
	int			ahead = 0;

	if (my_slot == NULL || (mine = pg_atomic_read_u64(&my_slot->ticket)) == 0)
		return true;
	hash = pg_atomic_read_u64(&my_slot->channel_hash);
	for (int i = 0; i < wq->nslots && ahead < WAITQUEUE_LISTENERS; i++)
	{
		WaitSlot   *s = &wq->slots[i];
		uint64		t;

		if (s == my_slot)
			continue;
		t = pg_atomic_read_u64(&s->ticket);
		if (t != 0 && t < mine && pg_atomic_read_u64(&s->channel_hash) == hash)
			ahead++;
	}
	return ahead < WAITQUEUE_LISTENERS;
}

/* Should this waiter try on the message that just arrived? */
bool
waitqueue_is_first(void)
{
	bool		first;

	if (my_slot == NULL || pg_atomic_read_u64(&my_slot->ticket) == 0)
		return true;
	(void) oldest_other(&first);
	return first;
}

/*
 * Stop waiting.  With pass_on (the wait ended without the lock, or with a
 * lock others may share), set the latch of the next waiter on the channel,
 * so that it tries now.
 */
void
waitqueue_leave(bool pass_on)
{
	uint64		hash;
	uint64		mine;
	uint64		best[WAITQUEUE_LISTENERS];
	int			best_i[WAITQUEUE_LISTENERS];
	int			ahead = 0;

	if (my_slot == NULL || (mine = pg_atomic_read_u64(&my_slot->ticket)) == 0)
		return;

	/*
	 * The WAITQUEUE_LISTENERS oldest other waiters on the channel, and how
	 * many of them are ahead of us.
	 */
	hash = pg_atomic_read_u64(&my_slot->channel_hash);
	for (int k = 0; k < WAITQUEUE_LISTENERS; k++)
	{
		best[k] = PG_UINT64_MAX;
		best_i[k] = -1;
	}
	for (int i = 0; i < wq->nslots; i++)
	{
		WaitSlot   *s = &wq->slots[i];
		uint64		t;
		int			k;

		if (s == my_slot)
			continue;
		t = pg_atomic_read_u64(&s->ticket);
		if (t == 0 || pg_atomic_read_u64(&s->channel_hash) != hash)
			continue;
		if (t < mine)
			ahead++;
		for (k = WAITQUEUE_LISTENERS; k > 0 && t < best[k - 1]; k--)
		{
			if (k < WAITQUEUE_LISTENERS)
			{
				best[k] = best[k - 1];
				best_i[k] = best_i[k - 1];
			}
		}
		if (k < WAITQUEUE_LISTENERS)
		{
			best[k] = t;
			best_i[k] = i;
		}
	}
	pg_atomic_write_u64(&my_slot->ticket, 0);

	/* the next to try, when we pass the turn on */
	if (pass_on && best_i[0] >= 0)
		SetLatch(&ProcGlobal->allProcs[best_i[0]].procLatch);
	/* a listener leaves: the next in line listens from now on */
	if (ahead < WAITQUEUE_LISTENERS && best_i[WAITQUEUE_LISTENERS - 1] >= 0)
		SetLatch(&ProcGlobal->allProcs[best_i[WAITQUEUE_LISTENERS - 1]].procLatch);
}
