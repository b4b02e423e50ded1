/*-------------------------------------------------------------------------
 *
 * holds.c
 *	  Backend-local table of the locks this session holds, at session,
 *	  transaction and subtransaction level, and the callbacks that end
 *	  holds: transaction end, subtransaction abort and backend exit.
 *
 * Redis keeps one count per holder of a lock; this table splits this
 * backend's count into session-level holds and transaction-level holds per
 * subtransaction, the way the lock manager does for advisory locks.  What
 * Redis and this table say must always agree again:
 *
 *	- Every hold taken is recorded right after Redis granted it; acquire
 *	  reports the resulting count, so a hold Redis no longer knew (lost) or
 *	  a surplus (a replayed acquire) is noticed at once.
 *	- An entry whose Redis state is unknown (an acquire interrupted while
 *	  its script was in flight, a release that failed) is "uncertain": it is
 *	  reconciled, by one idempotent script that lowers Redis's count to ours,
 *	  at abort or before the next rlock call, whichever comes first.
 *	- Commit, rollback, rollback to savepoint and backend exit release what
 *	  they end, all names in one pipelined round trip.  They run with
 *	  interrupts held and must not fail, so problems are reported as
 *	  WARNINGs, the entries stay uncertain, and leases are the backstop.
 *
 * Entries are keyed by (name, kind): one session may hold the read and the
 * write side of one read/write lock, and no other mix (holds_prepare_acquire).
 * Every lock kind's acquire script goes through holds_run_acquire and every
 * release through holds_release, so the bookkeeping above lives here once;
 * the kinds (lock_*.c) provide their scripts through RlockKindOps.
 *
 * Locks taken with an explicit owner token are not tied to this session and
 * are not in this table.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "common/hashfn.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "holds.h"
#include "lock_exclusive.h"
#include "lock_fair.h"
#include "lock_rw.h"
#include "registry.h"
#include "stats.h"

static HTAB *held_locks = NULL;
static MemoryContext batch_cxt = NULL;
static int	n_uncertain = 0;	/* entries with uncertain set */
static int	n_with_xact = 0;	/* entries with xact_count > 0 */

static void holds_xact_callback(XactEvent event, void *arg);
static void holds_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
								   SubTransactionId parentSubid, void *arg);
static void holds_exit_callback(int code, Datum arg);
static void holds_drop_if_unused(HeldLock *h);

static const RlockKindOps *
kind_ops(RlockKind kind)
{
	switch (kind)
	{
		case RLOCK_KIND_EXCLUSIVE:
			return &exclusive_ops;
		case RLOCK_KIND_READ:
		case RLOCK_KIND_WRITE:
			return &rw_ops;
		case RLOCK_KIND_FAIR:
			return &fair_ops;
	}
	elog(ERROR, "unknown rlock kind %d", (int) kind);
	return NULL;				/* keep compiler quiet */
}

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
holds_init(void)
{
	HASHCTL		ctl;

	ctl.keysize = HELD_TAG_SIZE;
	ctl.entrysize = sizeof(HeldLock);
	ctl.hash = held_tag_hash;
	ctl.match = held_tag_match;
	ctl.keycopy = held_tag_copy;
	ctl.hcxt = TopMemoryContext;
	held_locks = hash_create("rlock held locks", 64, &ctl,
							 HASH_ELEM | HASH_FUNCTION | HASH_COMPARE |
							 HASH_KEYCOPY | HASH_CONTEXT);
	batch_cxt = AllocSetContextCreate(TopMemoryContext, "rlock batch",
									  ALLOCSET_SMALL_SIZES);
	RegisterXactCallback(holds_xact_callback, NULL);
	RegisterSubXactCallback(holds_subxact_callback, NULL);
	before_shmem_exit(holds_exit_callback, (Datum) 0);
}

static void
make_tag(HeldLock *tag, const char *key, RlockKind kind)
{
	strlcpy(tag->key, key, sizeof(tag->key));
	tag->kind = kind;
}

