/*-------------------------------------------------------------------------
 *
 * holds_kinds.c
 *	  The table of lock kinds, as the held-lock table sees them: their
 *	  names, which of them one session may hold under one name at once, and
 *	  the operations each kind registers when the library is loaded
 *	  (locks_init, from _PG_init).
 *
 * The bookkeeping (holds_*.c), the check before COMMIT and the watchdog
 * never call a lock kind's file: they look the kind up here.  A kind whose
 * locks live on rlock.redis_url gives the release and reconcile commands;
 * a kind whose locks live on servers of its own (the Redlock's masters)
 * gives how to settle and renew them there.  The renew script, which one
 * call runs for locks of every kind that lives on rlock.redis_url, is
 * registered once (holds_register_renew_calls).
 *
 * The names and the compatibility of the kinds are data, known without any
 * registration: rlock_locks can name every kind in the registry.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "holds/holds.h"
#include "holds/holds_int.h"
#include "base/base.h"

/* Filled in by the kinds (locks_init). */
static const RlockKindOps *kind_table[RLOCK_NUM_KINDS];
static HoldsRenewCallsFn renew_calls_fn = NULL;

/* A kind's operations, for the held-lock table to call (at load time). */
void
holds_register_kind(RlockKind kind, const RlockKindOps *ops)
{
	if ((int) kind < 0 || kind >= RLOCK_NUM_KINDS)
		elog(ERROR, "unknown rlock kind %d", (int) kind);
	kind_table[kind] = ops;
}

const RlockKindOps *
holds_kind_ops(RlockKind kind)
{
	if ((int) kind < 0 || kind >= RLOCK_NUM_KINDS)
		elog(ERROR, "unknown rlock kind %d", (int) kind);
	if (kind_table[kind] == NULL)
		elog(ERROR, "rlock kind \"%s\" has no registered operations",
			 rlock_kind_name(kind));
	return kind_table[kind];
}

const char *
rlock_kind_name(RlockKind kind)
{
	/* as rlock_locks shows them: the words of the histograms' kinds */
	if ((int) kind < 0 || kind >= RLOCK_NUM_KINDS)
		return "unknown";
	return stats_hist_kind_name((int) kind);
}

/*
 * May one session hold one name as both kinds?  Only the two sides of a
 * read/write lock (a writer may also read); every other mix is refused,
 * a Redlock included: its masters may be the very Redis of the others.
 */
bool
rlock_kinds_compatible(RlockKind a, RlockKind b)
{
	if (a == b)
		return true;
	return (a == RLOCK_KIND_READ || a == RLOCK_KIND_WRITE) &&
		(b == RLOCK_KIND_READ || b == RLOCK_KIND_WRITE);
}

/*
 * The renew script's argument for the lock at key, held by holder as kind:
 * renewed with renew_lease_ms, or only checked (0: a fixed lease).
 */
void
holds_renew_arg(RenewArg *arg, const char *key, RlockKind kind,
				const char *holder, int64 renew_lease_ms)
{
	arg->key = key;
	arg->field = lockname_holder_field(kind, holder);
	if (kind == RLOCK_KIND_SEMAPHORE)
		arg->how = renew_lease_ms == 0 ? "t" : "s";	/* the permit ids */
	else
		arg->how = renew_lease_ms == 0 ? "c" : kind == RLOCK_KIND_READ ? "r" : "x";
	arg->lease_ms = renew_lease_ms;
}

/* How the renew script's calls are built (at load time). */
void
holds_register_renew_calls(HoldsRenewCallsFn fn)
{
	renew_calls_fn = fn;
}

/* The renew script's calls for args[0..n-1], as HoldsRenewCallsFn says. */
int
holds_renew_calls(const RenewArg *args, int n, int maxper, RedisCmd **cmds,
				  int **order, int **starts)
{
	if (renew_calls_fn == NULL)
		elog(ERROR, "rlock's renew script has no registered builder");
	return renew_calls_fn(args, n, maxper, cmds, order, starts);
}
