/*-------------------------------------------------------------------------
 *
 * holds_table.c
 *	  Backend-local table of the locks this session holds, at session,
 *	  transaction and subtransaction level: finding, entering, counting and
 *	  forgetting holds, deciding which of them the watchdog renews
 *	  (holds_update_renewal), and keeping the shared registry in step.  No Redis
 *	  I/O: the files above it (holds_batch.c, holds_acquire.c,
 *	  holds_release.c, holds_set.c, holds_commit.c, holds_xact.c) talk to
 *	  Redis and record here what it said.
 *
 * Redis keeps one count per holder of a lock; this table splits this
 * backend's count into session-level holds and transaction-level holds per
 * subtransaction, the way the lock manager does for advisory locks.  What
 * Redis and this table say must always agree again:
 *
 *	- Every hold taken is recorded right after Redis granted it; acquire
 *	  reports the resulting count, so a hold Redis no longer knew (lost) or
 *	  a surplus (a replayed acquire) is noticed at once (holds_count_hold).
 *	- An entry whose Redis state is unknown (an acquire interrupted while
 *	  its script was in flight, a release that failed) is "uncertain": it is
 *	  reconciled, by one idempotent script that lowers Redis's count to ours,
 *	  at abort or before the next rlock call, whichever comes first
 *	  (holds_batch.c).
 *	- Commit, rollback and exit release what they end and reconcile every
 *	  uncertain entry in one round trip (holds_xact.c); rollback to a
 *	  savepoint leaves the entries whose holds it ended uncertain.  They run with interrupts held and
 *	  must not fail, so problems are reported as WARNINGs, the entries stay
 *	  uncertain, and leases are the backstop.
 *	- A release Redis answers with an error reply did not happen: the hold
 *	  stays in the table and the call fails.
 *	- A hold enters the shared registry when Redis grants it (waiting takes
 *	  no room there); when the registry is full, the grant is given back.
 *
 * Entries are keyed by (name, kind): one session may hold the read and the
 * write side of one read/write lock, and no other mix (holds_find_conflicting,
 * from holds_kinds.c's rules).
 *
 * Locks taken with an explicit owner token are not tied to this session and
 * are not in this table.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "miscadmin.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "holds/holds.h"
#include "holds/holds_int.h"
#include "base/base.h"

HTAB	   *holds_table = NULL;
MemoryContext holds_batch_cxt = NULL;
int			holds_n_uncertain = 0;	/* entries with uncertain set */
int			holds_n_with_xact = 0;	/* entries with xact_count > 0 */

/* The table's key, (key, kind): the beginning of a HeldLock. */
#define HELD_TAG_SIZE	(offsetof(HeldLock, kind) + sizeof(RlockKind))

static uint32
held_tag_hash(const void *key, Size keysize)
{
	const HeldLock *tag = key;

	return hash_combine((uint32) tag->kind,
						hash_bytes((const unsigned char *) tag->key,
								   strlen(tag->key)));
}

static int
held_tag_match(const void *key1, const void *key2, Size keysize)
{
	const HeldLock *a = key1;
	const HeldLock *b = key2;

	if (a->kind != b->kind)
		return 1;
	return strcmp(a->key, b->key);
}

static void *
held_tag_copy(void *dest, const void *src, Size keysize)
{
	HeldLock   *d = dest;
	const HeldLock *t = src;

	strlcpy(d->key, t->key, sizeof(d->key));
	d->kind = t->kind;
	return dest;
}

static void
create_table(void)
{
	HASHCTL		ctl;

	/* what ends holds is in place before the first one (holds_xact.c) */
	holds_need_end_callbacks();
	ctl.keysize = HELD_TAG_SIZE;
	ctl.entrysize = sizeof(HeldLock);
	ctl.hash = held_tag_hash;
	ctl.match = held_tag_match;
	ctl.keycopy = held_tag_copy;
	ctl.hcxt = TopMemoryContext;
	holds_table = hash_create("rlock held locks", 64, &ctl,
							 HASH_ELEM | HASH_FUNCTION | HASH_COMPARE |
							 HASH_KEYCOPY | HASH_CONTEXT);
	holds_batch_cxt = AllocSetContextCreate(TopMemoryContext, "rlock batch",
									  ALLOCSET_SMALL_SIZES);
}