HeldLock *
holds_find(const char *key, RlockKind kind)
{
	HeldLock	tag;

	if (held_locks == NULL)
		return NULL;
	make_tag(&tag, key, kind);
	return hash_search(held_locks, &tag, HASH_FIND, NULL);
}

/*
 * An entry of this session for the same name as another kind that cannot
 * share it (read and write are the two sides of one read/write lock).
 */
HeldLock *
holds_find_conflicting(const char *key, RlockKind kind)
{
	for (int k = 0; k < RLOCK_NUM_KINDS; k++)
	{
		HeldLock   *h;

		if (k == kind || rlock_kinds_compatible(kind, k))
			continue;
		h = holds_find(key, k);
		if (h != NULL && (holds_total(h) > 0 || h->uncertain))
			return h;
	}
	return NULL;
}

/* Find or create the entry of a lock (with no holds yet). */
HeldLock *
holds_enter(const char *key, RlockKind kind)
{
	HeldLock	tag;
	HeldLock   *h;
	bool		found;

	if (held_locks == NULL)
		holds_init();
	make_tag(&tag, key, kind);
	h = hash_search(held_locks, &tag, HASH_FIND, NULL);
	if (h != NULL)
		return h;

	/* a full shared registry refuses the lock before Redis is asked */
	registry_reserve(key, kind);
	h = hash_search(held_locks, &tag, HASH_ENTER, &found);
	if (!found)
	{
		h->session_count = 0;
		h->xact_count = 0;
		h->nxact = 0;
		h->maxxact = 0;
		h->xact = NULL;
		h->watchdog = false;
		h->lease_ms = 0;
		h->uncertain = false;
	}
	return h;
}

/* Publish h's holds in the shared registry (rlock_locks, the watchdog). */
static void
sync_registry(HeldLock *h)
{
	registry_sync(h->key, h->kind, h->session_count, h->xact_count,
				  h->watchdog, h->lease_ms);
}

static void
set_uncertain(HeldLock *h, bool uncertain)
{
	if (h->uncertain != uncertain)
		n_uncertain += uncertain ? 1 : -1;
	h->uncertain = uncertain;
}

static void
clear_xact(HeldLock *h)
{
	if (h->xact_count > 0)
		n_with_xact--;
	h->xact_count = 0;
	h->nxact = 0;
}

/* Remove an entry that holds nothing and is not uncertain. */
static void
holds_drop_if_unused(HeldLock *h)
{
	if (holds_total(h) > 0 || h->uncertain)
		return;
	if (h->xact)
		pfree(h->xact);
	registry_remove(h->key, h->kind);
	hash_search(held_locks, h, HASH_REMOVE, NULL);
}

/* The lock is gone in Redis: forget every hold of it. */
void
holds_forget(HeldLock *h)
{
	clear_xact(h);
	h->session_count = 0;
	set_uncertain(h, false);
	holds_drop_if_unused(h);
}

/*
 * Record one hold granted by Redis, which reported redis_count holds for
 * this holder after granting it.
 */
void
holds_add(HeldLock *h, RlockScope scope, int64 lease_ms, bool watchdog,
		  int redis_count, const char *name)
{
	set_uncertain(h, false);
	if (redis_count < holds_total(h) + 1)
	{
		/* Redis had forgotten our earlier holds: they were lost. */
		if (!registry_is_lost(h->key, h->kind))
			stats_count(RLOCK_STAT_LOCKS_LOST);
		ereport(WARNING,
				(errmsg("lock \"%s\" had been lost by this session before this acquisition",
						name),
				 errdetail("Redis no longer knew %d earlier hold(s); it expired or was released by someone else.",
						   holds_total(h))));
		clear_xact(h);
		h->session_count = 0;
	}

	if (scope == RLOCK_SCOPE_SESSION)
		h->session_count++;
	else
	{
		SubTransactionId subid = GetCurrentSubTransactionId();

		if (h->nxact > 0 && h->xact[h->nxact - 1].subid == subid)
			h->xact[h->nxact - 1].count++;
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
			h->xact[h->nxact].count = 1;
			h->nxact++;
		}
		if (h->xact_count == 0)
			n_with_xact++;
		h->xact_count++;
	}
	if (watchdog)
		h->watchdog = true;
	h->lease_ms = lease_ms;
	sync_registry(h);

	/* A replayed acquire left a surplus: bring Redis back to our count. */
	if (redis_count > holds_total(h))
	{
		set_uncertain(h, true);
		holds_settle();
	}
}

