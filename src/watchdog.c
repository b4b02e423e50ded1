/*-------------------------------------------------------------------------
 *
 * watchdog.c
 *	  The "rlock watchdog" background worker: it renews, every third of
 *	  rlock.watchdog_timeout, the lease of every lock held without a lease
 *	  by any session of this server, and finds the locks that were lost.
 *
 * Each cycle copies the locks to renew out of the shared registry (never
 * holding its LWLock across I/O), renews them with the renew script in
 * batches of RENEW_BATCH keys, all batches pipelined in one round trip, and
 * writes the outcome back: renewed_at for the locks Redis still had, state
 * "lost" (and a LOG line) for the others.  A lock taken between two cycles
 * is renewed by the next one, well within its lease: backends never wake
 * the worker (that would cost a signal per acquisition).
 *
 * Redis failures are logged once per outage and retried with a growing
 * back-off; the worker never exits because of them (an exit would only
 * make the postmaster restart it).  Other errors end the process, and the
 * postmaster restarts it after a second.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "connection.h"
#include "lockname.h"
#include "registry.h"
#include "rlock.h"
#include "scripts.h"
#include "stats.h"
#include "watchdog.h"

/* Keys per renew script call. */
#define RENEW_BATCH			1000
/* Shortest and longest wait before retrying after a Redis failure, ms. */
#define BACKOFF_MIN_MS		100
#define BACKOFF_MAX_MS		1000

void
watchdog_register(void)
{
	BackgroundWorker bgw;

	memset(&bgw, 0, sizeof(bgw));
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS |
		BGWORKER_BACKEND_DATABASE_CONNECTION;
	bgw.bgw_start_time = BgWorkerStart_RecoveryFinished;
	bgw.bgw_restart_time = 1;
	strlcpy(bgw.bgw_library_name, "rlock", BGW_MAXLEN);
	strlcpy(bgw.bgw_function_name, "rlock_watchdog_main", BGW_MAXLEN);
	strlcpy(bgw.bgw_name, "rlock watchdog", BGW_MAXLEN);
	strlcpy(bgw.bgw_type, "rlock watchdog", BGW_MAXLEN);
	RegisterBackgroundWorker(&bgw);
}

/*
 * One renewal cycle.  Returns false when Redis could not be reached (the
 * failure has been reported at elevel).
 */
