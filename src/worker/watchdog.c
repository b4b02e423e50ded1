/*-------------------------------------------------------------------------
 *
 * watchdog.c
 *	  The "rlock watchdog" background worker: it renews the lease of every
 *	  lock held without a lease by any session of this server, checks the
 *	  locks held with a fixed lease, and finds the locks that were lost.
 *
 * Each cycle copies the locks out of the shared registry (never holding its
 * LWLock across I/O) and first applies the fail-closed rule, which needs no
 * round trip: a lock whose fixed lease ran out, or whose renewal has failed
 * for so long that Redis may let it expire soon (registry_fail_closed_at:
 * a fifth of its lease before the earliest moment it can expire), is lost.
 * The rest are renewed, each with the lease it was taken with (a backend
 * and the worker may have read rlock.watchdog_timeout at different times),
 * or checked when their lease is fixed, with the renew script in batches of
 * RENEW_BATCH keys, all batches pipelined in one round trip (one per
 * RENEW_ROUND_LOCKS locks, past 100 000, so that the replies stay within
 * the bounds of one round trip's) in which each reply gets its own
 * deadline, so a large registry never times out as a whole and is never
 * resent in a storm.  The outcome goes back to the
 * registry: a later expiry for renewed locks, state "lost" (a LOG line,
 * and a cancel with rlock.cancel_on_lost) for the others.  Cycles come
 * every third of the shortest renewal lease, and sooner when a lock's
 * fail-closed moment comes first.  A lock taken between two cycles is
 * renewed by the next one, well within its lease: backends never wake the
 * worker (that would cost a signal per acquisition).
 *
 * With a Sentinel deployment the worker also asks the sentinels once a
 * second where the master is, and moves to a new one by itself (which,
 * through shared memory, moves every backend too: topology.c).
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

#include "redis/redis.h"
#include "route/route.h"
#include "holds/holds.h"
#include "base/base.h"
#include "locks/locks.h"
#include "worker/worker.h"

/* Keys per renew script call. */
#define RENEW_BATCH			1000
/* ... and a round trip at most this many locks */
#define RENEW_ROUND_LOCKS	100000
/* Shortest and longest wait before retrying after a Redis failure, ms. */
#define BACKOFF_MIN_MS		100
#define BACKOFF_MAX_MS		1000
/* Longest sleep when the master can move: it is looked for that often. */
#define WATCH_TOPOLOGY_MS	1000
/* Longest sleep between two looks at the holds file (holds_file.c). */
#define HOLDS_FILE_MS		1000

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
 * The locks of kinds that live on servers of their own (the Redlock's
 * masters), renewed or checked there by the kind (holds.h), which asks
 * all of them at once.  Returns how many were renewed.
 */
static int
renew_elsewhere(RenewItem *items, const int *ask, int n, int elevel,
				TimestampTz cap, RenewOutcome *outcome)
{
	const char *uuid = registry_instance_uuid();
	RenewArg   *args = palloc(n * sizeof(RenewArg));
	RenewOutcome *out = palloc(n * sizeof(RenewOutcome));
	int		   *which = palloc(n * sizeof(int));
	int			nrenewed = 0;

	for (int kind = 0; kind < RLOCK_NUM_KINDS; kind++)
	{
		int			m = 0;

		for (int j = 0; j < n; j++)
		{
			RenewItem  *it = &items[ask[j]];

			if (it->kind != kind)
				continue;
			holds_renew_arg(&args[m], it->key, it->kind,
							psprintf("%s:%d", uuid, it->pid),
							it->renew_lease_ms);
			which[m++] = ask[j];
		}
		if (m == 0)
			continue;
		holds_kind_ops(kind)->renew(args, m, elevel, cap, out, NULL);
		for (int j = 0; j < m; j++)
		{
			outcome[which[j]] = out[j];
			if (out[j] == RENEW_HELD && items[which[j]].renew_lease_ms > 0)
				nrenewed++;
		}
	}
	return nrenewed;
}

