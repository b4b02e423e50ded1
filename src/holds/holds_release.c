/*-------------------------------------------------------------------------
 *
 * holds_release.c
 *	  Releases of one hold (rlock_release and its kin): this session's own,
 *	  through a batch of one (holds_batch.c), or an owner token's, which
 *	  the table does not track; and the WARNINGs of pg_advisory_unlock's
 *	  kind when there is nothing to release.
 *
 * Every lock kind's release goes through holds_release, so what a release
 * must check (lost, unsettled, held as another kind, held only at
 * transaction level) lives here once; the kinds give their release script
 * through the table of kinds (holds_kinds.c).
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "holds/holds.h"
#include "holds/holds_int.h"
#include "base/base.h"

/* How messages name a lock of a kind: "lock", "read lock", ... */
static const char *
kind_label(RlockKind kind)
{
	if (kind == RLOCK_KIND_EXCLUSIVE)
		return "lock";
	if (kind == RLOCK_KIND_REDLOCK)
		return "Redlock";
	if (kind == RLOCK_KIND_SEMAPHORE)
		return "semaphore";
	return psprintf("%s lock", rlock_kind_name(kind));
}

/* A release script refused a lock of another kind ("RLOCKKIND <kind>"). */
static void
other_kind_error(const LockName *ln, RlockKind kind, RReply *r)
{
	const char *found = rconn_error_word(r, "RLOCKKIND");

	ereport(ERROR,
			(errcode(ERRCODE_WRONG_OBJECT_TYPE),
			 errmsg("lock \"%s\" is not a%s %s",
					ln->name, kind == RLOCK_KIND_EXCLUSIVE ? "n" : "",
					kind == RLOCK_KIND_EXCLUSIVE || kind == RLOCK_KIND_FAIR ?
					psprintf("%s lock", rlock_kind_name(kind)) :
					"read/write lock"),
			 errdetail("It is %s lock in Redis.",
					   strcmp(found, "exclusive") == 0 ? "an exclusive" :
					   strcmp(found, "read") == 0 ||
					   strcmp(found, "write") == 0 ? "a read/write" :
					   "another kind of"),
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
 * The entry whose session-level holds of ln as kind a release gives back,
 * after settling what is uncertain; NULL (with the WARNING said) when the
 * lock was lost or this session holds none at session level.
 */
static HeldLock *
session_release_target(const LockName *ln, RlockKind kind)
{
	HeldLock   *h = holds_find(ln->key, kind);

	if (h != NULL && holds_check_lost(h, ln->name))
	{
		holds_settle();
		return NULL;
	}
	holds_settle();
	holds_require_settled(ln, kind);
	return holds_session_hold(ln, kind);
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
		holds_quota_owner_released(ln->key, kind);
		stats_count(RLOCK_STAT_RELEASES);
		return true;
	}

	h = session_release_target(ln, kind);
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
 * Release "levels" session-level holds of ln as kind at once (a
 * semaphore's permits, one hold each), in Redis and here.  Returns false
 * with a WARNING, releasing nothing, when this session has fewer than that
 * at session level (or the lock was lost).
 */
bool
holds_release_levels(const LockName *ln, RlockKind kind, int levels)
{
	HeldLock   *h;
	BatchItem	item;
	int			n = 0;

	h = session_release_target(ln, kind);
	if (h == NULL)
		return false;
	if (h->session_count < levels)
	{
		ereport(WARNING,
				(errmsg("%s \"%s\": this session holds %d at session level, not %d",
						kind_label(kind), ln->name, h->session_count, levels),
				 errdetail("Nothing was released.")));
		return false;
	}
	h->session_count -= levels;
	holds_batch_add(&item, &n, h, levels, true);
	return holds_run_batch(&item, n, ERROR) == 1;
}
