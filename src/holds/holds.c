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
 *	  they end, and reconcile every uncertain entry, all names in one
 *	  pipelined round trip (holds_end_xact, holds_release_everything; the
 *	  callbacks are in holds_xact.c).  They run with interrupts held and
 *	  must not fail, so problems are reported as WARNINGs, the entries stay
 *	  uncertain, and leases are the backstop.
 *	- A release Redis answers with an error reply did not happen: the hold
 *	  stays in the table and the call fails.
 *	- A hold enters the shared registry when Redis grants it (waiting takes
 *	  no room there); when the registry is full, the grant is given back.
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

#include "common/hashfn.h"
#include "miscadmin.h"
#include "utils/timestamp.h"
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
holds_init(void)
{
	HASHCTL		ctl;

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
	holds_register_callbacks();
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

	if (holds_table == NULL)
		return NULL;
	make_tag(&tag, key, kind);
	return hash_search(holds_table, &tag, HASH_FIND, NULL);
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
		holds_init();
	make_tag(&tag, key, kind);
	h = hash_search(holds_table, &tag, HASH_ENTER, &found);
	if (!found)
	{
		h->session_count = 0;
		h->xact_count = 0;
		h->nxact = 0;
		h->maxxact = 0;
		h->xact = NULL;
		h->renew_lease_ms = 0;
		h->lease_ms = 0;
		h->expires_at = 0;
		h->uncertain = false;
		h->settle_at_end = false;
	}
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
	return registry_sync(h->key, h->kind, h->session_count, h->xact_count,
						 h->lease_ms,
						 holds_total(h) > 0 ? h->renew_lease_ms : 0,
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
	if (h->xact)
		pfree(h->xact);
	registry_remove(h->key, h->kind);
	hash_search(holds_table, h, HASH_REMOVE, NULL);
}

/* The lock is gone in Redis: forget every hold of it. */
void
holds_forget(HeldLock *h)
{
	holds_clear_xact(h);
	h->session_count = 0;
	h->renew_lease_ms = 0;
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
	holds_clear_xact(h);
	h->session_count = 0;
	h->renew_lease_ms = 0;
	registry_remove(h->key, h->kind);
	holds_set_uncertain(h, true);
}

void
holds_report_lost(const char *name, const char *detail)
{
	ereport(WARNING,
			(errmsg("lock \"%s\" was lost before this session released it",
					name),
			 errdetail("%s", detail)));
}

/* Take back the hold holds_count_hold just counted (scope as given). */
void
holds_take_back(HeldLock *h, RlockScope scope)
{
	if (scope == RLOCK_SCOPE_SESSION)
		h->session_count--;
	else
	{
		h->xact[h->nxact - 1].count--;
		if (h->xact[h->nxact - 1].count == 0)
			h->nxact--;
		h->xact_count--;
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
	holds_set_uncertain(h, false);
	if (redis_count < holds_total(h) + 1)
	{
		/* Redis had forgotten our earlier holds: they were lost. */
		if (!registry_is_lost(h->key, h->kind))
			stats_count(RLOCK_STAT_LOCKS_LOST);
		holds_report_lost(name, psprintf("Redis no longer knew %d earlier hold(s); it expired or was released by someone else.",
								   holds_total(h)));
		holds_clear_xact(h);
		h->session_count = 0;
		h->renew_lease_ms = 0;
		/* a new lock: its expiry is the acquisition's, not the old one's */
		(void) holds_sync_registry(h, false);
	}

	if (req->scope == RLOCK_SCOPE_SESSION)
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
			holds_n_with_xact++;
		h->xact_count++;
	}
	if (req->watchdog)
		h->renew_lease_ms = req->lease_ms;
	h->lease_ms = req->lease_ms;

	/*
	 * The scripts never lower a held lock's TTL (scripts.c, RAISE_TTL): a
	 * re-entry with a shorter lease keeps the earlier holds' expiry.
	 */
	if (holds_total(h) == 1 || req->sent_at + req->lease_ms * 1000 > h->expires_at)
		h->expires_at = req->sent_at + req->lease_ms * 1000;

	if (!holds_sync_registry(h, true))
	{
		/* the registry is full: the reconcile gives the hold back */
		holds_take_back(h, req->scope);
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
			 errdetail("The rlock registry has room for %d held locks.",
					   rlock_max_locks),
			 errhint("You might need to increase rlock.max_locks.")));
}