/*
 * Has the watchdog found h gone from Redis?  Then say so, forget it, and
 * return true.  Called by every call on a name this session holds.
 */
bool
holds_check_lost(HeldLock *h, const char *name)
{
	if (!registry_is_lost(h->key, h->kind))
		return false;
	ereport(WARNING,
			(errmsg("lock \"%s\" was lost before this session released it",
					name),
			 errdetail("The watchdog found it gone from Redis: it expired, was force-released, or Redis restarted.")));
	holds_forget(h);
	return true;
}

/*
 * An acquire script is about to be sent: until its answer is in, Redis may
 * hold one more hold than this table says.  If the call is interrupted, the
 * entry stays uncertain and is reconciled at abort or by the next call.
 */
void
holds_begin_acquire(HeldLock *h)
{
	set_uncertain(h, true);
}

/* The acquire script answered without granting anything. */
void
holds_acquire_refused(HeldLock *h)
{
	set_uncertain(h, false);
	holds_drop_if_unused(h);
}

/*
 * Lease to give what remains of a lock (after holds were removed from the
 * table): the watchdog lease when a remaining hold uses automatic renewal, else 0 (keep
 * the key's TTL).
 */
int64
holds_keep_lease(HeldLock *h)
{
	if (h->watchdog && holds_total(h) > 0)
		return rlock_watchdog_timeout_ms;
	return 0;
}

/* ----------------------------------------------------------------
 * Batches: one pipelined round trip for many locks
 * ----------------------------------------------------------------
 */

typedef struct BatchItem
{
	HeldLock   *h;
	int			levels;			/* > 0: release that many holds; 0: reconcile
								 * Redis's count down to ours */
} BatchItem;

/*
 * Tell Redis about holds already removed from our table, in one round trip.
 * Locks found gone are reported as lost and forgotten; entries Redis could
 * not be told about become uncertain.  Failures are reported at elevel.
 * Returns the number of items whose lock was still held.
 */
static int
run_batch(BatchItem *items, int n, int elevel)
{
	MemoryContext oldcxt;
	RedisCmd   *cmds;
	redisReply **replies = NULL;
	const char *holder = rlock_backend_holder();
	bool		ok;
	int			nheld = 0;

	if (n == 0)
	{
		MemoryContextReset(batch_cxt);
		return 0;
	}
	oldcxt = MemoryContextSwitchTo(batch_cxt);
	cmds = palloc(n * sizeof(RedisCmd));
	for (int i = 0; i < n; i++)
	{
		HeldLock   *h = items[i].h;
		const RlockKindOps *ops = kind_ops(h->kind);

		if (items[i].levels > 0)
			ops->build_release(&cmds[i], h->kind, h->key, holder,
							   items[i].levels,
							   holds_keep_lease(h));
		else
			ops->build_reconcile(&cmds[i], h->kind, h->key, holder,
								 holds_total(h));
	}
	MemoryContextSwitchTo(oldcxt);

	/* until Redis confirms, our table and Redis may disagree */
	for (int i = 0; i < n; i++)
		set_uncertain(items[i].h, true);

	ok = rconn_run(rconn_backend(), cmds, n, &replies, elevel,
				   n == 1 ? items[0].h->key : NULL);

	for (int i = 0; i < n; i++)
	{
		HeldLock   *h = items[i].h;
		redisReply *r = ok ? replies[i] : NULL;
		bool		lost;

		sync_registry(h);
		if (r == NULL || r->type == REDIS_REPLY_ERROR)
		{
			if (r != NULL)
				rconn_reply_error(r, WARNING, h->key);
			continue;			/* stays uncertain */
		}
		if (items[i].levels > 0)
			lost = (r->type == REDIS_REPLY_NIL);
		else
			lost = (r->type == REDIS_REPLY_INTEGER && holds_total(h) > 0 &&
					r->integer < holds_total(h));
		if (lost)
		{
			if (!registry_is_lost(h->key, h->kind))
				stats_count(RLOCK_STAT_LOCKS_LOST);
			ereport(WARNING,
					(errcode(ERRCODE_WARNING),
					 errmsg("lock \"%s\" was lost before this session released it",
							h->key),
					 errdetail("It expired or was released by someone else while this session held it.")));
			holds_forget(h);
			continue;
		}
		nheld++;
		if (items[i].levels > 0)
			stats_add(RLOCK_STAT_RELEASES, items[i].levels);
		set_uncertain(h, false);
		holds_drop_if_unused(h);
	}
	MemoryContextReset(batch_cxt);
	return nheld;
}

