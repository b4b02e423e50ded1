/*-------------------------------------------------------------------------
 *
 * holds_xact.c
 *	  When the holds of holds.c end: the transaction, subtransaction and
 *	  backend-exit callbacks, the check before COMMIT, DISCARD ALL, and the
 *	  clean-ups an ERROR left to do in Redis.
 *
 * These paths follow PostgreSQL's rules for what runs at transaction end:
 *
 *	- Before COMMIT (XACT_EVENT_PRE_COMMIT, interrupts still allowed) the
 *	  transaction-level locks are checked in one round trip
 *	  (rlock.verify_on_commit): each must still be held and have enough
 *	  lease left to cover the commit, COMMIT_MIN_LEASE_MS; a lock renewed by
 *	  the watchdog is extended by the same script, a fixed lease is not.
 *	  The node that answers must still be the master: the sentinels are
 *	  asked in the same parallel round trip, in a Cluster the other masters
 *	  right after it (master_confirm.c).
 *	  An ERROR there rolls the transaction back, which is what it is for.
 *	- At COMMIT, ROLLBACK, rollback to savepoint and exit, interrupts are
 *	  held and an ERROR would become a PANIC (for a transaction with an
 *	  xid) or be lost: nothing here may ERROR, problems are WARNINGs, and
 *	  every round trip is capped (connection.c, RLOCK_UNINTERRUPTIBLE_CAP_MS)
 *	  whatever rlock.command_timeout says.
 *	- No Redis I/O happens inside PG_CATCH or PG_FINALLY: code that is
 *	  interrupted there records what Redis must still be told (a fair waiter
 *	  leaving its queue, a waiter leaving its channel) with holds_on_abort's
 *	  functions, which run from the abort paths below, at exit, and before
 *	  the next rlock call.
 *	- DISCARD ALL releases the session's locks, as it releases advisory
 *	  locks: connection poolers rely on it to hand a clean backend on.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "storage/ipc.h"
#include "tcop/utility.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "redis/redis.h"
#include "holds/holds.h"
#include "holds/holds_int.h"
#include "locks/locks.h"
#include "base/base.h"

/*
 * The lease a transaction-level lock must have left after the check before
 * COMMIT (rlock.h).  A commit that stalls longer (a synchronous standby, a
 * stopped server) can still outlive the lease; fencing tokens close that
 * window.
 */
#define COMMIT_MIN_LEASE_MS		RLOCK_COMMIT_MIN_LEASE_MS

#define MAX_CLEANUPS			4

static HoldsCleanupFn cleanups[MAX_CLEANUPS];
static int	ncleanups = 0;
static bool callbacks_registered = false;

/* Where run_guarded copies an ERROR (its first block is kept: room). */
static MemoryContext guard_cxt = NULL;

static ProcessUtility_hook_type prev_ProcessUtility = NULL;

/*
 * Register fn to run from the abort paths, at exit and before the next
 * rlock call (once is enough; later calls with the same fn are ignored).
 */
void
holds_on_abort(HoldsCleanupFn fn)
{
	/* a wait for an owner token may come before any held-lock table */
	holds_register_callbacks();
	for (int i = 0; i < ncleanups; i++)
		if (cleanups[i] == fn)
			return;
	if (ncleanups >= MAX_CLEANUPS)
		elog(ERROR, "too many rlock clean-up functions");
	cleanups[ncleanups++] = fn;
}

/* Run every registered clean-up (each does nothing when it has nothing). */
void
holds_run_cleanups(void)
{
	for (int i = 0; i < ncleanups; i++)
		cleanups[i] ();
}

/* ----------------------------------------------------------------
 * Ending holds
 * ----------------------------------------------------------------
 */

/*
 * End transaction-level holds: all of them (subid == InvalidSubTransactionId)
 * or those of one aborted subtransaction; and reconcile every uncertain
 * entry (an acquire interrupted in flight, even in a subtransaction that
 * rolled back, must never stay in Redis unknown to us).  Called with
 * interrupts held, so failures are WARNINGs.
 */
/*
 * Take out of h the transaction-level holds that end with subid's
 * (sub)transaction (InvalidSubTransactionId: the top-level transaction, all
 * of them).  Returns how many.
 */