/* One hold granted by Redis, recorded (holds_count_hold), or refused. */
static void
holds_add(HeldLock *h, const HoldRequest *req, int redis_count,
		  const char *name)
{
	bool		ok = holds_count_hold(h, req, redis_count, name);

	if (h->uncertain)
		holds_settle();
	if (!ok)
		holds_registry_full(name);
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
	holds_report_lost(name, "It expired, was force-released, Redis restarted, or it could not be renewed in time.");
	holds_forget_and_reconcile(h);
	return true;
}

/*
 * Lease to give what remains of a lock (after holds were removed from the
 * table): the renewal lease when a remaining hold uses automatic renewal,
 * else 0 (keep the key's TTL).
 */
int64
holds_keep_lease(HeldLock *h)
{
	if (h->renew_lease_ms > 0 && holds_total(h) > 0)
		return h->renew_lease_ms;
	return 0;
}

/*
 * An acquisition fewer replicas acknowledged than rlock.replica_acks asks:
 * give the hold back in Redis (one level: what was held before stays), keep
 * nothing in the session, and fail.  If the release itself fails, the
 * entry stays uncertain and is reconciled with Redis later.
 */
static void
undo_unacknowledged(const LockName *ln, RlockKind kind, HoldRequest *req,
					HeldLock *h, RedisConn *conn, int wanted, int64 acked,
					const char *ack_error)
{
	RedisCmd	cmd;
	RReply	   *r;
	const char *latch;

	latch = holds_kind_ops(kind)->build_release(&cmd, kind, ln->key,
												 req->holder, 1,
												 h ? holds_keep_lease(h) : 0);
	r = route_run1(conn, &cmd, ln->name);
	if (r->type == RREPLY_ERROR)
		rconn_reply_error(r, ERROR, ln->name);
	route_defer_del(conn, latch);
	if (h)
	{
		holds_set_uncertain(h, false);
		holds_drop_if_unused(h);
	}
	holds_acks_refused(ln->name, conn, wanted, acked, ack_error);
}

/* An acquisition was undone for want of replica acknowledgements. */
void
holds_acks_refused(const char *name, RedisConn *conn, int wanted,
				   int64 acked, const char *ack_error)
{
	stats_count(RLOCK_STAT_ACK_REFUSALS);
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("lock \"%s\" was not acknowledged by enough Redis replicas",
					name),
			 ack_error ?
			 errdetail("WAIT failed: %s; the acquisition was undone.", ack_error) :
			 acked < 0 ?
			 errdetail("WAIT answered %lld, not a number of replicas; the acquisition was undone.",
					   (long long) acked) :
			 errdetail("%d of the %d replica acknowledgements rlock.replica_acks asks for arrived within rlock.replica_ack_timeout (%d ms); the acquisition was undone.",
					   (int) acked, wanted,
					   rlock_replica_ack_timeout_ms),
			 errhint("Check the replicas of the Redis master at %s, or lower rlock.replica_acks.",
					 rconn_address(conn))));
}

/*
 * The answer of an acquire script, copied out of the connection's reply
 * (AcquireResult); false when it does not have that shape.
 */
bool
holds_parse_acquire(RReply *r, AcquireResult *res)
{
	memset(res, 0, sizeof(*res));
	if (r->type != RREPLY_ARRAY || r->elements < 2 ||
		r->element[0]->type != RREPLY_INTEGER ||
		(r->element[0]->integer <= 1 &&
		 r->element[1]->type != RREPLY_INTEGER))
		return false;
	res->status = r->element[0]->integer;
	if (r->element[1]->type == RREPLY_INTEGER)
		res->value = r->element[1]->integer;
	else if (r->element[1]->type == RREPLY_STRING)
		res->word = pnstrdup(r->element[1]->str, r->element[1]->len);
	if (r->elements > 2 && r->element[2]->type == RREPLY_INTEGER)
	{
		res->has_extra = true;
		res->extra = r->element[2]->integer;
	}
	return true;
}

/*
 * One acquire script round trip for ln as kind, with the table kept in
 * step: while the script is in flight Redis may hold one more hold than the
 * table (the entry is uncertain; an interrupted call is reconciled later),
 * a granted hold is recorded, a refused attempt drops an entry that holds
 * nothing.  ERROR on an error reply or a reply of the wrong shape.
 */