/*
 * Room for one item per entry of the table, in batch_cxt: run_batch frees it
 * (even when it fails, at the next batch).
 */
static BatchItem *
batch_items(void)
{
	return MemoryContextAlloc(batch_cxt,
							  hash_get_num_entries(held_locks) * sizeof(BatchItem));
}

/* Add an item for h: release "levels", or reconcile if h is uncertain. */
static inline void
batch_add(BatchItem *items, int *n, HeldLock *h, int levels)
{
	items[*n].h = h;
	items[*n].levels = h->uncertain ? 0 : levels;
	(*n)++;
}

/*
 * Reconcile every uncertain entry with Redis.  Runs before each rlock call;
 * ERROR when Redis cannot be reached (the entries stay uncertain).
 */
void
holds_settle(void)
{
	HASH_SEQ_STATUS seq;
	HeldLock   *h;
	BatchItem  *items;
	int			n = 0;

	if (n_uncertain == 0 || held_locks == NULL)
		return;
	items = batch_items();
	hash_seq_init(&seq, held_locks);
	while ((h = hash_seq_search(&seq)) != NULL)
	{
		if (h->uncertain)
			batch_add(items, &n, h, 0);
	}
	run_batch(items, n, ERROR);
}

/*
 * One acquire script round trip for ln as kind, with the table kept in
 * step: while the script is in flight Redis may hold one more hold than the
 * table (the entry is uncertain; an interrupted call is reconciled later),
 * a granted hold is recorded, a refused attempt drops an entry that holds
 * nothing.  ERROR on an error reply or a reply of the wrong shape.
 */
AcquireResult
holds_run_acquire(const LockName *ln, RlockKind kind, const HoldRequest *req,
				  RedisCmd *cmd)
{
	AcquireResult res = {0};
	HeldLock   *h = NULL;
	redisReply *r;

	if (req->track)
	{
		h = holds_enter(ln->key, kind);
		holds_begin_acquire(h);
	}
	r = rconn_run1(rconn_backend(), cmd, ln->name);
	if (r->type == REDIS_REPLY_ERROR)
	{
		/* the script did not run to completion: nothing was granted */
		if (h)
			holds_acquire_refused(h);
		rconn_reply_error(r, ERROR, ln->name);
	}
	if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
		r->element[0]->type != REDIS_REPLY_INTEGER ||
		(r->element[0]->integer <= 1 &&
		 r->element[1]->type != REDIS_REPLY_INTEGER))
		rconn_unexpected_reply(r, ln->name);	/* the entry stays uncertain */

	/* copy the answer out: holds_add may use the connection again */
	res.status = r->element[0]->integer;
	if (r->element[1]->type == REDIS_REPLY_INTEGER)
		res.value = r->element[1]->integer;
	else if (r->element[1]->type == REDIS_REPLY_STRING)
		res.word = pnstrdup(r->element[1]->str, r->element[1]->len);
	if (r->elements > 2 && r->element[2]->type == REDIS_REPLY_INTEGER)
	{
		res.has_extra = true;
		res.extra = r->element[2]->integer;
	}

	if (res.status == 1)
	{
		if (h)
			holds_add(h, req->scope, req->lease_ms, req->watchdog,
					  (int) res.value, ln->name);
		stats_count(RLOCK_STAT_ACQUISITIONS);
	}
	else if (h)
		holds_acquire_refused(h);
	return res;
}