static int
drop_xact_holds(HeldLock *h, SubTransactionId subid)
{
	int			levels = 0;

	if (subid == InvalidSubTransactionId)
	{
		levels = h->xact_count;
		holds_clear_xact(h);
		return levels;
	}
	/* the holds of that subtransaction are the innermost ones */
	while (h->nxact > 0 && h->xact[h->nxact - 1].subid == subid)
	{
		levels += h->xact[h->nxact - 1].count;
		h->nxact--;
	}
	h->xact_count -= levels;
	if (levels > 0 && h->xact_count == 0)
		holds_n_with_xact--;
	return levels;
}

static void
holds_end_xact(SubTransactionId subid)
{
	HASH_SEQ_STATUS seq;
	HeldLock   *h;
	BatchItem  *items;
	int			n = 0;

	if (holds_table == NULL || (holds_n_with_xact == 0 && holds_n_uncertain == 0))
		return;

	items = holds_batch_items();
	hash_seq_init(&seq, holds_table);
	while ((h = hash_seq_search(&seq)) != NULL)
	{
		int			levels = 0;

		levels = drop_xact_holds(h, subid);

		/*
		 * An entry left uncertain is reconciled at the end of the
		 * transaction that left it so, once: while Redis cannot be reached,
		 * later transactions do not each wait for it (the next rlock call
		 * settles it, or fails).
		 */
		if (levels > 0 || (h->uncertain && h->settle_at_end))
			holds_batch_add(items, &n, h, levels, false);
	}
	/* tried at a top-level end: from now on the next rlock call settles it */
	if (subid == InvalidSubTransactionId)
		for (int i = 0; i < n; i++)
			items[i].h->settle_at_end = false;
	/* items lives in batch_cxt, which holds_run_batch resets */
	holds_run_batch(items, n, WARNING);
}

/* A subtransaction committed: its parent now owns its holds. */
static void
holds_subxact_commit(SubTransactionId subid, SubTransactionId parent)
{
	HASH_SEQ_STATUS seq;
	HeldLock   *h;

	if (holds_table == NULL || holds_n_with_xact == 0)
		return;
	hash_seq_init(&seq, holds_table);
	while ((h = hash_seq_search(&seq)) != NULL)
	{
		if (h->nxact == 0 || h->xact[h->nxact - 1].subid != subid)
			continue;
		if (h->nxact >= 2 && h->xact[h->nxact - 2].subid == parent)
		{
			h->xact[h->nxact - 2].count += h->xact[h->nxact - 1].count;
			h->nxact--;
		}
		else
			h->xact[h->nxact - 1].subid = parent;
	}
}

/*
 * Release every hold (session_only: only session-level ones, as DISCARD
 * ALL does outside a transaction) in one round trip, reconciling uncertain
 * entries.  Failures are WARNINGs; whatever Redis could not be told is
 * forgotten anyway, so that nothing renews it and its lease ends it.
 */
static void
holds_release_everything(bool session_only)
{
	HASH_SEQ_STATUS seq;
	HeldLock   *h;
	BatchItem  *items;
	int			n = 0;

	if (holds_table == NULL || hash_get_num_entries(holds_table) == 0)
		return;
	items = holds_batch_items();
	hash_seq_init(&seq, holds_table);
	while ((h = hash_seq_search(&seq)) != NULL)
	{
		int			levels = session_only ? h->session_count : holds_total(h);

		if (!session_only)
			holds_clear_xact(h);
		h->session_count = 0;
		if (levels > 0 || h->uncertain)
			holds_batch_add(items, &n, h, levels, false);
	}
	holds_run_batch(items, n, WARNING);

	/* what Redis could not be told about: stop believing in it */
	hash_seq_init(&seq, holds_table);
	while ((h = hash_seq_search(&seq)) != NULL)
	{
		if (h->session_count == 0 && (h->uncertain || h->xact_count == 0))
		{
			h->renew_lease_ms = 0;
			holds_set_uncertain(h, false);
			holds_drop_if_unused(h);
		}
	}
}

static bool
holds_any_xact(void)
{
	return holds_table != NULL && holds_n_with_xact > 0;
}

/* The entries with transaction-level holds (palloc'd array). */
static int
holds_xact_snapshot(HeldLock ***hs)
{
	HASH_SEQ_STATUS seq;
	HeldLock   *h;
	int			n = 0;

	*hs = palloc(Max(1, holds_n_with_xact) * sizeof(HeldLock *));
	if (holds_table == NULL)
		return 0;
	hash_seq_init(&seq, holds_table);
	while ((h = hash_seq_search(&seq)) != NULL)
	{
		if (h->xact_count > 0)
			(*hs)[n++] = h;
	}
	return n;
}