/*
 * Is r what the renew script returns for count locks: per lock, the
 * holder's count and the key's PTTL, two integers?  Anything else (a
 * reply that may answer another command) is believed in no part.
 */
static bool
renewal_reply_ok(const RReply *r, int count)
{
	if (r->type != RREPLY_ARRAY || r->elements != 2 * (size_t) count)
		return false;
	for (size_t k = 0; k < r->elements; k++)
		if (r->element[k]->type != RREPLY_INTEGER)
			return false;
	return true;
}

/*
 * One cycle.  Locks whose fixed lease ran out, or that could not be renewed
 * for so long that they must count as lost (registry_fail_closed_at), are
 * marked lost without asking Redis; the others are renewed (or, with a
 * fixed lease, checked) in batches of RENEW_BATCH keys pipelined in one
 * round trip, each batch with its own deadline.  Returns false when Redis
 * could not be reached (reported at elevel); *asked says whether Redis
 * was asked anything at all (a cycle with nothing to renew is no news of
 * an outage ending).  Sets *next_due to when the
 * next cycle is due: a third of the shortest renewal lease (or of
 * rlock.watchdog_timeout), or sooner when a lock's deadline comes first.
 */
static bool
renew_cycle(RedisConn *conn, int elevel, TimestampTz *next_due, bool *asked)
{
	RenewItem  *items;
	int			n;
	int			nask = 0;
	int			nrenewed = 0;
	TimestampTz start = GetCurrentTimestamp();
	int			nbatches;
	int			nrounds = 0;
	RedisCmd   *cmds = NULL;
	RReply **replies;
	RenewOutcome *outcome;
	int64	   *ttl_ms;
	int		   *ask;
	int		   *ask_else;
	int			nelse = 0;
	const char *uuid = registry_instance_uuid();
	int64		period_ms = Max(rlock_watchdog_timeout_ms / 3, 1);
	TimestampTz earliest = DT_NOEND;
	bool		ok = true;

	n = registry_renewal_snapshot(&items);
	outcome = palloc0(Max(n, 1) * sizeof(RenewOutcome));
	ttl_ms = palloc(Max(n, 1) * sizeof(int64));
	for (int i = 0; i < n; i++)
		ttl_ms[i] = -1;
	ask = palloc(Max(n, 1) * sizeof(int));
	ask_else = palloc(Max(n, 1) * sizeof(int));
	for (int i = 0; i < n; i++)
	{
		TimestampTz lost_at = registry_fail_closed_at(items[i].renew_lease_ms,
													  items[i].expires_at);

		if (items[i].expires_at != 0 && start >= lost_at)
		{
			/* no round trip needed to know this one is lost */
			outcome[i] = items[i].renew_lease_ms > 0 ? RENEW_NOT_RENEWED :
				RENEW_EXPIRED;
			continue;
		}
		if (lost_at < earliest)
			earliest = lost_at;
		if (items[i].renew_lease_ms > 0)
			period_ms = Min(period_ms, Max(items[i].renew_lease_ms / 3, 1));
		else if (start - items[i].acquired_at <
				 (TimestampTz) Max(rlock_watchdog_timeout_ms / 3, 1) * 1000)
			continue;			/* a fixed lease is checked once it is older */
		if (!kind_is_local(items[i].kind))
			ask_else[nelse++] = i;	/* a Redlock: on its own masters */
		else
			ask[nask++] = i;
	}

	*asked = (nask > 0);
	if (nask > 0)
	{
		RenewArg   *args = palloc(nask * sizeof(RenewArg));
		int		   *order;
		int		   *starts;

		for (int j = 0; j < nask; j++)
		{
			RenewItem  *it = &items[ask[j]];

			/* the holder's field, how to renew it, and its lease */
			holds_renew_arg(&args[j], it->key, it->kind,
							psprintf("%s:%d", uuid, it->pid),
							it->renew_lease_ms);
		}
		/* in a Cluster: one call per slot, every node's calls at once */
		nbatches = rcmd_renew_calls(args, nask, RENEW_BATCH, &cmds, &order,
									&starts);

		/*
		 * One round trip, or one per RENEW_ROUND_LOCKS locks for a huge
		 * number of them (its replies within the bounds of one).  No
		 * answer after the first lock must count as lost is no answer.
		 */
		for (int b0 = 0, nb = 0; b0 < nbatches; b0 += nb)
		{
			bool		round_ok;

			for (nb = 1; b0 + nb < nbatches &&
				 starts[b0 + nb + 1] - starts[b0] <= RENEW_ROUND_LOCKS; nb++)
				;
			nrounds++;

			replies = NULL;
			rconn_set_deadline_cap(conn, earliest);
			round_ok = route_run(conn, cmds + b0, nb, &replies, elevel, NULL);
			rconn_set_deadline_cap(conn, DT_NOEND);
			stats_add(RLOCK_STAT_RENEWAL_ROUND_TRIPS, route_last_rounds());
			if (!round_ok)
			{
				stats_count(RLOCK_STAT_RENEWAL_FAILURES);
				ok = false;
			}
			/* a Cluster's node that failed leaves its calls without a reply */
			for (int b = b0; replies != NULL && b < b0 + nb; b++)
			{
				RReply	   *r = replies[b - b0];
				int			first = starts[b];
				int			count = starts[b + 1] - first;

				if (r == NULL)
					continue;		/* not renewed: the fail-closed rule runs */
				if (!renewal_reply_ok(r, count))
				{
					/*
					 * An error reply: say so.  Any other shape: the
					 * connection is out of step (rconn_distrust closes it
					 * before its next use).  Nothing of it is believed;
					 * the fail-closed rule still runs.
					 */
					if (r->type != RREPLY_ERROR)
						rconn_distrust(r);
					ereport(LOG,
							(errmsg("rlock watchdog: unexpected reply to a renewal"),
							 r->type == RREPLY_ERROR ?
							 errdetail_internal("%s", r->str) :
							 errdetail_internal("The connection was closed: its replies may answer other commands.")));
					ok = false;
					continue;
				}
				for (int j = 0; j < count; j++)
				{
					int			i = ask[order[first + j]];
					bool		held = (r->element[2 * j]->type == RREPLY_INTEGER &&
										r->element[2 * j]->integer > 0);

					/*
					 * A semaphore's permits are held one by one: one that
					 * Redis no longer has is lost, though others remain.
					 */
					if (held && items[i].kind == RLOCK_KIND_SEMAPHORE &&
						r->element[2 * j]->integer < items[i].holds)
						held = false;

					outcome[i] = held ? RENEW_HELD : RENEW_GONE;
					if (held && r->element[2 * j + 1]->type == RREPLY_INTEGER)
						ttl_ms[i] = r->element[2 * j + 1]->integer;
					if (held && items[i].renew_lease_ms > 0)
						nrenewed++;
				}
			}
		}
	}
	else
		nbatches = 0;
	if (nelse > 0)
		nrenewed += renew_elsewhere(items, ask_else, nelse, elevel, earliest,
									outcome);
	registry_renewed(items, outcome, ttl_ms, n, start, rlock_cancel_on_lost);

	*next_due = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), period_ms);
	if (earliest < *next_due)
		*next_due = earliest;
	if (nbatches == 0)
		return ok;

	stats_add(RLOCK_STAT_RENEWALS, nrenewed);
	stats_add(RLOCK_STAT_RENEWAL_BATCHES, nbatches);
	if (ok)
		stats_count(RLOCK_STAT_RENEWAL_CYCLES);
	stats_add_elapsed(RLOCK_STAT_RENEWAL_US, start);
	ereport(DEBUG1,
			(errmsg_internal("rlock watchdog: renewed %d of %d locks in %.1f ms (%d script calls, %d round trips; %d fixed leases checked)",
							 nrenewed, n,
							 (double) (GetCurrentTimestamp() - start) / 1000.0,
							 nbatches, nrounds, nask - nrenewed)));
	return ok;
}

