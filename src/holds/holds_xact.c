/*-------------------------------------------------------------------------
 *
 * holds_xact.c
 *	  When the holds of the held-lock table end: the transaction,
 *	  subtransaction and backend-exit callbacks, and DISCARD ALL.
 *
 * These paths follow PostgreSQL's rules for what runs at transaction end:
 *
 *	- Before COMMIT (XACT_EVENT_PRE_COMMIT, interrupts still allowed) the
 *	  transaction-level locks are checked (holds_commit.c).  An ERROR there
 *	  rolls the transaction back, which is what it is for.
 *	- At COMMIT, ROLLBACK and exit, interrupts are held and an ERROR would
 *	  become a PANIC (for a transaction with an xid) or be lost: nothing
 *	  here may ERROR, problems are WARNINGs, and every round trip is capped
 *	  (connection_bounds.c, RLOCK_UNINTERRUPTIBLE_CAP_MS) whatever
 *	  rlock.command_timeout says.
 *	- At rollback to a savepoint no Redis I/O happens at all (the caller
 *	  may still be handling the ERROR that caused it): the holds it ends
 *	  leave the table and are settled later (holds_abort_subxact).
 *	- No Redis I/O happens inside PG_CATCH or PG_FINALLY: code that is
 *	  interrupted there records what Redis must still be told (a fair waiter
 *	  leaving its queue, a waiter leaving its channel) with holds_on_abort's
 *	  functions (holds_cleanup.c), which run from the abort paths below, at
 *	  exit, and before the next rlock call.
 *	- DISCARD ALL releases the session's locks, as it releases advisory
 *	  locks: connection poolers rely on it to hand a clean backend on.
 *
 * This file is the top of the holds folder: the files below never call it.
 * The callbacks are registered with PostgreSQL the first time there is a
 * table or a clean-up (holds_cleanup.c calls holds_register_callbacks
 * through the hook holds_init gives it when the library is loaded).
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

#include "redis/redis.h"
#include "holds/holds.h"
#include "holds/holds_int.h"
#include "base/base.h"

static bool callbacks_registered = false;

/* Where run_guarded copies an ERROR (its first block is kept: room). */
static MemoryContext guard_cxt = NULL;

static ProcessUtility_hook_type prev_ProcessUtility = NULL;

/* ----------------------------------------------------------------
 * Ending holds
 * ----------------------------------------------------------------
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

/*
 * End transaction-level holds (subid == InvalidSubTransactionId: all of
 * them, at the top-level end) and reconcile every uncertain entry (an
 * acquire interrupted in flight, a subtransaction that rolled back: nothing
 * may stay in Redis unknown to us).  Called with
 * interrupts held, so failures are WARNINGs.
 */
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

/*
 * A subtransaction rolled back: no Redis I/O here.  The caller may still be
 * handling the ERROR that ended it (its data on the error stack), and an
 * ERROR of ours caught here would have to empty that stack and would skip
 * its thrower's own clean-up.  So the subtransaction's holds leave the
 * table, and their entries become uncertain: the end of the top-level
 * transaction, or the next rlock call, whichever comes first, lowers
 * Redis's counts to the table's with the reconcile every uncertain entry
 * gets (holds_batch.c).  The registry counts what the table counts at once,
 * so that the watchdog renews nothing the subtransaction took.  The
 * clean-ups an ERROR left (a channel, a fair queue) wait for the same
 * moment.  Nothing here can fail: table and shared memory only.
 */
static void
holds_abort_subxact(SubTransactionId subid)
{
	HASH_SEQ_STATUS seq;
	HeldLock   *h;

	if (holds_table == NULL || holds_n_with_xact == 0)
		return;
	hash_seq_init(&seq, holds_table);
	while ((h = hash_seq_search(&seq)) != NULL)
	{
		if (drop_xact_holds(h, subid) == 0)
			continue;
		holds_set_uncertain(h, true);
		(void) holds_sync_registry(h, false);
	}
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
			h->xact[h->nxact - 2].renewed += h->xact[h->nxact - 1].renewed;
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
			holds_set_uncertain(h, false);
			holds_drop_if_unused(h);
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

static void
holds_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			holds_verify_xact();
			break;
		case XACT_EVENT_PRE_PREPARE:
			holds_refuse_lost_xact("prepare");
			if (holds_any_xact())
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot PREPARE a transaction that holds rlock transaction-level locks")));
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			run_guarded(holds_end_xact, InvalidSubTransactionId, false);
			holds_lost_xact_reset();
			registry_cancel_note_reset();
			break;
		case XACT_EVENT_PREPARE:
			holds_lost_xact_reset();
			registry_cancel_note_reset();
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			run_guarded(cleanups_then_end_xact, InvalidSubTransactionId, false);
			holds_lost_xact_reset();
			registry_cancel_note_reset();
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
			holds_abort_subxact(mySubid);
			holds_lost_xact_subxact_end(mySubid, parentSubid, false);
			break;
		case SUBXACT_EVENT_COMMIT_SUB:
			holds_subxact_commit(mySubid, parentSubid);
			holds_lost_xact_subxact_end(mySubid, parentSubid, true);
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

/*
 * Called when the held-lock table is created, and by holds_on_abort
 * (through holds_cleanup.c's hook).
 */
static void
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

/*
 * When the library is loaded (_PG_init, before anything else): hand the
 * registration of the callbacks down to the files that need them first.
 */
void
holds_init(void)
{
	holds_set_end_callbacks(holds_register_callbacks);
}