/*
 * The check before COMMIT found h lost, or with too little lease left to
 * cover the commit: forget it (Redis too, at the next reconcile) and
 * refuse the COMMIT.
 */
static void
holds_lost_at_commit(HeldLock *h, const char *why)
{
	char	   *key = pstrdup(h->key);

	if (!registry_is_lost(h->key, h->kind))
		stats_count(RLOCK_STAT_LOCKS_LOST);
	holds_forget_and_reconcile(h);
	ereport(ERROR,
			(errcode(ERRCODE_TRANSACTION_ROLLBACK),
			 errmsg("cannot commit: lock \"%s\" held by this transaction was lost",
					key),
			 errdetail("%s", why),
			 errhint("Writes guarded by a lost lock are never committed (rlock.verify_on_commit).")));
}

/* The check before COMMIT extended h's lease. */
static void
holds_renewed_at_commit(HeldLock *h, TimestampTz expires_at)
{
	if (expires_at > h->expires_at)
	{
		h->expires_at = expires_at;
		(void) holds_sync_registry(h, true);
	}
}

/*
 * verify_xact_holds for the locks of kinds that live on servers of their
 * own (a Redlock): each must still be held there (by a majority), with
 * enough lease left, asked through the kind's renew.
 */
static void
verify_elsewhere(HeldLock **hs, int n)
{
	const char *holder = rlock_backend_holder();
	RenewArg   *args = palloc(n * sizeof(RenewArg));
	RenewOutcome *outcome = palloc(n * sizeof(RenewOutcome));
	int64	   *left = palloc(n * sizeof(int64));
	TimestampTz sent_at;

	for (int kind = 0; kind < RLOCK_NUM_KINDS; kind++)
	{
		HeldLock  **of = palloc(n * sizeof(HeldLock *));
		int			m = 0;

		for (int i = 0; i < n; i++)
		{
			HeldLock   *h = hs[i];

			if (h->kind != kind)
				continue;
			rcmd_renew_arg(&args[m], h->key, h->kind, holder,
						   h->renew_lease_ms);
			of[m++] = h;
		}
		if (m == 0)
			continue;
		sent_at = GetCurrentTimestamp();
		holds_kind_ops(kind)->renew(args, m, WARNING, DT_NOEND, outcome,
									left);
		for (int i = 0; i < m; i++)
		{
			int64		left_ms = left[i] -
				(GetCurrentTimestamp() - sent_at) / 1000;

			if (outcome[i] != RENEW_HELD)
				holds_lost_at_commit(of[i],
									 "Fewer than a majority of its servers could confirm that they still held it; the transaction is rolled back.");
			if (left[i] >= 0 && left_ms < COMMIT_MIN_LEASE_MS)
				holds_lost_at_commit(of[i],
									 psprintf("Its lease had %lld ms left, less than the %d ms a commit is given; the transaction is rolled back.",
											  (long long) Max(left_ms, 0),
											  COMMIT_MIN_LEASE_MS));
			if (of[i]->renew_lease_ms > 0)
				holds_renewed_at_commit(of[i],
										sent_at + of[i]->renew_lease_ms * 1000);
		}
	}
}

/* ----------------------------------------------------------------
 * The callbacks
 * ----------------------------------------------------------------
 */

/*
 * What a callback that failed leaves: every connection is dropped (no
 * I/O); the holds of the (sub)transaction that ended (subid, as for
 * drop_xact_holds; at exit, every hold) are taken out of the table even if
 * their release was not sent.  Every entry is left uncertain, for the next
 * rlock call to settle with Redis (giving back what the table no longer
 * counts), and the registry counts what the table counts, so that the
 * watchdog renews nothing more: with no next call, leases end the rest.
 */
static void
holds_abandon_after_failure(SubTransactionId subid, bool at_exit)
{
	HASH_SEQ_STATUS seq;
	HeldLock   *h;

	rconn_close_idle(true);
	if (holds_table == NULL)
		return;
	hash_seq_init(&seq, holds_table);
	while ((h = hash_seq_search(&seq)) != NULL)
	{
		(void) drop_xact_holds(h, subid);
		if (at_exit)
			h->session_count = 0;
		if (holds_total(h) == 0)
			h->renew_lease_ms = 0;
		holds_set_uncertain(h, true);
		(void) holds_sync_registry(h, false);
	}
}

