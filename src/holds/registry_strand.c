/*-------------------------------------------------------------------------
 *
 * registry_strand.c
 *	  Stranded releases in the registry of held locks: a release that could
 *	  not reach Redis (an outage, at rlock_release, at transaction end or at
 *	  session exit) leaves its registry entry behind, marked stranded, for
 *	  the background worker to finish (src/worker/stranded.c).
 *
 * Without this, such a lock stays in Redis for the rest of its lease while
 * nobody holds it, and nothing says so (SPEC 6).  The entry keeps what it
 * had: its key, kind and pid (the holder is "<instance uuid>:<pid>") and
 * the expiry the watchdog last moved on (expires_at), which bounds how
 * long the worker tries.  Its session no longer holds it: the entry leaves
 * the session's table, the watchdog no longer renews or checks it (only
 * REGISTRY_HELD entries are), rlock_locks shows it as "stranded", and the
 * backend's exit leaves it in place (registry.c).  Only the worker removes
 * it, once Redis answered the release or the lease ran out.  Until then
 * the backend refuses to take the name again (holds_strand.c): the entry's
 * hash key, (pid, kind, key), would otherwise be its new hold's.
 *
 * Shared memory only, under the registry's LWLock: marking an entry is
 * safe in commit, abort and exit callbacks.  A count of stranded entries
 * lets the worker skip the scan when there are none.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

#include "holds/holds.h"
#include "holds/holds_int.h"
#include "holds/registry_int.h"
#include "base/base.h"

/* ----------------------------------------------------------------
 * The backend's side
 * ----------------------------------------------------------------
 */

/*
 * Hand this backend's entry of key as kind over to the worker: its
 * release was not answered.  Returns the lease left in Redis, in ms (> 0:
 * the entry is stranded); 0 when the lease has run out already (the entry
 * is removed: nothing is left to release); -1 when there is no entry to
 * strand (not preloaded, never registered, already lost or stranded), and
 * the caller does as before.
 */
int64
registry_strand(const char *key, RlockKind kind)
{
	RegistryEntry tag;
	RegistryEntry *e;
	TimestampTz now = GetCurrentTimestamp();
	int64		left_ms = -1;

	if (registry_hash == NULL)
		return -1;
	registry_make_tag(&tag, MyProcPid, kind, key);
	LWLockAcquire(rlock_shared->lock, LW_EXCLUSIVE);
	e = hash_search(registry_hash, &tag, HASH_FIND, NULL);
	if (e != NULL && e->state == REGISTRY_HELD)
	{
		registry_hold_ends(e);
		/* (an expiry never learned: the longest lease it may have) */
		if (e->expires_at == 0)
			e->expires_at = TimestampTzPlusMilliseconds(now,
														Max(e->lease_ms,
															e->renew_lease_ms));
		left_ms = Max((e->expires_at - now) / 1000, 0);
		if (left_ms == 0)
			hash_search(registry_hash, &tag, HASH_REMOVE, NULL);
		else
		{
			e->state = REGISTRY_STRANDED;
			e->stranded_at = now;
			/* no release in flight any more: the worker's now */
			if (pg_atomic_read_u32(&e->release_seq) % 2 == 1)
				pg_atomic_fetch_add_u32(&e->release_seq, 1);
			pg_atomic_fetch_add_u32(&rlock_shared->nstranded, 1);
		}
	}
	LWLockRelease(rlock_shared->lock);

	/* the worker may be asleep until its next renewal: wake it */
	if (left_ms > 0)
	{
		Latch	   *latch = rlock_shared->worker_latch;

		if (latch != NULL)
			SetLatch(latch);
	}
	return left_ms;
}

/* Has this backend a stranded release of key, as any kind? */
bool
registry_is_stranded(const char *key)
{
	RegistryEntry *e;
	bool		found = false;

	if (registry_hash == NULL ||
		pg_atomic_read_u32(&rlock_shared->nstranded) == 0)
		return false;
	LWLockAcquire(rlock_shared->lock, LW_SHARED);
	for (int kind = 0; kind < RLOCK_NUM_KINDS && !found; kind++)
	{
		RegistryEntry tag;

		registry_make_tag(&tag, MyProcPid, (RlockKind) kind, key);
		e = hash_search(registry_hash, &tag, HASH_FIND, NULL);
		found = (e != NULL && e->state == REGISTRY_STRANDED);
	}
	LWLockRelease(rlock_shared->lock);
	return found;
}

/* ----------------------------------------------------------------
 * The worker's side
 * ----------------------------------------------------------------
 */

/*
 * The worker's latch, which a backend sets when it strands a release (its
 * own process latch, in shared memory; NULL when it exits).
 */
void
registry_set_worker_latch(struct Latch *latch)
{
	if (rlock_shared != NULL)
		rlock_shared->worker_latch = latch;
}

/* Are there stranded releases at all?  (No lock taken.) */
bool
registry_any_stranded(void)
{
	return rlock_shared != NULL &&
		pg_atomic_read_u32(&rlock_shared->nstranded) > 0;
}

/* Copy out every stranded entry; returns how many (palloc'd *items). */
int
registry_stranded_snapshot(StrandedItem **items)
{
	HASH_SEQ_STATUS seq;
	RegistryEntry *e;
	StrandedItem *out;
	int			n = 0;
	int			room;

	LWLockAcquire(rlock_shared->lock, LW_SHARED);
	/* (entries are stranded under the exclusive lock: the count holds) */
	room = (int) pg_atomic_read_u32(&rlock_shared->nstranded);
	out = palloc(Max(room, 1) * sizeof(StrandedItem));
	hash_seq_init(&seq, registry_hash);
	while ((e = hash_seq_search(&seq)) != NULL)
	{
		if (e->state != REGISTRY_STRANDED || n >= room)
			continue;
		out[n].pid = e->pid;
		out[n].kind = e->kind;
		out[n].stranded_at = e->stranded_at;
		out[n].expires_at = e->expires_at;
		out[n].key = pstrdup(e->key);
		n++;
	}
	LWLockRelease(rlock_shared->lock);
	*items = out;
	return n;
}

/* The worker is done with a stranded entry: released, or run out. */
void
registry_stranded_settled(const StrandedItem *item)
{
	RegistryEntry tag;
	RegistryEntry *e;

	registry_make_tag(&tag, item->pid, item->kind, item->key);
	LWLockAcquire(rlock_shared->lock, LW_EXCLUSIVE);
	e = hash_search(registry_hash, &tag, HASH_FIND, NULL);
	if (e != NULL && e->state == REGISTRY_STRANDED &&
		e->stranded_at == item->stranded_at)
	{
		hash_search(registry_hash, &tag, HASH_REMOVE, NULL);
		pg_atomic_fetch_sub_u32(&rlock_shared->nstranded, 1);
	}
	LWLockRelease(rlock_shared->lock);
}
