/*-------------------------------------------------------------------------
 *
 * holds_acquire.c
 *	  Acquisitions of this session's locks, single ones: the start of each
 *	  (holds_prepare_acquire), the acquire script's round trip with the
 *	  replicas' WAIT pipelined behind it (holds_run_acquire), the undo of an
 *	  acquisition too few replicas acknowledged, and the bookkeeping of a
 *	  kind that asks servers of its own (holds_begin_elsewhere).
 *
 * Every lock kind's acquire script goes through holds_run_acquire, so the
 * table (holds_table.c) is kept in step with Redis here once: while the
 * script is in flight the entry is uncertain, a granted hold is counted,
 * a refused attempt drops an entry that holds nothing.  The kinds
 * (lock_*.c) build their scripts; their releases, for the undo, come from
 * the table of kinds (holds_kinds.c).
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/timestamp.h"

#include "holds/holds.h"
#include "holds/holds_int.h"
#include "base/base.h"

/* One hold granted by Redis, recorded (holds_count_hold), or refused. */
static void
holds_add(HeldLock *h, const HoldRequest *req, int redis_count,
		  const char *name)
{
	bool		ok = holds_count_hold(h, req, redis_count, name);

	if (h->uncertain)
		holds_settle_entries();
	if (!ok)
		holds_registry_full(name);
}