static bool
renew_cycle(RedisConn *conn, int elevel)
{
	RenewItem  *items;
	int			n;
	int			nrenewed = 0;
	TimestampTz start = GetCurrentTimestamp();
	int			nbatches;
	RedisCmd   *cmds;
	redisReply **replies;
	bool	   *held;
	const char *uuid = registry_instance_uuid();
	TimestampTz now;

	n = registry_renewal_snapshot(&items);
	if (n == 0)
		return true;

	nbatches = (n + RENEW_BATCH - 1) / RENEW_BATCH;
	cmds = palloc(nbatches * sizeof(RedisCmd));
	for (int b = 0; b < nbatches; b++)
	{
		int			first = b * RENEW_BATCH;
		int			count = Min(RENEW_BATCH, n - first);

		rcmd_script(&cmds[b], RLOCK_SCRIPT_RENEW, count);
		for (int i = first; i < first + count; i++)
			rcmd_str(&cmds[b], items[i].key);
		rcmd_int(&cmds[b], rlock_watchdog_timeout_ms);
		for (int i = first; i < first + count; i++)
		{
			/* the holder's field, and how to renew it */
			rcmd_str(&cmds[b],
					 lockname_holder_field(items[i].kind,
										   psprintf("%s:%d", uuid, items[i].pid)));
			rcmd_str(&cmds[b], items[i].kind == RLOCK_KIND_READ ? "r" : "x");
		}
	}

	if (!rconn_run(conn, cmds, nbatches, &replies, elevel, NULL))
	{
		stats_count(RLOCK_STAT_RENEWAL_FAILURES);
		return false;
	}

	now = GetCurrentTimestamp();
	held = palloc0(n * sizeof(bool));
	for (int b = 0; b < nbatches; b++)
	{
		redisReply *r = replies[b];
		int			first = b * RENEW_BATCH;
		int			count = Min(RENEW_BATCH, n - first);

		if (r->type != REDIS_REPLY_ARRAY || r->elements != count)
		{
			/* an error reply: say so, and do not mark anything lost */
			ereport(LOG,
					(errmsg("rlock watchdog: unexpected reply to a renewal"),
					 r->type == REDIS_REPLY_ERROR ?
					 errdetail_internal("%s", r->str) : 0));
			for (int i = first; i < first + count; i++)
				held[i] = true;
			continue;
		}
		for (int i = 0; i < count; i++)
			held[first + i] = (r->element[i]->type == REDIS_REPLY_INTEGER &&
							   r->element[i]->integer == 1);
	}
	registry_renewed(items, held, n, now, rlock_cancel_on_lost);
	for (int i = 0; i < n; i++)
		nrenewed += held[i] ? 1 : 0;
	stats_add(RLOCK_STAT_RENEWALS, nrenewed);
	stats_add(RLOCK_STAT_RENEWAL_BATCHES, nbatches);
	stats_count(RLOCK_STAT_RENEWAL_CYCLES);
	stats_add_elapsed(RLOCK_STAT_RENEWAL_US, start);
	ereport(DEBUG1,
			(errmsg_internal("rlock watchdog: renewed %d of %d locks in %.1f ms (%d script calls, one round trip)",
							 nrenewed, n,
							 (double) (GetCurrentTimestamp() - start) / 1000.0,
							 nbatches)));
	return true;
}

void
rlock_watchdog_main(Datum arg)
{
	RedisConn  *conn;
	MemoryContext cycle_cxt;
	TimestampTz next_cycle = 0;
	bool		failing = false;
	int			backoff_ms = BACKOFF_MIN_MS;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("rlock watchdog");

	conn = rconn_create("rlock watchdog");
	cycle_cxt = AllocSetContextCreate(TopMemoryContext, "rlock watchdog cycle",
									  ALLOCSET_DEFAULT_SIZES);
	ereport(LOG,
			(errmsg("rlock watchdog started"),
			 errdetail("Renewing leases of %d ms every %d ms.",
					   rlock_watchdog_timeout_ms,
					   rlock_watchdog_timeout_ms / 3)));

	for (;;)
	{
		TimestampTz now;
		long		wait_ms;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		now = GetCurrentTimestamp();
		if (now >= next_cycle)
		{
			MemoryContext old = MemoryContextSwitchTo(cycle_cxt);
			bool		ok;

			/* report the first failure of an outage at LOG, then quietly */
			ok = renew_cycle(conn, failing ? DEBUG1 : LOG);
			MemoryContextSwitchTo(old);
			MemoryContextReset(cycle_cxt);

			if (ok)
			{
				if (failing)
					ereport(LOG,
							(errmsg("rlock watchdog: Redis answers again, renewals resumed")));
				failing = false;
				backoff_ms = BACKOFF_MIN_MS;
				next_cycle = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
														 Max(rlock_watchdog_timeout_ms / 3, 1));
			}
			else
			{
				failing = true;
				next_cycle = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
														 Min(backoff_ms, Max(rlock_watchdog_timeout_ms / 3, 1)));
				backoff_ms = Min(backoff_ms * 2, BACKOFF_MAX_MS);
			}
		}

		now = GetCurrentTimestamp();
		wait_ms = (next_cycle > now) ? (long) ((next_cycle - now + 999) / 1000) : 0;
		if (wait_ms > 0)
		{
			(void) WaitLatch(MyLatch,
							 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 wait_ms, RLOCK_WAIT_EVENT);
			ResetLatch(MyLatch);
		}
	}
}