/* How messages name a lock of a kind: "lock", "read lock", ... */
static const char *
kind_label(RlockKind kind)
{
	if (kind == RLOCK_KIND_EXCLUSIVE)
		return "lock";
	return psprintf("%s lock", rlock_kind_name(kind));
}

static void
held_as_other_kind(const LockName *ln, HeldLock *other)
{
	ereport(ERROR,
			(errcode(ERRCODE_WRONG_OBJECT_TYPE),
			 errmsg("lock \"%s\" is held by this session in %s mode",
					ln->name, rlock_kind_name(other->kind))));
}

/*
 * The start of every acquisition of ln as kind: reconcile what an earlier
 * call left uncertain, connect (an ERROR here means Redis never saw the
 * request), fill in req (lease_ms 0: the watchdog's lease, renewed), and
 * return the holder.  For this session's own holds (owner NULL), forget
 * the lock if the watchdog found it lost (with a WARNING), and refuse it
 * when this session holds the name as a kind that cannot share it.
 */
const char *
holds_prepare_acquire(const LockName *ln, RlockKind kind, RlockScope scope,
					  int64 lease_ms, const char *owner, HoldRequest *req)
{
	HeldLock   *h;

	holds_settle();
	rconn_ready(rconn_backend(), ln->name);
	req->track = (owner == NULL);
	req->scope = scope;
	req->watchdog = (lease_ms == 0);
	req->lease_ms = req->watchdog ? rlock_watchdog_timeout_ms : lease_ms;
	if (owner != NULL)
		return owner;

	h = holds_find(ln->key, kind);
	if (h != NULL)
		holds_check_lost(h, ln->name);
	h = holds_find_conflicting(ln->key, kind);
	if (h != NULL)
		held_as_other_kind(ln, h);
	return rlock_backend_holder();
}

/*
 * rlock_release and its kin: release one hold of ln as kind, taken by this
 * session (owner NULL) or for an owner token.  Returns false with a WARNING
 * when there is no such hold (never taken, lost, or only at transaction
 * level), like pg_advisory_unlock.
 */
bool
holds_release(const LockName *ln, RlockKind kind, const char *owner)
{
	HeldLock   *h;

	holds_settle();

	if (owner != NULL)
	{
		RedisCmd	cmd;
		redisReply *r;

		kind_ops(kind)->build_release(&cmd, kind, ln->key, owner, 1, 0);
		r = rconn_run1(rconn_backend(), &cmd, ln->name);
		if (r->type == REDIS_REPLY_ERROR)
			rconn_reply_error(r, ERROR, ln->name);
		if (r->type == REDIS_REPLY_NIL)
		{
			ereport(WARNING,
					(errmsg("%s \"%s\" is not held by owner \"%s\"",
							kind_label(kind), ln->name, owner)));
			return false;
		}
		if (r->type != REDIS_REPLY_INTEGER)
			rconn_unexpected_reply(r, ln->name);
		stats_count(RLOCK_STAT_RELEASES);
		return true;
	}

	h = holds_find(ln->key, kind);
	if (h != NULL && holds_check_lost(h, ln->name))
		return false;
	if (h == NULL || holds_total(h) == 0)
	{
		HeldLock   *other = holds_find_conflicting(ln->key, kind);

		if (other != NULL)
			held_as_other_kind(ln, other);
	}
	if (h == NULL || h->session_count == 0)
	{
		if (h != NULL && h->xact_count > 0)
			ereport(WARNING,
					(errmsg("%s \"%s\" is held by this session only at transaction level",
							kind_label(kind), ln->name),
					 errhint("Transaction-level locks are released when the transaction ends.")));
		else
			ereport(WARNING,
					(errmsg("%s \"%s\" is not held by this session",
							kind_label(kind), ln->name)));
		return false;
	}
	return holds_release_session(h);
}