/*
 * An acquisition fewer replicas acknowledged than rlock.replica_acks asks:
 * give the hold back in Redis (its levels: what was held before stays), keep
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
												 req->holder, req->levels,
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
	holds_acks_refused(ln->name, kind, conn, wanted, acked, ack_error);
}

/* An acquisition was undone for want of replica acknowledgements. */
void
holds_acks_refused(const char *name, RlockKind kind, RedisConn *conn,
				   int wanted, int64 acked, const char *ack_error)
{
	stats_count(RLOCK_STAT_ACK_REFUSALS);
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 kind == RLOCK_KIND_SEMAPHORE ?
			 errmsg("permits of semaphore \"%s\" were not acknowledged by enough Redis replicas",
					name) :
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
 * (AcquireResult); false when it does not have that shape.  A status no
 * script returns, or a grant whose count is not a count (below 1, or past
 * an int: holds_add takes it as one), is no answer either: the connection
 * it came over is then out of step, and is closed (rconn_distrust), and
 * the caller's entry stays uncertain and is reconciled with Redis, where
 * taking it as a refusal would forget a hold Redis may have granted.
 */
bool
holds_parse_acquire(RReply *r, AcquireResult *res)
{
	memset(res, 0, sizeof(*res));
	if (r->type != RREPLY_ARRAY || r->elements < 2 ||
		r->element[0]->type != RREPLY_INTEGER ||
		r->element[0]->integer < 0 ||
		r->element[0]->integer > ACQUIRE_STATUS_MAX ||
		(r->element[0]->integer <= 1 &&
		 r->element[1]->type != RREPLY_INTEGER) ||
		(r->element[0]->integer == 1 &&
		 (r->element[1]->integer < 1 ||
		  r->element[1]->integer > PG_INT32_MAX)))
	{
		if (r->type != RREPLY_ERROR)
			rconn_distrust(r);
		return false;
	}
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
 * An acquire script of this session's holder (h) went out and its reply
 * was lost (the connection broke): it may have run or not, and run twice
 * it would count a hold twice, so the connection layer did not resend it
 * (RlockScript.once).  Settle it by reading Redis's count for our holder
 * field: the table's count and the request's levels more, it applied
 * (*count: that count); the table's count, it did not (*count 0: the
 * caller sends it again).  False, before any round trip, when that cannot
 * tell (a fenced lock, whose token only the reply carried; a kind
 * without a holder field); an ERROR when Redis counts neither (or cannot
 * be asked): the entry stays uncertain, reconciled with Redis later.
 */
static bool
settle_lost_reply(const LockName *ln, RlockKind kind, const HoldRequest *req,
				  HeldLock *h, const RedisCmd *cmd, RedisConn *conn,
				  int64 *count)
{
	bool		fenced = cmd->argc > 2 &&
		!(cmd->argvlen[2] == 1 && cmd->argv[2][0] == '1');

	if (h == NULL || !holds_may_settle_by_count(kind, conn) ||
		(kind == RLOCK_KIND_EXCLUSIVE && fenced))
		return false;
	(void) holds_settle_by_count(ln, 1, kind, req, &h, count);
	return true;
}

/*
 * May acquisitions of kind whose replies conn lost be settled by the
 * session's counts (holds_settle_by_count)?  Kinds whose holds are a
 * holder's count in the lock's hash, after a connection that broke.
 */
bool
holds_may_settle_by_count(RlockKind kind, RedisConn *conn)
{
	return rconn_failure(conn) == RF_LOST &&
		(kind == RLOCK_KIND_EXCLUSIVE || kind == RLOCK_KIND_READ ||
		 kind == RLOCK_KIND_WRITE || kind == RLOCK_KIND_FAIR);
}

/*
 * Acquire scripts of lns[0..n-1] for req's holder, this session's entries
 * hs[], went out and their replies were lost.  Read Redis's count of each
 * (HGET, one round trip): if every count is the table's plus the request's
 * levels, every one applied (counts[i]: that count; returns true); if
 * every count is the table's, none did (counts[] 0; returns false: the
 * caller sends them again).  Anything else is an ERROR, the entries left
 * uncertain (the reconcile brings Redis down to the table's counts).
 */
bool
holds_settle_by_count(const LockName *lns, int n, RlockKind kind,
					  const HoldRequest *req, HeldLock **hs, int64 *counts)
{
	RedisCmd   *hget = palloc(n * sizeof(RedisCmd));
	RReply	  **replies;
	int			napplied = 0;
	int			nnot = 0;

	for (int i = 0; i < n; i++)
	{
		rcmd_init(&hget[i]);
		rcmd_str(&hget[i], "HGET");
		rcmd_str(&hget[i], lns[i].key);
		rcmd_str(&hget[i], lockname_holder_field(kind, req->holder));
	}
	route_run(route_backend(), hget, n, &replies, ERROR,
			  n == 1 ? lns[0].name : NULL);
	for (int i = 0; i < n; i++)
	{
		RReply	   *r = replies[i];
		int64		known = holds_total(hs[i]);
		int64		c = 0;

		if (r->type == RREPLY_STRING)
		{
			char	   *end;

			/* (strtoi64 is PostgreSQL 14 and later) */
			c = (int64) strtoll(r->str, &end, 10);
			if (end == r->str || *end != '\0')
				c = -1;
		}
		else if (r->type != RREPLY_NIL)
			c = -1;
		counts[i] = 0;
		if (c == known + req->levels)
		{
			counts[i] = c;
			napplied++;
		}
		else if (c == known)
			nnot++;
		if (napplied == i + 1 || nnot == i + 1)
			continue;
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("lost the reply of Redis to the acquisition of lock \"%s\"",
						lns[i].name),
				 c < 0 || (c != known && c != known + req->levels) ?
				 errdetail("The connection broke after the request was sent; Redis now counts %s hold(s) of this session where it counted %lld.",
						   c < 0 ? "an unreadable number of" :
						   psprintf("%lld", (long long) c), (long long) known) :
				 errdetail("The connection broke after the requests were sent; Redis ran some of them, not all."),
				 errhint("The session reconciles its holds of the lock with Redis before its next rlock call.")));
	}
	ereport(DEBUG1,
			(errmsg_internal("rlock: the reply to an acquisition of lock \"%s\"%s was lost; it %s",
							 lns[0].name, n > 1 ? " and others" : "",
							 napplied > 0 ? "applied" : "did not apply, sent again")));
	return napplied > 0;
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

	/* a session past one of its caps sends nothing (holds_quota.c) */
	holds_quota_check(ln, 1, kind, req);
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
	for (int attempt = 0;; attempt++)
	{
		int64		count = 0;

		req->sent_at = GetCurrentTimestamp();
		if (route_run(conn, acks_wanted > 0 ? cmds : cmd,
					  acks_wanted > 0 ? 2 : 1, &replies, DEBUG1, ln->name))
			break;
		/* Redis never saw it: nothing to reconcile, one message */
		if (rconn_failed_before_sending(conn))
		{
			if (h)
			{
				holds_set_uncertain(h, false);
				holds_drop_if_unused(h);
			}
			rconn_report(conn, ERROR, ln->name);
		}
		/* its reply was lost: did it apply?  (else it stays uncertain) */
		if (attempt >= HOLDS_SETTLE_MAX_RESENDS || acks_wanted > 0 ||
			!settle_lost_reply(ln, kind, req, h, cmd, conn, &count))
			rconn_report(conn, ERROR, ln->name);
		if (count > 0)
		{
			/* applied once: the grant it answered */
			res.status = 1;
			res.value = count;
			holds_add(h, req, (int) count, ln->name);
			stats_count(RLOCK_STAT_ACQUISITIONS);
			return res;
		}
		/* not applied: sent again */
	}
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
		/*
		 * Every script checks before it writes: its own refusals, and the
		 * errors that say it never ran, granted nothing.  Any other error
		 * may follow what it wrote (a server that ran it and answered an
		 * error): the entry stays uncertain, reconciled (given back) at
		 * the transaction's end or the next call.
		 */
		if (h && !rconn_error_may_have_applied(r))
		{
			holds_set_uncertain(h, false);
			holds_drop_if_unused(h);
		}
		rconn_reply_error(r, ERROR, ln->name);
	}
	/* a grant's count of holds: a count, within an int (holds_count_hold) */
	if (r->type == RREPLY_ARRAY && r->elements >= 2 &&
		r->element[0]->type == RREPLY_INTEGER && r->element[0]->integer == 1 &&
		r->element[1]->type == RREPLY_INTEGER &&
		(r->element[1]->integer < 1 || r->element[1]->integer > PG_INT32_MAX))
		rconn_protocol_error(r, ln->name,
							 psprintf("Redis granted it with a count of holds of %lld, outside 1 .. %d.",
									  (long long) r->element[1]->integer,
									  PG_INT32_MAX));	/* stays uncertain */
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
		else
			holds_quota_owner_taken(ln->key, kind, req);
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
 * The start of every acquisition of ln as kind: reconcile what an earlier
 * call left uncertain, connect (an ERROR here means Redis never saw the
 * request), fill in req (lease_ms 0: the watchdog's lease, renewed), and
 * return the holder.  For this session's own holds (owner NULL), forget
 * its holds of the name that were lost (with a WARNING; both sides of a
 * read/write lock), and refuse it when this session holds the name as a
 * kind that cannot share it.
 */
const char *
holds_prepare_acquire(const LockName *ln, RlockKind kind, RlockScope scope,
					  int64 lease_ms, const char *owner, HoldRequest *req)
{
	HeldLock   *h;

	if (owner == NULL)
		holds_check_lost_on_key(ln->key, kind, ln->name);
	holds_settle();
	holds_require_settled(ln, kind);
	/* its release still the worker's (holds_strand.c): before any I/O */
	if (owner == NULL && kind_is_local(kind))
		holds_refuse_stranded(ln);
	/* (in a Cluster: the node of its slot; a Redlock asks its own masters) */
	if (kind_is_local(kind))
		route_ready_for(route_backend(), ln->key, ln->name);
	req->track = (owner == NULL);
	req->scope = scope;
	req->watchdog = (lease_ms == 0);
	req->lease_ms = req->watchdog ? rlock_watchdog_timeout_ms : lease_ms;
	req->sent_at = 0;
	req->holder = owner;
	req->levels = 1;
	if (owner != NULL)
		return owner;

	h = holds_find_conflicting(ln->key, kind);
	if (h != NULL)
		holds_held_as_other_kind(ln, h);
	req->holder = rlock_backend_holder();
	return req->holder;
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
	HeldLock   *h;

	holds_quota_check(ln, 1, kind, req);
	h = holds_enter(ln->key, kind);
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
			holds_settle_entries();
			holds_registry_full(name);
		}
		stats_count(RLOCK_STAT_ACQUISITIONS);
		return;
	}
	holds_set_uncertain(h, false);
	holds_drop_if_unused(h);
}
