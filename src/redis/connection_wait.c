/*-------------------------------------------------------------------------
 *
 * connection_wait.c
 *	  The one interruptible wait of rlock's Redis connections: for one
 *	  connection's socket, or for whichever of several is ready first.
 *
 * Every wait of the connection layer ends here.  It sleeps on a
 * WaitEventSet with the process latch and postmaster death, so that cancel,
 * statement_timeout and termination are processed on every wake-up (an
 * ERROR may escape from a wait), and it always has a deadline.  A single
 * connection waits on its own set (made when it connects); a round trip
 * over several (a Redlock's masters, a Cluster's nodes) waits on a set of
 * them all, kept for the next round trip over the same connections on the
 * same sockets, and is told every socket that is ready at once, so that
 * only those are read.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "redis/redis.h"
#include "redis/redis_int.h"
#include "base/base.h"
#include "net/net.h"

/* ----------------------------------------------------------------
 * The wait primitive
 * ----------------------------------------------------------------
 */

/*
 * Wait until the connection's socket is ready for "events"
 * (WL_SOCKET_READABLE and/or WL_SOCKET_WRITEABLE) or the deadline passes.
 * Interrupts are processed on every latch wake-up (an ERROR may escape from
 * here); with latch_woken, a latch wake-up also ends the wait (setting
 * *latch_woken).  Returns true when the socket is ready, false on timeout,
 * on such a wake-up, or when the postmaster died during process exit.
 */
bool
rconn_wait(RedisConn *conn, uint32 events, TimestampTz deadline,
		   bool *latch_woken)
{
	if (conn->sockevents != events)
	{
		ModifyWaitEvent(conn->wes, conn->sockpos, events, NULL);
		conn->sockevents = events;
	}

	for (;;)
	{
		WaitEvent	ev;
		long		timeout;
		int			n;

		if (deadline == DT_NOEND)
			timeout = -1;
		else
		{
			TimestampTz now = GetCurrentTimestamp();

			if (now >= deadline)
				return false;
			timeout = (long) ((deadline - now + 999) / 1000);
		}

		n = WaitEventSetWait(conn->wes, timeout, &ev, 1, RLOCK_WAIT_EVENT);
		if (n == 0)
			continue;			/* timeout: re-check the deadline */
		if (ev.events & WL_POSTMASTER_DEATH)
		{
			if (proc_exit_inprogress)
				return false;
			proc_exit(1);
		}
		if (ev.events & WL_LATCH_SET)
		{
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
			if (latch_woken != NULL)
			{
				*latch_woken = true;
				return false;
			}
			continue;
		}
		if (ev.events & events)
			return true;
	}
}

/*
 * The wait set of the last round trip over several connections, kept for
 * the next one over the same connections on the same sockets (a Redlock's
 * masters, a Cluster's nodes ask the same set again and again): creating
 * one costs a system call per socket.  multi[i] is where w[i]'s socket
 * is in it.
 */
typedef struct MultiEntry
{
	RedisConn  *conn;
	uint64		incarnation;	/* its socket */
	uint32		events;			/* what the set waits for on it */
	int			pos;			/* its position in the set, -1 if none */
} MultiEntry;

static WaitEventSet *multi_wes = NULL;
static int	multi_n = 0;
static bool multi_cached = false;
static MultiEntry *multi = NULL;
static WaitEvent *multi_evs = NULL;
static int	multi_cap = 0;

static void
multi_wes_forget(void)
{
	if (multi_wes != NULL)
		FreeWaitEventSet(multi_wes);
	multi_wes = NULL;
	multi_n = 0;
	multi_cached = false;
}

/*
 * Make multi_wes watch the sockets of w[0..n-1] that are not done, each
 * for its conn->want: the kept set when it watches every one of these
 * connections on its current socket, else a new one (kept in turn when it
 * watches all n).
 */
