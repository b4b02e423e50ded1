/*-------------------------------------------------------------------------
 *
 * lock_kinds.c
 *	  The table of lock kinds: their names, which of them one session may
 *	  hold under one name at once, and the operations each kind registers
 *	  for the held-lock table (holds*.c), the check before COMMIT and the
 *	  watchdog.
 *
 * The bookkeeping never includes a lock kind's file: it looks the kind up
 * here.  A kind whose locks live on rlock.redis_url gives the release and
 * reconcile commands; a kind whose locks live on servers of its own (the
 * Redlock's masters) also gives how to settle and renew them there.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "holds/holds.h"
#include "locks/locks.h"
#include "base/base.h"

static const RlockKindOps *const kind_table[RLOCK_NUM_KINDS] = {
	[RLOCK_KIND_EXCLUSIVE] = &exclusive_ops,
	[RLOCK_KIND_READ] = &read_ops,
	[RLOCK_KIND_WRITE] = &write_ops,
	[RLOCK_KIND_FAIR] = &fair_ops,
	[RLOCK_KIND_REDLOCK] = &redlock_ops,
};

const RlockKindOps *
holds_kind_ops(RlockKind kind)
{
	if ((int) kind < 0 || kind >= RLOCK_NUM_KINDS)
		elog(ERROR, "unknown rlock kind %d", (int) kind);
	return kind_table[kind];
}

const char *
rlock_kind_name(RlockKind kind)
{
	if ((int) kind < 0 || kind >= RLOCK_NUM_KINDS)
		return "unknown";
	return kind_table[kind]->name;
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
