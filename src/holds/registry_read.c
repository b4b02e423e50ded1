/*-------------------------------------------------------------------------
 *
 * registry_read.c
 *	  What other processes read from the registry of held locks
 *	  (registry.c): rlock_locks' snapshot, and the watchdog's cycle, which
 *	  copies out the locks to renew and records what Redis said of them.
 *
 * Every reader copies what it needs under the registry's LWLock, in shared
 * mode, and lets go before any Redis I/O; the watchdog takes it in
 * exclusive mode to record a cycle's outcome, a chunk of entries at a time.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "storage/lwlock.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

#include "holds/holds.h"
#include "holds/holds_int.h"
#include "holds/registry_int.h"
#include "base/base.h"

/* Entries the watchdog updates per hold of the registry's lock. */
#define RENEWED_CHUNK		1000

/* ----------------------------------------------------------------
 * Readers
 * ----------------------------------------------------------------
 */

/*
 * Copy what rlock_locks shows of every held entry: the fixed-size fields
 * and the used bytes of each key, nothing more, so that the shared lock is
 * held briefly and a registry of rlock.max_locks entries fits in memory.
 */
int
registry_snapshot(RegistryRow **rows)
{
	HASH_SEQ_STATUS seq;
	RegistryEntry *e;
	RegistryRow *out;
	int			n = 0;

	registry_require("rlock_locks");
	LWLockAcquire(rlock_shared->lock, LW_SHARED);
	out = palloc_extended(Max(1, hash_get_num_entries(registry_hash)) *
						  sizeof(RegistryRow), MCXT_ALLOC_HUGE);
	hash_seq_init(&seq, registry_hash);
	while ((e = hash_seq_search(&seq)) != NULL)
	{
		RegistryRow *r;

		if (e->session_count + e->xact_count == 0)
			continue;

		/*
		 * A release to zero in flight: Redis may already have handed the
		 * lock to a waiter, whose entry shows it; this one is no longer a
		 * holder (were the release refused, it comes back).  A stranded one
		 * shows: Redis still has it.
		 */
		if (e->state != REGISTRY_STRANDED &&
			pg_atomic_read_u32(&e->release_seq) % 2 == 1 &&
			pg_atomic_read_u32(&e->releasing_to) == 0)
			continue;
		r = &out[n++];
		r->pid = e->pid;
		r->kind = e->kind;
		r->dboid = e->dboid;
		r->state = e->state;
		r->session_count = e->session_count;
		r->xact_count = e->xact_count;
		r->lease_ms = e->lease_ms;
		r->acquired_at = e->acquired_at;
		r->renewed_at = e->renewed_at;
		r->key = pstrdup(e->key);
	}
	LWLockRelease(rlock_shared->lock);
	*rows = out;
	return n;
}

/* ----------------------------------------------------------------
 * The watchdog
 * ----------------------------------------------------------------
 */

/*
 * Copy out the locks the watchdog looks after: every held lock not yet
 * known lost, renewed when some hold was taken without a lease, else
 * checked.  Returns how many (palloc'd array in *items).
 */
int
registry_renewal_snapshot(RenewItem **items)
{
	HASH_SEQ_STATUS seq;
	RegistryEntry *e;
	RenewItem  *out;
	int			n = 0;

	LWLockAcquire(rlock_shared->lock, LW_SHARED);
	out = palloc_extended(Max(1, hash_get_num_entries(registry_hash)) *
						  sizeof(RenewItem), MCXT_ALLOC_HUGE);
	hash_seq_init(&seq, registry_hash);
	while ((e = hash_seq_search(&seq)) != NULL)
	{
		if (e->state != REGISTRY_HELD ||
			e->session_count + e->xact_count == 0)
			continue;
		out[n].pid = e->pid;
		out[n].kind = e->kind;
		out[n].acquired_at = e->acquired_at;
		out[n].renew_lease_ms = e->renew_lease_ms;
		out[n].expires_at = e->expires_at;
		out[n].release_seq = pg_atomic_read_u32(&e->release_seq);
		out[n].holds = e->session_count + e->xact_count;
		out[n].key = pstrdup(e->key);
		n++;
	}
	LWLockRelease(rlock_shared->lock);
	*items = out;
	return n;
}

static const char *
lost_detail(RenewOutcome outcome)
{
	switch (outcome)
	{
		case RENEW_EXPIRED:
			return "Its fixed lease ran out.";
		case RENEW_NOT_RENEWED:
			return "Its lease could not be renewed for too long (Redis unreachable or slow): it counts as lost before it can expire in Redis.";
		default:
			return "Redis no longer had the lock: it expired, was force-released, or Redis restarted.";
	}
}