/*
 * Release one session-level hold of h, in Redis and here.  Returns false
 * (after a WARNING) when Redis says the lock was lost meanwhile; ERROR when
 * Redis cannot be reached (the entry then stays uncertain).
 */
bool
holds_release_session(HeldLock *h)
{
	BatchItem	item;
	int			n = 0;

	Assert(h->session_count > 0);
	h->session_count--;
	batch_add(&item, &n, h, 1);
	return run_batch(&item, n, ERROR) == 1;
}

/*
 * rlock_release_all(): release every session-level hold, all levels.
 * Returns the number of locks released.
 */
int
holds_release_all_session(void)
{
	HASH_SEQ_STATUS seq;
	HeldLock   *h;
	BatchItem  *items;
	int			n = 0;

	if (held_locks == NULL || hash_get_num_entries(held_locks) == 0)
		return 0;
	holds_settle();
	items = batch_items();
	hash_seq_init(&seq, held_locks);
	while ((h = hash_seq_search(&seq)) != NULL)
	{
		int			levels = h->session_count;

		if (levels == 0)
			continue;
		h->session_count = 0;
		batch_add(items, &n, h, levels);
	}
	return run_batch(items, n, ERROR);
}

/*
 * End transaction-level holds: all of them (subid == InvalidSubTransactionId)
 * or those of one aborted subtransaction.  Called with interrupts held, so
 * failures are WARNINGs.  At top-level abort, uncertain entries (an acquire
 * interrupted in flight) are reconciled too.
 */
static void
end_xact_holds(SubTransactionId subid, bool reconcile_uncertain)
{
	HASH_SEQ_STATUS seq;
	HeldLock   *h;
	BatchItem  *items;
	int			n = 0;

	if (held_locks == NULL ||
		(n_with_xact == 0 && !(reconcile_uncertain && n_uncertain > 0)))
		return;

	items = batch_items();
	hash_seq_init(&seq, held_locks);
	while ((h = hash_seq_search(&seq)) != NULL)
	{
		int			levels = 0;

		if (subid == InvalidSubTransactionId)
		{
			levels = h->xact_count;
			clear_xact(h);
		}
		else
		{
			/* the holds of that subtransaction are the innermost ones */
			while (h->nxact > 0 && h->xact[h->nxact - 1].subid == subid)
			{
				levels += h->xact[h->nxact - 1].count;
				h->nxact--;
			}
			h->xact_count -= levels;
			if (levels > 0 && h->xact_count == 0)
				n_with_xact--;
		}

		if (levels > 0 || (h->uncertain && reconcile_uncertain))
			batch_add(items, &n, h, levels);
	}
	/* items lives in batch_cxt, which run_batch resets */
	run_batch(items, n, WARNING);
}

static void
lost_at_commit(HeldLock *h)
{
	char	   *key = pstrdup(h->key);

	holds_forget(h);
	ereport(ERROR,
			(errcode(ERRCODE_TRANSACTION_ROLLBACK),
			 errmsg("cannot commit: lock \"%s\" held by this transaction was lost",
					key),
			 errdetail("It expired, was force-released, or Redis restarted while the transaction held it; the transaction is rolled back."),
			 errhint("Writes guarded by a lost lock are never committed (rlock.verify_on_commit).")));
}

/*
 * Before COMMIT: check in one round trip that Redis still has every lock
 * held at transaction level (rlock.verify_on_commit).  An ERROR here rolls
 * the transaction back.
 */