static void
make_tag(HeldLock *tag, const char *key, RlockKind kind)
{
	strlcpy(tag->key, key, sizeof(tag->key));
	tag->kind = kind;
}

/* held_tag_hash's hash of key, before the kind is combined in. */
static inline uint32
key_hash(const char *key)
{
	/* (as much of it as a tag holds: make_tag's copy is what is hashed) */
	return hash_bytes((const unsigned char *) key,
					  strnlen(key, RLOCK_MAX_KEY_LEN));
}

/* The entry of (key, kind), whose key hashes to keyhash (key_hash). */
static HeldLock *
find_hashed(const char *key, uint32 keyhash, RlockKind kind)
{
	HeldLock	tag;

	make_tag(&tag, key, kind);
	return hash_search_with_hash_value(holds_table, &tag,
									   hash_combine((uint32) kind, keyhash),
									   HASH_FIND, NULL);
}

/* Does the table have no entry at all?  (Most calls find it so.) */
static inline bool
table_empty(void)
{
	return holds_table == NULL || hash_get_num_entries(holds_table) == 0;
}

HeldLock *
holds_find(const char *key, RlockKind kind)
{
	if (table_empty())
		return NULL;
	return find_hashed(key, key_hash(key), kind);
}

/*
 * An entry of this session for the same name as another kind that cannot
 * share it (read and write are the two sides of one read/write lock).
 */
HeldLock *
holds_find_conflicting(const char *key, RlockKind kind)
{
	uint32		keyhash;

	if (table_empty())
		return NULL;
	/* (the key is hashed once for all the kinds) */
	keyhash = key_hash(key);
	for (int k = 0; k < RLOCK_NUM_KINDS; k++)
	{
		HeldLock   *h;

		if (k == kind || rlock_kinds_compatible(kind, k))
			continue;
		h = find_hashed(key, keyhash, k);
		if (h != NULL && (holds_total(h) > 0 || h->uncertain))
			return h;
	}
	return NULL;
}

/*
 * Find or create the entry of a lock (with no holds yet).  It enters the
 * shared registry only once Redis grants a hold (holds_add).
 */
HeldLock *
holds_enter(const char *key, RlockKind kind)
{
	HeldLock	tag;
	HeldLock   *h;
	bool		found;

	if (holds_table == NULL)
		create_table();
	make_tag(&tag, key, kind);
	h = hash_search(holds_table, &tag, HASH_ENTER, &found);
	/* a new entry: everything after its key zero (no holds, NULL, false) */
	if (!found)
		memset(&h->session_count, 0,
			   sizeof(HeldLock) - offsetof(HeldLock, session_count));
	return h;
}

/*
 * Publish h's holds in the shared registry (rlock_locks, the watchdog).
 * With new_expiry, h->expires_at was just learned (an acquisition, a
 * release or check that set the TTL) and replaces the registry's;
 * otherwise the registry keeps its own, which the watchdog's renewals move
 * on while our copy grows old.  Returns false when a first hold finds the
 * registry full.
 */
bool
holds_sync_registry(HeldLock *h, bool new_expiry)
{
	holds_update_renewal(h);
	return registry_sync(h->key, h->kind, h->session_count, h->xact_count,
						 h->lease_ms,
						 h->renew_lease_ms,
						 new_expiry ? h->expires_at : 0);
}

void
holds_set_uncertain(HeldLock *h, bool uncertain)
{
	if (h->uncertain != uncertain)
		holds_n_uncertain += uncertain ? 1 : -1;
	h->uncertain = uncertain;
	h->settle_at_end = uncertain;
}

void
holds_clear_xact(HeldLock *h)
{
	if (h->xact_count > 0)
		holds_n_with_xact--;
	h->xact_count = 0;
	h->nxact = 0;
}