/*
 * Record the outcome of a watchdog cycle: renewed locks get renewed_at and
 * a later expiry (sent_at, when the renewal was sent, plus its lease); a
 * lock held with less TTL left than recorded (ttl_ms[i] >= 0, the key's
 * PTTL right after the script: another client lowered it, e.g. a Redisson
 * read unlock) gets that lower expiry at once, so that rlock never believes
 * in it for longer than Redis keeps it (SPEC 6); the
 * ones found gone, run out or not renewed in time are marked lost, logged,
 * and (with rlock.cancel_on_lost) their session's statement is cancelled.
 * An entry that changed meanwhile (released, or released and taken again)
 * is left alone.
 */
void
registry_renewed(RenewItem *items, const RenewOutcome *outcome,
				 const int64 *ttl_ms, int n, TimestampTz sent_at,
				 bool cancel_on_lost)
{
	bool	   *report = palloc0(Max(1, n) * sizeof(bool));
	int			nlost = 0;
	TimestampTz now = GetCurrentTimestamp();

	LWLockAcquire(rlock_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < n; i++)
	{
		RegistryEntry tag;
		RegistryEntry *e;

		if (outcome[i] == RENEW_UNKNOWN)
			continue;
		/* let backends in now and then: the registry may be large */
		if (i > 0 && i % RENEWED_CHUNK == 0)
		{
			LWLockRelease(rlock_shared->lock);
			LWLockAcquire(rlock_shared->lock, LW_EXCLUSIVE);
		}
		registry_make_tag(&tag, items[i].pid, items[i].kind, items[i].key);
		e = hash_search(registry_hash, &tag, HASH_FIND, NULL);
		if (e == NULL || e->acquired_at != items[i].acquired_at ||
			e->state != REGISTRY_HELD ||
			e->session_count + e->xact_count == 0)
			continue;
		if (outcome[i] == RENEW_HELD)
		{
			/* the TTL was read after the script ran, so after sent_at */
			TimestampTz left = ttl_ms[i] >= 0 ?
				sent_at + ttl_ms[i] * 1000 : DT_NOEND;

			if (e->renew_lease_ms > 0)
			{
				TimestampTz exp = sent_at + e->renew_lease_ms * 1000;

				e->renewed_at = now;
				if (exp > e->expires_at)
					e->expires_at = exp;
			}
			if (left < e->expires_at)
				e->expires_at = left;
			continue;
		}
		/* gone because its holder released it since? not a loss */
		if (pg_atomic_read_u32(&e->release_seq) != items[i].release_seq ||
			items[i].release_seq % 2 == 1)
			continue;
		registry_hold_ends(e);
		e->state = REGISTRY_LOST;
		nlost++;
		report[i] = true;

		/*
		 * Cancel while the entry is there, under the lock: its backend
		 * removes its entries under the lock before it exits, so e->pid is
		 * still that backend (after the lock, the pid could be another
		 * process's).  kill() does not block.
		 */
		if (cancel_on_lost)
		{
			/* the note first: the cancel's message names the lock */
			registry_cancel_note(e->proc_slot, e->pid, e->kind, e->key,
								 outcome[i]);
			kill(e->pid, SIGINT);
		}
	}
	LWLockRelease(rlock_shared->lock);
	stats_add(RLOCK_STAT_LOCKS_LOST, nlost);

	for (int i = 0; i < n; i++)
	{
		char		msg[RLOCK_MAX_KEY_LEN + 256];
		char		holder[RLOCK_EVENT_HOLDER_LEN];

		if (!report[i])
			continue;
		snprintf(holder, sizeof(holder), "%s:%d", rlock_shared->instance_uuid,
				 items[i].pid);
		if (items[i].kind == RLOCK_KIND_SEMAPHORE)
			snprintf(msg, sizeof(msg),
					 "rlock watchdog: permits of semaphore \"%s\" held by %s (pid %d) were lost",
					 items[i].key, holder, items[i].pid);
		else
			snprintf(msg, sizeof(msg),
					 "rlock watchdog: lock \"%s\" held by %s (pid %d) was lost",
					 items[i].key, holder, items[i].pid);
		/* the ring's detail: the LOG line's message and its detail */
		(void) rlock_event_record(RLOCK_EVENT_LOST,
								  rlock_kind_name(items[i].kind),
								  items[i].key, holder, "%s: %s", msg,
								  lost_detail(outcome[i]));
		ereport(LOG,
				(errmsg_internal("%s", msg),
				 errdetail("%s", lost_detail(outcome[i])),
				 cancel_on_lost ?
				 errhint("The session's running statement is cancelled (rlock.cancel_on_lost).") : 0));
	}
	pfree(report);
}