/*
 * Run fn(subid) where no ERROR may escape (COMMIT, ROLLBACK, exit: it
 * would become a PANIC, or a FATAL in exit processing), whatever fails
 * (a wait set on fd exhaustion, an allocation, a reply): the ERROR becomes
 * a WARNING.  No Redis I/O in the PG_CATCH.  The ERROR reset the interrupt
 * holdoff counts, which these paths rely on: they are put back.
 */
static void
run_guarded(void (*fn) (SubTransactionId), SubTransactionId subid,
			bool at_exit)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	uint32		holdoff = InterruptHoldoffCount;
	uint32		cancel_holdoff = QueryCancelHoldoffCount;
	uint32		crit = CritSectionCount;
	volatile bool failed = false;

	PG_TRY();
	{
		fn(subid);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		InterruptHoldoffCount = holdoff;
		QueryCancelHoldoffCount = cancel_holdoff;
		CritSectionCount = crit;
		/* a context of its own keeps room for this, even out of memory */
		MemoryContextSwitchTo(guard_cxt);
		edata = CopyErrorData();
		ereport(WARNING,
				(errcode(edata->sqlerrcode),
				 errmsg("%s", edata->message ? edata->message : "rlock failed"),
				 edata->detail ? errdetail("%s", edata->detail) : 0,
				 errhint("rlock dropped its Redis connections; what Redis could not be told ends with its lease.")));
		MemoryContextSwitchTo(oldcxt);
		FlushErrorState();
		MemoryContextReset(guard_cxt);
		failed = true;
	}
	PG_END_TRY();
	if (failed)
		holds_abandon_after_failure(subid, at_exit);
}

/* holds_release_everything(false), for run_guarded */
static void
release_everything_at_exit(SubTransactionId unused)
{
	holds_run_cleanups();
	holds_release_everything(false);
}

/* holds_end_xact with the abort clean-ups first, for run_guarded */
static void
cleanups_then_end_xact(SubTransactionId subid)
{
	holds_run_cleanups();
	holds_end_xact(subid);
}

/*
 * Before COMMIT: check in one round trip that Redis still has every lock
 * held at transaction level, with enough lease left to cover the commit
 * (see COMMIT_MIN_LEASE_MS).  An ERROR here rolls the transaction back.
 */
static void
verify_xact_holds(void)
{
	HeldLock  **hs;
	RenewArg   *args;
	RedisCmd   *cmds;
	RReply	  **replies;
	int		   *order;
	int		   *starts;
	int			ncalls;
	const char *holder = rlock_backend_holder();
	TimestampTz sent_at;
	TimestampTz now;
	char	   *why;
	int			n;

	if (!rlock_verify_on_commit || !holds_any_xact())
		return;
	holds_settle();
	n = holds_xact_snapshot(&hs);
	if (n == 0)
		return;
	for (int i = 0; i < n; i++)
	{
		if (registry_is_lost(hs[i]->key, hs[i]->kind))
			holds_lost_at_commit(hs[i],
								 "It expired, was force-released, Redis restarted, or it could not be renewed in time while the transaction held it; the transaction is rolled back.");
	}

	/* the kinds that live on servers of their own are asked there */
	{
		int			nlocal = 0;
		int			nelse = 0;
		HeldLock  **elsewhere = palloc(n * sizeof(HeldLock *));

		for (int i = 0; i < n; i++)
		{
			if (kind_is_local(hs[i]->kind))
				hs[nlocal++] = hs[i];
			else
				elsewhere[nelse++] = hs[i];
		}
		if (nelse > 0)
			verify_elsewhere(elsewhere, nelse);
		n = nlocal;
		if (n == 0)
			return;
	}

	args = palloc(n * sizeof(RenewArg));
	for (int i = 0; i < n; i++)
	{
		HeldLock   *h = hs[i];

		rcmd_renew_arg(&args[i], h->key, h->kind, holder, h->renew_lease_ms);
	}
	/* one call (in a Cluster: one per slot, every node at once) */
	ncalls = rcmd_renew_calls(args, n, n, &cmds, &order, &starts);
	sent_at = GetCurrentTimestamp();
	/* ... and, after a failover, is the node that answers still master? */
	if (!route_run_confirmed(route_backend(), cmds, ncalls, &replies,
							 n == 1 ? hs[0]->key : NULL, &why))
		holds_lost_at_commit(hs[0], psprintf("%s The transaction is rolled back.",
											 why));
	now = GetCurrentTimestamp();
	for (int g = 0; g < ncalls; g++)
	{
		RReply	   *r = replies[g];
		int			first = starts[g];
		int			count = starts[g + 1] - first;
		const char *what = count == 1 ? hs[order[first]]->key : NULL;

		if (r->type == RREPLY_ERROR)
			rconn_reply_error(r, ERROR, what);
		if (r->type != RREPLY_ARRAY || r->elements != 2 * count)
			rconn_unexpected_reply(r, what);
		for (int j = 0; j < count; j++)
		{
			HeldLock   *h = hs[order[first + j]];
			RReply	   *c = r->element[2 * j];
			RReply	   *t = r->element[2 * j + 1];
			int64		left;

			if (c->type != RREPLY_INTEGER || t->type != RREPLY_INTEGER)
				rconn_unexpected_reply(r, h->key);
			if (c->integer < holds_total(h))
				holds_lost_at_commit(h,
									 "It expired, was force-released, or Redis restarted while the transaction held it; the transaction is rolled back.");

			/* what is left for sure: Redis measured it somewhere in the trip */
			left = t->integer - (now - sent_at) / 1000;
			if (t->integer >= 0 && left < COMMIT_MIN_LEASE_MS)
				holds_lost_at_commit(h,
									 psprintf("Its lease had %lld ms left, less than the %d ms a commit is given; the transaction is rolled back.",
											  (long long) Max(left, 0),
											  COMMIT_MIN_LEASE_MS));
			if (h->renew_lease_ms > 0)
				holds_renewed_at_commit(h, sent_at + h->renew_lease_ms * 1000);
		}
	}

	/* in a Cluster: do the other masters agree that those nodes own them? */
	if (route_is_cluster())
	{
		const char **keys = palloc(n * sizeof(char *));
		int			bad;

		for (int i = 0; i < n; i++)
			keys[i] = hs[i]->key;
		bad = route_confirm_owners(keys, n, &why);
		if (bad >= 0)
			holds_lost_at_commit(hs[bad], psprintf("%s The transaction is rolled back.",
												   why));
	}
}

