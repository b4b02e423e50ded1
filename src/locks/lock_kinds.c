/*-------------------------------------------------------------------------
 *
 * lock_kinds.c
 *	  The lock kinds register their operations with the held-lock table:
 *	  locks_init, called from _PG_init.
 *
 * The held-lock table (holds/holds_kinds.c) owns the table of kinds and
 * never calls a lock kind's file: each kind's operations (how its holds
 * are released, reconciled, settled and renewed) are handed down here,
 * once, when the library is loaded, with the builder of the renew script's
 * calls (scripts.c), which the check before COMMIT runs.  Every process that
 * runs rlock's code has loaded the library, so _PG_init has run in it (or
 * in the postmaster it was forked from).
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "holds/holds.h"
#include "locks/locks.h"
#include "base/base.h"

void
locks_init(void)
{
	holds_register_kind(RLOCK_KIND_EXCLUSIVE, &exclusive_ops);
	holds_register_kind(RLOCK_KIND_READ, &read_ops);
	holds_register_kind(RLOCK_KIND_WRITE, &write_ops);
	holds_register_kind(RLOCK_KIND_FAIR, &fair_ops);
	holds_register_kind(RLOCK_KIND_REDLOCK, &redlock_ops);
	holds_register_kind(RLOCK_KIND_SEMAPHORE, &semaphore_ops);
	holds_register_renew_calls(rcmd_renew_calls);
}