void
rlock_watchdog_main(Datum arg)
{
	MemoryContext cycle_cxt;
	TimestampTz next_cycle = 0;
	bool		failing = false;
	int			backoff_ms = BACKOFF_MIN_MS;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("rlock watchdog");

	/* backends that strand a release wake the worker (stranded.c) */
	stranded_start();

	cycle_cxt = AllocSetContextCreate(TopMemoryContext, "rlock watchdog cycle",
									  ALLOCSET_DEFAULT_SIZES);
	ereport(LOG,
			(errmsg("rlock watchdog started"),
			 errdetail("Renewing leases of %d ms every %d ms.",
					   rlock_watchdog_timeout_ms,
					   rlock_watchdog_timeout_ms / 3)));
	/* the holds of this server's run before a crash restart, if any */
	crash_cleanup_load();

	for (;;)
	{
		TimestampTz now;
		long		wait_ms;
		long		stranded_ms;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			/* a shorter rlock.watchdog_timeout: cycles at its pace now */
			next_cycle = 0;
		}

		/* Sentinel: where the master is now (at most once a second) */
		route_watch_topology();

		now = GetCurrentTimestamp();
		if (now >= next_cycle)
		{
			MemoryContext old = MemoryContextSwitchTo(cycle_cxt);
			RedisConn  *conn;
			TimestampTz due;
			bool		ok;
			bool		asked;

			/* the configured Redis, after any reload that changed it */
			rconn_close_idle(false);
			conn = route_backend();
			rconn_set_progress_deadlines(conn, true);
			/* report the first failure of an outage at LOG, then quietly */
			ok = renew_cycle(conn, failing ? DEBUG1 : LOG, &due, &asked);
			MemoryContextSwitchTo(old);
			MemoryContextReset(cycle_cxt);

			if (ok && !asked)
			{
				/* nothing asked of Redis: no news of an outage either way */
				next_cycle = due;
			}
			else if (ok)
			{
				if (failing)
					rlock_event(LOG, RLOCK_EVENT_RENEW_RECOVERED, NULL, NULL, NULL,
								"rlock watchdog: Redis answers again, renewals resumed");
				failing = false;
				backoff_ms = BACKOFF_MIN_MS;
				next_cycle = due;
			}
			else
			{
				/* retry sooner than due, backing off, never in a storm */
				if (!failing)
					rlock_event(LOG, RLOCK_EVENT_RENEW_FAILING, NULL, NULL, NULL,
								"rlock watchdog: renewals failing: Redis could not be reached, retrying");
				failing = true;
				next_cycle = Min(due,
								 TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
															 backoff_ms));
				backoff_ms = Min(backoff_ms * 2, BACKOFF_MAX_MS);
			}
		}

		/* releases that could not reach Redis: retried (stranded.c) */
		stranded_ms = stranded_run();
		/*
		 * A crashed run's holds first, then (once none are left) this run's
		 * holds, written where a crash restart finds them.
		 */
		{
			MemoryContext old = MemoryContextSwitchTo(cycle_cxt);

			/* never delaying the next renewal cycle */
			TimestampTz cap = Min(next_cycle,
								  TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
															  HOLDS_FILE_MS));

			if (crash_cleanup_run(cap))
				holds_file_refresh();
			/* who this server is, for the others (not during an outage) */
			if (!failing)
				announce_refresh(cap);
			MemoryContextSwitchTo(old);
			MemoryContextReset(cycle_cxt);
		}

		now = GetCurrentTimestamp();
		wait_ms = (next_cycle > now) ? (long) ((next_cycle - now + 999) / 1000) : 0;
		wait_ms = Min(wait_ms, HOLDS_FILE_MS);
		if (route_follows_failover())
			wait_ms = Min(wait_ms, WATCH_TOPOLOGY_MS);
		if (stranded_ms >= 0)
			wait_ms = Min(wait_ms, stranded_ms);
		if (wait_ms > 0)
		{
			(void) WaitLatch(MyLatch,
							 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 wait_ms, RLOCK_WAIT_EVENT);
			ResetLatch(MyLatch);
		}
	}
}