AcquireResult
holds_run_acquire(const LockName *ln, RlockKind kind, HoldRequest *req,
				  RedisCmd *cmd)
{
	AcquireResult res = {0};
	HeldLock   *h = NULL;
	RReply	   *r;
	RReply	  **replies;
	RedisConn  *conn = route_backend();
	RedisCmd	cmds[2];
	int			acks_wanted = route_acks_wanted(conn, ln->key);
	int64		acked = -1;
	char	   *ack_error = NULL;

	if (req->track)
	{
		h = holds_enter(ln->key, kind);
		holds_set_uncertain(h, true);
	}
	/* with replicas, WAIT for them right behind the script (SPEC 10) */
	if (acks_wanted > 0)
	{
		rcmd_copy(&cmds[0], cmd);
		rcmd_wait(&cmds[1], acks_wanted, rlock_replica_ack_timeout_ms);
	}
	req->sent_at = GetCurrentTimestamp();
	route_run(conn, acks_wanted > 0 ? cmds : cmd, acks_wanted > 0 ? 2 : 1,
			  &replies, ERROR, ln->name);
	r = replies[0];
	if (acks_wanted > 0)
	{
		if (replies[1]->type == RREPLY_INTEGER)
			acked = replies[1]->integer;
		else if (replies[1]->type == RREPLY_ERROR)
			ack_error = pstrdup(replies[1]->str);
		else
			ack_error = "its reply was not a number";
	}
	if (r->type == RREPLY_ERROR)
	{
		/* every script checks before it writes: nothing was granted */
		if (h)
		{
			holds_set_uncertain(h, false);
			holds_drop_if_unused(h);
		}
		rconn_reply_error(r, ERROR, ln->name);
	}
	/* copy the answer out: holds_add may use the connection again */
	if (!holds_parse_acquire(r, &res))
		rconn_unexpected_reply(r, ln->name);	/* the entry stays uncertain */

	if (res.status == 1 && acks_wanted > 0 && acked < acks_wanted)
		undo_unacknowledged(ln, kind, req, h, conn, acks_wanted, acked,
							ack_error);
	if (res.status == 1)
	{
		if (h)
			holds_add(h, req, (int) res.value, ln->name);
		stats_count(RLOCK_STAT_ACQUISITIONS);
	}
	else if (h)
	{
		holds_set_uncertain(h, false);
		holds_drop_if_unused(h);
	}
	return res;
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

/* How messages name a lock of a kind: "lock", "read lock", ... */
static const char *
kind_label(RlockKind kind)
{
	if (kind == RLOCK_KIND_EXCLUSIVE)
		return "lock";
	if (kind == RLOCK_KIND_REDLOCK)
		return "Redlock";
	return psprintf("%s lock", rlock_kind_name(kind));
}

void
holds_held_as_other_kind(const LockName *ln, HeldLock *other)
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
 * the lock if it was lost (with a WARNING), and refuse it when this
 * session holds the name as a kind that cannot share it.
 */
const char *
holds_prepare_acquire(const LockName *ln, RlockKind kind, RlockScope scope,
					  int64 lease_ms, const char *owner, HoldRequest *req)
{
	HeldLock   *h;

	h = holds_find(ln->key, kind);
	if (owner == NULL && h != NULL)
		holds_check_lost(h, ln->name);
	holds_settle();
	holds_require_settled(ln, kind);
	/* (in a Cluster: the node of its slot; a Redlock asks its own masters) */
	if (kind_is_local(kind))
		route_ready_for(route_backend(), ln->key, ln->name);
	req->track = (owner == NULL);
	req->scope = scope;
	req->watchdog = (lease_ms == 0);
	req->lease_ms = req->watchdog ? rlock_watchdog_timeout_ms : lease_ms;
	req->sent_at = 0;
	req->holder = owner;
	if (owner != NULL)
		return owner;

	h = holds_find_conflicting(ln->key, kind);
	if (h != NULL)
		holds_held_as_other_kind(ln, h);
	req->holder = rlock_backend_holder();
	return req->holder;
}

/* A release script refused a lock of another kind ("RLOCKKIND <kind>"). */
static void
other_kind_error(const LockName *ln, RlockKind kind, RReply *r)
{
	const char *found = strstr(r->str, "RLOCKKIND ") + strlen("RLOCKKIND ");

	ereport(ERROR,
			(errcode(ERRCODE_WRONG_OBJECT_TYPE),
			 errmsg("lock \"%s\" is not a%s %s",
					ln->name, kind == RLOCK_KIND_EXCLUSIVE ? "n" : "",
					kind == RLOCK_KIND_EXCLUSIVE || kind == RLOCK_KIND_FAIR ?
					psprintf("%s lock", rlock_kind_name(kind)) :
					"read/write lock"),
			 errdetail("It is %s lock in Redis.",
					   strncmp(found, "exclusive", 9) == 0 ? "an exclusive" :
					   "a read/write"),
			 errhint("Release it with the functions of its kind.")));
}

/*
 * After holds_settle: this session's entry of ln as kind when it has a
 * session-level hold; otherwise NULL, with the WARNING of
 * pg_advisory_unlock's kind (an ERROR when the session holds the name as a
 * kind that cannot share it).  Changes nothing.
 */
HeldLock *
holds_session_hold(const LockName *ln, RlockKind kind)
{
	HeldLock   *h = holds_find(ln->key, kind);

	if (h == NULL || holds_total(h) == 0)
	{
		HeldLock   *other = holds_find_conflicting(ln->key, kind);

		if (other != NULL)
			holds_held_as_other_kind(ln, other);
	}
	if (h != NULL && h->session_count > 0)
		return h;
	if (h != NULL && h->xact_count > 0)
		ereport(WARNING,
				(errmsg("%s \"%s\" is held by this session only at transaction level",
						kind_label(kind), ln->name),
				 errhint("Transaction-level locks are released when the transaction ends.")));
	else
		ereport(WARNING,
				(errmsg("%s \"%s\" is not held by this session",
						kind_label(kind), ln->name)));
	return NULL;
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

	if (owner != NULL)
	{
		RedisCmd	cmd;
		RReply *r;
		RedisConn  *conn = route_backend();
		const char *latch;

		holds_settle();
		latch = holds_kind_ops(kind)->build_release(&cmd, kind, ln->key, owner, 1, 0);
		r = route_run1(conn, &cmd, ln->name);
		if (rconn_reply_is(r, "RLOCKKIND"))
			other_kind_error(ln, kind, r);
		if (r->type == RREPLY_ERROR)
			rconn_reply_error(r, ERROR, ln->name);
		if (r->type == RREPLY_NIL)
		{
			ereport(WARNING,
					(errmsg("%s \"%s\" is not held by this owner token",
							kind_label(kind), ln->name)));
			return false;
		}
		if (r->type != RREPLY_INTEGER)
			rconn_unexpected_reply(r, ln->name);
		route_defer_del(conn, latch);
		stats_count(RLOCK_STAT_RELEASES);
		return true;
	}

	h = holds_find(ln->key, kind);
	if (h != NULL && holds_check_lost(h, ln->name))
	{
		holds_settle();
		return false;
	}
	holds_settle();
	holds_require_settled(ln, kind);
	h = holds_session_hold(ln, kind);
	if (h == NULL)
		return false;

	/* one session-level hold, in Redis and here */
	{
		BatchItem	item;
		int			n = 0;

		h->session_count--;
		holds_batch_add(&item, &n, h, 1, true);
		return holds_run_batch(&item, n, ERROR) == 1;
	}
}

/*
 * A kind that asks servers of its own (lock_redlock.c) records its holds
 * here too.  Before its acquisition goes out, the entry is uncertain: if
 * the call is interrupted, the abort path lowers the holder's count on
 * those servers to the table's (holds_batch.c, through the kind's settle).
 */
HeldLock *
holds_begin_elsewhere(const LockName *ln, RlockKind kind, HoldRequest *req)
{
	HeldLock   *h = holds_enter(ln->key, kind);

	holds_set_uncertain(h, true);
	req->sent_at = GetCurrentTimestamp();
	return h;
}

/*
 * ... and after it: granted, the hold is recorded (a full registry gives
 * it back, through the entry's settle, and fails); refused, the kind has
 * given back what some servers granted, and the entry is settled.
 */
void
holds_end_elsewhere(HeldLock *h, const HoldRequest *req, bool granted,
					const char *name)
{
	if (granted)
	{
		/* (the kind judged the majority: no per-server count to compare) */
		if (!holds_count_hold(h, req, holds_total(h) + 1, name))
		{
			holds_settle();
			holds_registry_full(name);
		}
		stats_count(RLOCK_STAT_ACQUISITIONS);
		return;
	}
	holds_set_uncertain(h, false);
	holds_drop_if_unused(h);
}