static void
holds_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			verify_xact_holds();
			break;
		case XACT_EVENT_PRE_PREPARE:
			if (holds_any_xact())
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot PREPARE a transaction that holds rlock transaction-level locks")));
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			run_guarded(holds_end_xact, InvalidSubTransactionId, false);
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			run_guarded(cleanups_then_end_xact, InvalidSubTransactionId, false);
			break;
		default:
			break;
	}
}

static void
holds_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					   SubTransactionId parentSubid, void *arg)
{
	switch (event)
	{
		case SUBXACT_EVENT_ABORT_SUB:
			run_guarded(cleanups_then_end_xact, mySubid, false);
			break;
		case SUBXACT_EVENT_COMMIT_SUB:
			holds_subxact_commit(mySubid, parentSubid);
			break;
		default:
			break;
	}
}

/* Backend exit: release everything this session holds. */
static void
holds_exit_callback(int code, Datum arg)
{
	run_guarded(release_everything_at_exit, InvalidSubTransactionId, true);
	registry_remove_backend();
}

/* Called when the held-lock table is created, and by holds_on_abort. */
void
holds_register_callbacks(void)
{
	if (callbacks_registered)
		return;
	guard_cxt = AllocSetContextCreate(TopMemoryContext,
									  "rlock callback errors",
									  8 * 1024, 8 * 1024, 64 * 1024);
	RegisterXactCallback(holds_xact_callback, NULL);
	RegisterSubXactCallback(holds_subxact_callback, NULL);
	before_shmem_exit(holds_exit_callback, (Datum) 0);
	callbacks_registered = true;
}

/*
 * DISCARD ALL: after PostgreSQL has done its part (it refuses to run in a
 * transaction block, so only session-level holds can remain), release
 * the session's locks.
 */
static void
rlock_ProcessUtility(RLOCK_UTILITY_PARAMS)
{
	Node	   *parsetree = pstmt->utilityStmt;
	bool		discard_all = IsA(parsetree, DiscardStmt) &&
		((DiscardStmt *) parsetree)->target == DISCARD_ALL;

	if (prev_ProcessUtility)
		prev_ProcessUtility(RLOCK_UTILITY_ARGS);
	else
		standard_ProcessUtility(RLOCK_UTILITY_ARGS);

	if (discard_all)
	{
		holds_run_cleanups();
		holds_release_everything(true);
	}
}

void
holds_install_hooks(void)
{
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = rlock_ProcessUtility;
}