static void
verify_xact_holds(void)
{
	HASH_SEQ_STATUS seq;
	HeldLock   *h;
	HeldLock  **hs;
	RedisCmd   *cmds;
	redisReply **replies;
	const char *holder = rlock_backend_holder();
	int			n = 0;

	if (n_with_xact == 0 || !rlock_verify_on_commit)
		return;
	hs = palloc(n_with_xact * sizeof(HeldLock *));
	cmds = palloc(n_with_xact * sizeof(RedisCmd));
	hash_seq_init(&seq, held_locks);
	while ((h = hash_seq_search(&seq)) != NULL)
	{
		if (h->xact_count == 0)
			continue;
		if (registry_is_lost(h->key, h->kind))
		{
			hash_seq_term(&seq);
			lost_at_commit(h);
		}
		rcmd_init(&cmds[n]);
		rcmd_str(&cmds[n], "HGET");
		rcmd_str(&cmds[n], h->key);
		rcmd_str(&cmds[n], lockname_holder_field(h->kind, holder));
		hs[n++] = h;
	}
	rconn_run(rconn_backend(), cmds, n, &replies, ERROR,
			  n == 1 ? hs[0]->key : NULL);
	for (int i = 0; i < n; i++)
	{
		redisReply *r = replies[i];
		int64		count = 0;

		if (r->type == REDIS_REPLY_ERROR)
			rconn_reply_error(r, ERROR, hs[i]->key);
		else if (r->type == REDIS_REPLY_INTEGER)
			count = r->integer;
		else if (r->type == REDIS_REPLY_STRING)
			count = strtoll(r->str, NULL, 10);
		else if (r->type != REDIS_REPLY_NIL)
			rconn_unexpected_reply(r, hs[i]->key);
		if (count < holds_total(hs[i]))
		{
			stats_count(RLOCK_STAT_LOCKS_LOST);
			lost_at_commit(hs[i]);
		}
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
			if (n_with_xact > 0)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot PREPARE a transaction that holds rlock transaction-level locks")));
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			end_xact_holds(InvalidSubTransactionId, false);
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			end_xact_holds(InvalidSubTransactionId, true);
			break;
		default:
			break;
	}
}

static void
holds_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					   SubTransactionId parentSubid, void *arg)
{
	HASH_SEQ_STATUS seq;
	HeldLock   *h;

	if (held_locks == NULL || n_with_xact == 0)
		return;
	switch (event)
	{
		case SUBXACT_EVENT_ABORT_SUB:
			end_xact_holds(mySubid, false);
			break;
		case SUBXACT_EVENT_COMMIT_SUB:
			/* the parent now owns the holds of the committed child */
			hash_seq_init(&seq, held_locks);
			while ((h = hash_seq_search(&seq)) != NULL)
			{
				if (h->nxact == 0 || h->xact[h->nxact - 1].subid != mySubid)
					continue;
				if (h->nxact >= 2 && h->xact[h->nxact - 2].subid == parentSubid)
				{
					h->xact[h->nxact - 2].count += h->xact[h->nxact - 1].count;
					h->nxact--;
				}
				else
					h->xact[h->nxact - 1].subid = parentSubid;
			}
			break;
		default:
			break;
	}
}

/* Backend exit: release everything this session holds. */
static void
holds_exit_callback(int code, Datum arg)
{
	HASH_SEQ_STATUS seq;
	HeldLock   *h;
	BatchItem  *items;
	int			n = 0;

	if (held_locks == NULL || hash_get_num_entries(held_locks) == 0)
		return;
	items = batch_items();
	hash_seq_init(&seq, held_locks);
	while ((h = hash_seq_search(&seq)) != NULL)
	{
		int			levels = holds_total(h);

		clear_xact(h);
		h->session_count = 0;
		batch_add(items, &n, h, levels);
	}
	run_batch(items, n, WARNING);
	registry_remove_backend();
}