static void
multi_wes_prepare(RconnWaiter *w, int n)
{
	bool		reuse = multi_cached && multi_n == n;

	for (int i = 0; reuse && i < n; i++)
	{
		RedisConn  *conn = w[i].conn;

		if (multi[i].conn != conn ||
			(!w[i].done && multi[i].incarnation != conn->incarnation))
			reuse = false;
	}
	if (!reuse)
	{
		multi_wes_forget();
		if (n > multi_cap)
		{
			int			cap = Max(n, 8);

			multi = multi ? repalloc(multi, cap * sizeof(MultiEntry)) :
				MemoryContextAlloc(TopMemoryContext, cap * sizeof(MultiEntry));
			multi_evs = multi_evs ?
				repalloc(multi_evs, (cap + 2) * sizeof(WaitEvent)) :
				MemoryContextAlloc(TopMemoryContext, (cap + 2) * sizeof(WaitEvent));
			multi_cap = cap;
		}
		multi_wes = RLOCK_CREATE_WAIT_EVENT_SET(n + 2);
		AddWaitEventToSet(multi_wes, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch,
						  NULL);
		AddWaitEventToSet(multi_wes, WL_POSTMASTER_DEATH, PGINVALID_SOCKET,
						  NULL, NULL);
		multi_cached = true;
		for (int i = 0; i < n; i++)
		{
			RedisConn  *conn = w[i].conn;

			multi[i].conn = conn;
			multi[i].pos = -1;
			if (w[i].done)
			{
				multi_cached = false;
				continue;
			}
			multi[i].incarnation = conn->incarnation;
			multi[i].events = conn->want;
			/* a socket goes in once (twice is EEXIST): share its position */
			for (int j = 0; j < i && multi[i].pos < 0; j++)
				if (multi[j].conn == conn && multi[j].pos >= 0)
					multi[i].pos = multi[j].pos;
			if (multi[i].pos < 0)
				multi[i].pos = AddWaitEventToSet(multi_wes, conn->want,
												 transport_socket(conn->transport),
												 NULL, NULL);
		}
		multi_n = n;
		return;
	}
	for (int i = 0; i < n; i++)
	{
		RedisConn  *conn = w[i].conn;

		if (w[i].done || multi[i].events == conn->want)
			continue;
		ModifyWaitEvent(multi_wes, multi[i].pos, conn->want, NULL);
		multi[i].events = conn->want;
	}
}

/*
 * Wait for any of several connections (each for its conn->want) until the
 * earliest deadline; sets w[i].ready for each whose socket is ready.
 */
void
rconn_wait_many(RconnWaiter *w, int n)
{
	TimestampTz deadline = DT_NOEND;

	multi_wes_prepare(w, n);
	for (int i = 0; i < n; i++)
	{
		w[i].ready = false;
		if (!w[i].done && w[i].deadline < deadline)
			deadline = w[i].deadline;
	}
	for (;;)
	{
		TimestampTz now = GetCurrentTimestamp();
		int			r;
		bool		any = false;

		if (now >= deadline)
			return;
		r = WaitEventSetWait(multi_wes, (long) ((deadline - now + 999) / 1000),
							 multi_evs, n + 2, RLOCK_WAIT_EVENT);
		for (int e = 0; e < r; e++)
		{
			WaitEvent  *ev = &multi_evs[e];

			if (ev->events & WL_POSTMASTER_DEATH)
			{
				if (proc_exit_inprogress)
					return;
				proc_exit(1);
			}
			if (ev->events & WL_LATCH_SET)
			{
				ResetLatch(MyLatch);
				CHECK_FOR_INTERRUPTS();
				continue;
			}
			for (int i = 0; i < n; i++)
			{
				if (multi[i].pos != ev->pos)
					continue;
				if (w[i].done)
				{
					/* done, yet its socket stirs: watch without it */
					multi_cached = false;
					continue;
				}
				w[i].ready = true;
				any = true;
			}
		}
		if (any)
			return;
		if (!multi_cached)
			multi_wes_prepare(w, n);
	}
}