/* Remove an entry that holds nothing and is not uncertain. */
void
holds_drop_if_unused(HeldLock *h)
{
	if (holds_total(h) > 0 || h->uncertain)
		return;
	/* (a read side that goes no longer renews the write side) */
	holds_update_renewal(h);
	if (h->xact)
		pfree(h->xact);
	registry_remove(h->key, h->kind);
	hash_search(holds_table, h, HASH_REMOVE, NULL);
}

/* The lock is gone in Redis: forget every hold of it. */
void
holds_forget(HeldLock *h)
{
	holds_note_lost_xact(h);
	holds_clear_xact(h);
	h->session_count = 0;
	holds_update_renewal(h);
	holds_set_uncertain(h, false);
	holds_drop_if_unused(h);
}

/*
 * The lock must count as lost, but Redis may still have this holder in it
 * (the fail-closed rule, a lease run out a moment ago): forget every hold
 * and have Redis forget them too, at the next reconcile.
 */
void
holds_forget_and_reconcile(HeldLock *h)
{
	holds_note_lost_xact(h);
	holds_clear_xact(h);
	h->session_count = 0;
	holds_update_renewal(h);
	registry_remove(h->key, h->kind);
	holds_set_uncertain(h, true);
}

void
holds_report_lost(RlockKind kind, const char *name, const char *detail)
{
	char		msg[RLOCK_MAX_KEY_LEN + 128];

	/* (the ring's detail: the WARNING's message and its detail) */
	snprintf(msg, sizeof(msg), kind == RLOCK_KIND_SEMAPHORE ?
			 "permits of semaphore \"%s%s\" were lost before this session gave them back" :
			 "%slock \"%s\" was lost before this session released it",
			 kind == RLOCK_KIND_READ ? "read " :
			 kind == RLOCK_KIND_WRITE ? "write " : "", name);
	(void) rlock_event_record(RLOCK_EVENT_LOST, rlock_kind_name(kind), name,
							  rlock_backend_holder(), "%s: %s", msg, detail);
	ereport(WARNING, (errmsg_internal("%s", msg), errdetail("%s", detail)));
}

/* Take back the hold holds_count_hold just counted (scope as given). */
void
holds_take_back(HeldLock *h, const HoldRequest *req)
{
	int			levels = req->levels;

	if (req->scope == RLOCK_SCOPE_SESSION)
	{
		h->session_count -= levels;
		if (req->watchdog)
			h->session_renewed = Max(h->session_renewed - levels, 0);
	}
	else
	{
		h->xact[h->nxact - 1].count -= levels;
		if (req->watchdog)
			h->xact[h->nxact - 1].renewed -= levels;
		if (h->xact[h->nxact - 1].count == 0)
			h->nxact--;
		h->xact_count -= levels;
		if (h->xact_count == 0)
			holds_n_with_xact--;
	}
}

/*
 * Record one hold granted by Redis, which reported redis_count holds for
 * this holder after granting it.  The acquire script was sent at
 * req->sent_at and set the lock's TTL to req->lease_ms, so Redis keeps it
 * at least until sent_at + lease.  Returns false, with nothing counted and
 * the entry uncertain (Redis has the hold: the next reconcile gives it
 * back), when the registry has no room for a first hold.
 */
