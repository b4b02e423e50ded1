/*-------------------------------------------------------------------------
 *
 * stranded.c
 *	  The worker's side of stranded releases: a session's release that
 *	  could not reach Redis (registry_strand.c, holds_strand.c) is retried
 *	  here every STRANDED_RETRY_MS while its lease lasts, and its registry
 *	  entry dropped once Redis answered, or once the lease has run out.
 *
 * The retry is the kind's reconcile down to zero for the holder's own
 * field ("<instance uuid>:<pid>"): it removes exactly that holder's holds
 * and nothing of anyone else (a Redisson client's field of the same name,
 * a holder that took the lock after it expired), and it is idempotent, so
 * a retry whose first try did run in Redis (a lost reply) does no harm.
 * It wakes the lock's waiters as a release does.  A LOG line says how each
 * ended: released, found gone already, or given up when the lease ran out
 * (the lock then expires by itself).
 *
 * The worker's main loop (watchdog.c) calls stranded_run each time round
 * and sleeps at most what it returns while anything is stranded; with
 * nothing stranded it costs one atomic read.  A backend that strands a
 * release sets the worker's latch (stranded_start), so the first try does
 * not wait for the next renewal.  Each try is one pipelined
 * round trip for every stranded lock, bounded like the worker's other
 * round trips (rlock.connect_timeout, rlock.command_timeout) and never
 * longer than STRANDED_TRY_CAP_MS, so that an outage does not hold up the
 * renewals for long.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "redis/redis.h"
#include "route/route.h"
#include "holds/holds.h"
#include "base/base.h"
#include "worker/worker.h"

/* How often a stranded release is tried again, ms. */
#define STRANDED_RETRY_MS	250
/* The longest a try waits for Redis, ms. */
#define STRANDED_TRY_CAP_MS	1000

/*
 * How long after the recorded expiry a stranded release is still tried:
 * the registry's expiry is the earliest moment Redis may let the lock go
 * (the start of the round trip that set its TTL), so Redis may keep it a
 * round trip longer.
 */
#define STRANDED_MARGIN_MS	1000

static TimestampTz next_try = 0;
static MemoryContext stranded_cxt = NULL;

static void
log_settled(const StrandedItem *it, const char *how, const char *detail)
{
	char		holder[RLOCK_EVENT_HOLDER_LEN];
	const char *msg;

	snprintf(holder, sizeof(holder), "%s:%d", registry_instance_uuid(),
			 it->pid);
	msg = rlock_event_record(RLOCK_EVENT_STRANDED_SETTLED,
							 rlock_kind_name(it->kind), it->key,
							 holder,
							 "rlock worker: stranded release of %s \"%s\" held by %s %s",
							 it->kind == RLOCK_KIND_SEMAPHORE ? "the permits of semaphore" :
							 psprintf("%s lock", rlock_kind_name(it->kind)),
							 it->key, holder, how);
	ereport(LOG,
			(errmsg_internal("%s", msg),
			 errdetail("%s It was stranded %lld ms ago.", detail,
					   (long long) ((GetCurrentTimestamp() - it->stranded_at) / 1000))));
}

/* One try for every stranded release whose lease lasts. */
static void
stranded_try(void)
{
	StrandedItem *items;
	int			n = registry_stranded_snapshot(&items);
	RedisCmd   *cmds = palloc(Max(n, 1) * sizeof(RedisCmd));
	int		   *which = palloc(Max(n, 1) * sizeof(int));
	RReply	  **replies = NULL;
	RedisConn  *conn;
	int			m = 0;
	TimestampTz now = GetCurrentTimestamp();

	for (int i = 0; i < n; i++)
	{
		StrandedItem *it = &items[i];

		if (now >= TimestampTzPlusMilliseconds(it->expires_at,
											   STRANDED_MARGIN_MS))
		{
			registry_stranded_settled(it);
			log_settled(it, "given up: its lease has run out",
						"Redis could not be reached while it lasted; the lock expired there by itself.");
			continue;
		}
		holds_kind_ops(it->kind)->build_reconcile(&cmds[m], it->kind, it->key,
												  psprintf("%s:%d",
														   registry_instance_uuid(),
														   it->pid),
												  0);
		which[m++] = i;
	}
	if (m == 0)
		return;

	/*
	 * A failure is retried in STRANDED_RETRY_MS, saying so at DEBUG1; a
	 * silent Redis holds the worker (and its renewals) STRANDED_TRY_CAP_MS
	 * at most.
	 */
	conn = route_backend();
	rconn_set_deadline_cap(conn,
						   TimestampTzPlusMilliseconds(now, STRANDED_TRY_CAP_MS));
	(void) route_run(conn, cmds, m, &replies, DEBUG1, NULL);
	rconn_set_deadline_cap(conn, DT_NOEND);
	for (int j = 0; replies != NULL && j < m; j++)
	{
		StrandedItem *it = &items[which[j]];
		RReply	   *r = replies[j];

		if (r == NULL)
			continue;			/* (a Cluster's node that failed) */
		if (r->type == RREPLY_INTEGER)
		{
			registry_stranded_settled(it);
			if (r->integer > 0)
				log_settled(it, "done: released in Redis",
							"Redis answered again.");
			else
				log_settled(it, "done: Redis no longer had it",
							"It expired, or was force-released, before Redis answered again.");
			continue;
		}
		if (r->type == RREPLY_ERROR &&
			(rconn_reply_is(r, "RLOCKKIND") || rconn_reply_is(r, "WRONGTYPE")))
		{
			/* the name is something else now: nothing of ours is there */
			registry_stranded_settled(it);
			log_settled(it, "done: the name is no longer a lock of its kind",
						"Nothing was changed in Redis.");
			continue;
		}
		/* any other answer (an error reply, OOM, LOADING): tried again */
		ereport(DEBUG1,
				(errmsg_internal("rlock worker: stranded release of \"%s\" not answered as expected; retrying",
								 it->key)));
	}
}

static void
forget_worker_latch(int code, Datum arg)
{
	registry_set_worker_latch(NULL);
}

/*
 * When the worker starts: a backend that strands a release sets its latch,
 * so that the first try comes at once, not at the next renewal.
 */
void
stranded_start(void)
{
	registry_set_worker_latch(MyLatch);
	before_shmem_exit(forget_worker_latch, (Datum) 0);
}

/*
 * Try the stranded releases when due.  Returns how long the worker may
 * sleep before the next call (ms), or -1 when nothing is stranded.
 */
long
stranded_run(void)
{
	TimestampTz now;

	if (!registry_any_stranded())
		return -1;
	now = GetCurrentTimestamp();
	if (now >= next_try)
	{
		MemoryContext old;

		if (stranded_cxt == NULL)
			stranded_cxt = AllocSetContextCreate(TopMemoryContext,
												 "rlock stranded releases",
												 ALLOCSET_DEFAULT_SIZES);
		old = MemoryContextSwitchTo(stranded_cxt);
		stranded_try();
		MemoryContextSwitchTo(old);
		MemoryContextReset(stranded_cxt);
		now = GetCurrentTimestamp();
		next_try = TimestampTzPlusMilliseconds(now, STRANDED_RETRY_MS);
	}
	if (!registry_any_stranded())
		return -1;
	return (long) Max((next_try - now + 999) / 1000, 1);
}
