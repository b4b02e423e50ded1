/*-------------------------------------------------------------------------
 *
 * holds_cleanup.c
 *	  The clean-ups an ERROR left to do in Redis (holds_on_abort), and the
 *	  hook that puts the end-of-holds callbacks (holds_xact.c) in place the
 *	  first time this session has something for them to end.
 *
 * Clean-ups are recorded by PG_CATCH blocks of the lock kinds (a fair
 * waiter leaving its queue, a waiter leaving its channel), which must not
 * do Redis I/O there; they run from the abort paths, at backend exit
 * (holds_xact.c) and before the next rlock call (holds_settle).
 *
 * The transaction, subtransaction and exit callbacks are registered with
 * PostgreSQL lazily: by the first held-lock table (holds_table.c) or the
 * first clean-up, whichever comes first.  Both sit below holds_xact.c, so
 * holds_xact.c hands its registration down here when the library is
 * loaded (holds_init), and they call it through this hook.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "holds/holds.h"
#include "holds/holds_int.h"

#define MAX_CLEANUPS			4

static HoldsCleanupFn cleanups[MAX_CLEANUPS];
static int	ncleanups = 0;

/* holds_xact.c's registration of its callbacks (idempotent) */
static void (*register_end_callbacks) (void) = NULL;

/* Called once, when the library is loaded (holds_init). */
void
holds_set_end_callbacks(void (*fn) (void))
{
	register_end_callbacks = fn;
}

/* Make sure the callbacks that end holds are registered. */
void
holds_need_end_callbacks(void)
{
	if (register_end_callbacks == NULL)
		elog(ERROR, "rlock's end-of-transaction callbacks are not wired in");
	register_end_callbacks();
}

/*
 * Register fn to run from the abort paths, at exit and before the next
 * rlock call (once is enough; later calls with the same fn are ignored).
 */
void
holds_on_abort(HoldsCleanupFn fn)
{
	/* a wait for an owner token may come before any held-lock table */
	holds_need_end_callbacks();
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