bool
holds_count_hold(HeldLock *h, const HoldRequest *req, int redis_count,
				 const char *name)
{
	TimestampTz until;

	holds_set_uncertain(h, false);
	if (redis_count < holds_total(h) + req->levels)
	{
		/* Redis had forgotten our earlier holds: they were lost. */
		if (!registry_is_lost(h->key, h->kind))
			stats_count(RLOCK_STAT_LOCKS_LOST);
		holds_report_lost(h->kind, name, psprintf("Redis no longer knew %d earlier hold(s); it expired or was released by someone else.",
								   holds_total(h)));
		holds_note_lost_xact(h);
		holds_clear_xact(h);
		h->session_count = 0;
		/* a new lock: its expiry is the acquisition's, not the old one's */
		(void) holds_sync_registry(h, false);
	}

	h->session_renewed = Min(h->session_renewed, h->session_count);
	if (req->scope == RLOCK_SCOPE_SESSION)
	{
		h->session_count += req->levels;
		if (req->watchdog)
			h->session_renewed += req->levels;
	}
	else
	{
		SubTransactionId subid = GetCurrentSubTransactionId();

		if (h->nxact > 0 && h->xact[h->nxact - 1].subid == subid)
		{
			h->xact[h->nxact - 1].count += req->levels;
			if (req->watchdog)
				h->xact[h->nxact - 1].renewed += req->levels;
		}
		else
		{
			if (h->nxact >= h->maxxact)
			{
				int			newmax = Max(4, h->maxxact * 2);

				h->xact = h->xact
					? repalloc(h->xact, newmax * sizeof(XactHolds))
					: MemoryContextAlloc(TopMemoryContext,
										 newmax * sizeof(XactHolds));
				h->maxxact = newmax;
			}
			h->xact[h->nxact].subid = subid;
			h->xact[h->nxact].count = req->levels;
			h->xact[h->nxact].renewed = req->watchdog ? req->levels : 0;
			h->nxact++;
		}
		if (h->xact_count == 0)
			holds_n_with_xact++;
		h->xact_count += req->levels;
	}
	if (req->watchdog)
		h->watchdog_lease_ms = req->lease_ms;
	h->lease_ms = req->lease_ms;
	h->high_count = Max(h->high_count, holds_total(h));

	/*
	 * The scripts never lower a held lock's TTL (scripts.c, RAISE_TTL): a
	 * re-entry with a shorter lease keeps the earlier holds' expiry (a
	 * semaphore's permits too, at one expiry, the latest: scripts_sync.c;
	 * believed for their lease less the clock margin, holds_int.h).
	 */
	until = req->sent_at + (req->lease_ms - holds_clock_margin_ms(h->kind,
							req->watchdog, req->lease_ms)) * 1000;
	if (holds_total(h) == req->levels || until > h->expires_at)
		h->expires_at = until;

	if (!holds_sync_registry(h, true))
	{
		/* the registry is full: the reconcile gives the hold back */
		holds_take_back(h, req);
		holds_set_uncertain(h, true);
		return false;
	}
	/* a replayed acquire left a surplus: the reconcile brings it down */
	if (redis_count > holds_total(h))
		holds_set_uncertain(h, true);
	return true;
}

void
holds_registry_full(const char *name)
{
	ereport(ERROR,
			(errcode(ERRCODE_OUT_OF_MEMORY),
			 errmsg("out of shared memory for lock \"%s\"", name),
			 errdetail("The rlock registry has room for %d held locks, %ld of them reserved for superusers (rlock.superuser_reserved_locks).",
					   rlock_max_locks,
					   rlock_max_locks - registry_limit(false)),
			 errhint("You might need to increase rlock.max_locks.")));
}

/*
 * Is h lost: found gone by the watchdog, its fixed lease run out, or not
 * renewed for so long that it counts as lost (registry.c)?  Then say so,
 * forget it (making sure Redis forgets it too), and return true.  Called
 * by every call on a name this session holds.
 */
bool
holds_check_lost(HeldLock *h, const char *name)
{
	if (holds_total(h) == 0 || !registry_is_lost(h->key, h->kind))
		return false;
	holds_report_lost(h->kind, name, "It expired, was force-released, Redis restarted, or it could not be renewed in time.");
	holds_forget_and_reconcile(h);
	return true;
}

/*
 * holds_check_lost for every hold of this session on key as kind or as a
 * kind that shares the key with it (the other side of a read/write lock):
 * an acquisition must neither count on nor refuse for a hold that is gone.
 * A write acquisition whose read hold's lease ran out would otherwise
 * refuse as an upgrade, while Redis may still keep that read field.
 */
void
holds_check_lost_on_key(const char *key, RlockKind kind, const char *name)
{
	for (int k = 0; k < RLOCK_NUM_KINDS; k++)
	{
		HeldLock   *h;

		if (!rlock_kinds_compatible(kind, k))
			continue;
		h = holds_find(key, k);
		if (h != NULL)
			holds_check_lost(h, name);
	}
}

/* How many of h's holds were taken without a lease. */
static int
renewed_holds(HeldLock *h)
{
	int			n = Min(h->session_renewed, h->session_count);

	for (int i = 0; i < h->nxact; i++)
		n += h->xact[i].renewed;
	return n;
}

/*
 * The lease the watchdog renews h with (0: it only checks h), from what h
 * holds now: while a hold of it taken without a lease remains.  Once the
 * last such hold ends, the holds with a fixed lease that remain are no
 * longer renewed: they keep the expiry the last renewal gave them (the
 * registry's) and end there.  The write side of a read/write lock is
 * renewed as long as this session's read side is: a read hold's renewal
 * raises the TTL of the key that carries the write too (one key, one TTL,
 * as in Redisson), so the write hold lives as long, and rlock must not
 * call it lost meanwhile.
 */
static int64
renewal_lease(HeldLock *h)
{
	HeldLock   *r;

	if (holds_total(h) == 0)
		return 0;
	if (renewed_holds(h) > 0)
		return h->watchdog_lease_ms;
	if (h->kind != RLOCK_KIND_WRITE)
		return 0;
	r = holds_find(h->key, RLOCK_KIND_READ);
	if (r != NULL && holds_total(r) > 0 && renewed_holds(r) > 0)
		return r->watchdog_lease_ms;
	return 0;
}

/*
 * Set h's renewal from what it holds (renewal_lease); after a change of the
 * read side, the write side's too, with its registry entry.
 */
void
holds_update_renewal(HeldLock *h)
{
	HeldLock   *w;
	int64		was;

	h->renew_lease_ms = renewal_lease(h);
	if (h->kind != RLOCK_KIND_READ)
		return;
	w = holds_find(h->key, RLOCK_KIND_WRITE);
	if (w == NULL)
		return;
	was = w->renew_lease_ms;
	w->renew_lease_ms = renewal_lease(w);
	if (w->renew_lease_ms == was)
		return;

	/*
	 * Renewed along with the read side from now on: the read hold that was
	 * just taken raised the key's TTL (scripts_rw.c), so the write lives at
	 * least as long.
	 */
	if (was == 0 && h->expires_at > w->expires_at)
		w->expires_at = h->expires_at;
	(void) registry_sync(w->key, w->kind, w->session_count, w->xact_count,
						 w->lease_ms, w->renew_lease_ms,
						 w->renew_lease_ms > 0 ? w->expires_at : 0);
}

/*
 * Lease to give what remains of a lock (after holds were removed from the
 * table): the renewal lease when the watchdog still renews it, else 0
 * (keep the key's TTL).  Changes nothing: a release Redis refuses puts the
 * counts back, and the renewal with them.
 */
int64
holds_keep_lease(HeldLock *h)
{
	return renewal_lease(h);
}

/*
 * After holds_settle: refuse to go on with a lock whose holds Redis could
 * not be asked about (in a Cluster, its master is down; elsewhere the
 * settle has raised the ERROR already).
 */
void
holds_require_settled(const LockName *ln, RlockKind kind)
{
	HeldLock   *h = holds_find(ln->key, kind);
	char	   *node;

	if (h == NULL || !h->uncertain)
		return;
	node = route_node_address(ln->key);
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("lock \"%s\" could not be reconciled with Redis at %s",
					ln->name, node ? node : "its node"),
			 errdetail("An earlier call on it did not finish, and the node that serves it did not answer since: what this session holds of it is not known."),
			 errhint("The next call asks again; check the Redis node of this lock.")));
}

/* ERROR: this session holds ln's name as another kind that cannot share it. */
void
holds_held_as_other_kind(const LockName *ln, HeldLock *other)
{
	ereport(ERROR,
			(errcode(ERRCODE_WRONG_OBJECT_TYPE),
			 other->kind == RLOCK_KIND_SEMAPHORE ?
			 errmsg("\"%s\" is a semaphore this session holds permits of",
					ln->name) :
			 errmsg("lock \"%s\" is held by this session in %s mode",
					ln->name, rlock_kind_name(other->kind))));
}
