/*-------------------------------------------------------------------------
 *
 * holds_set.c
 *	  A set of names taken all or none (the multi-lock), and released
 *	  together: the held-lock table's side of it.
 *
 * An attempt sends the acquire script of every name in one pipelined
 * round trip (in a Cluster, one per node, every node at once: the routed
 * connection groups them).  Every entry is uncertain while the scripts are
 * in flight, so an interrupted attempt is reconciled as a single one is.
 * Then either every name was granted, and every hold is recorded (or, when
 * the registry has no room for one of them, none), or the holds that were
 * granted are given back before the attempt returns: their entries stay
 * uncertain and one reconcile lowers Redis's counts to the table's, what
 * this session held before the attempt.  Between attempts the session
 * holds nothing of the set it did not hold before, so sessions waiting for
 * overlapping sets never deadlock.
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

/*
 * The start of a set acquisition: holds_prepare_acquire for every name
 * (lost holds forgotten, names held as a kind that cannot share them
 * refused), with one reconcile and one connection for all.  Returns the
 * holder.
 */
const char *
holds_prepare_set(const LockName *lns, int n, RlockKind kind,
				  RlockScope scope, int64 lease_ms, HoldRequest *req)
{
	for (int i = 0; i < n; i++)
	{
		HeldLock   *h = holds_find(lns[i].key, kind);

		if (h != NULL)
			holds_check_lost(h, lns[i].name);
	}
	holds_settle();
	for (int i = 0; i < n; i++)
	{
		HeldLock   *other;

		holds_require_settled(&lns[i], kind);
		other = holds_find_conflicting(lns[i].key, kind);
		if (other != NULL)
			holds_held_as_other_kind(&lns[i], other);
		/* (its release still the worker's: holds_strand.c) */
		if (kind_is_local(kind))
			holds_refuse_stranded(&lns[i]);
	}
	route_ready(route_backend(), lns[0].name);
	req->track = true;
	req->scope = scope;
	req->watchdog = (lease_ms == 0);
	req->lease_ms = req->watchdog ? rlock_watchdog_timeout_ms : lease_ms;
	req->sent_at = 0;
	req->holder = rlock_backend_holder();
	req->levels = 1;
	return req->holder;
}

/*
 * Record a granted hold of every name, or of none: when the registry has
 * no room for one, those already counted are taken back and every entry is
 * left for the reconcile, which gives the holds back in Redis.
 */
static void
count_all(HeldLock **hs, const LockName *lns, int n, const HoldRequest *req,
		  const AcquireResult *res)
{
	for (int i = 0; i < n; i++)
	{
		if (holds_count_hold(hs[i], req, (int) res[i].value, lns[i].name))
			continue;
		for (int j = 0; j < i; j++)
		{
			holds_take_back(hs[j], req);
			holds_set_uncertain(hs[j], true);
			(void) holds_sync_registry(hs[j], false);
		}
		holds_settle_entries();
		holds_registry_full(lns[i].name);
	}
	stats_add(RLOCK_STAT_ACQUISITIONS, n);
}

/*
 * One attempt at the set lns[0..n-1] (distinct names), cmds[i] being the
 * acquire script of lns[i] for req->holder.  Returns true when every name
 * was granted and recorded.  Otherwise nothing of the set is held that was
 * not held before, and res[] says why for each name (status 0: refused,
 * value the holder's remaining lease; status > 1: refused for a reason of
 * the lock kind, for the caller to report; status 1: it was granted, and
 * given back).  ERROR for error replies, replica acknowledgements that did
 * not come, and failures of Redis.
 */
bool
holds_run_acquire_set(const LockName *lns, int n, RlockKind kind,
					  HoldRequest *req, RedisCmd *cmds, AcquireResult *res)
{
	RedisConn  *conn = route_backend();
	bool		cluster = route_is_cluster();
	HeldLock  **hs = palloc(n * sizeof(HeldLock *));
	RedisCmd   *all = cmds;
	int		   *pos = palloc(n * sizeof(int));
	int		   *waitpos = palloc(n * sizeof(int));
	int		   *wanted = palloc(n * sizeof(int));
	bool		any_wait = false;
	int			nall = 0;
	int			ngranted = 0;
	RReply	  **replies;
	char	   *error = NULL;
	const char *error_name = NULL;
	bool		bad_reply = false;
	int			short_of = -1;	/* a member whose acknowledgements failed */
	int64		acked = -1;
	char	   *ack_error = NULL;

	/* a session past one of its caps sends nothing (holds_quota.c) */
	holds_quota_check(lns, n, kind, req);

	/*
	 * With replicas, WAIT behind the scripts: once on one Redis (it counts
	 * every write before it on the connection), behind each script in a
	 * Cluster (where it travels with its script to the script's node).
	 */
	for (int i = 0; i < n; i++)
	{
		wanted[i] = (cluster || i == 0) ?
			route_acks_wanted(conn, lns[i].key) : wanted[0];
		pos[i] = i;
		waitpos[i] = -1;
		any_wait |= wanted[i] > 0;
	}
	if (any_wait)
	{
		/* (without replicas, the caller's commands go as they are) */
		all = palloc(2 * n * sizeof(RedisCmd));
		for (int i = 0; i < n; i++)
		{
			rcmd_copy(&all[nall], &cmds[i]);
			pos[i] = nall++;
			if (wanted[i] > 0 && (cluster || i == n - 1))
			{
				rcmd_wait(&all[nall], wanted[i], rlock_replica_ack_timeout_ms);
				waitpos[i] = nall++;
			}
		}
	}
	else
		nall = n;

	for (int i = 0; i < n; i++)
	{
		hs[i] = holds_enter(lns[i].key, kind);
		holds_set_uncertain(hs[i], true);
	}
	for (int attempt = 0;; attempt++)
	{
		int64	   *counts;

		req->sent_at = GetCurrentTimestamp();
		if (route_run(conn, all, nall, &replies, DEBUG1,
					  n == 1 ? lns[0].name : NULL))
			break;
		/* Redis never saw them: nothing to reconcile, one message */
		if (rconn_failed_before_sending(conn))
		{
			for (int i = 0; i < n; i++)
			{
				holds_set_uncertain(hs[i], false);
				holds_drop_if_unused(hs[i]);
			}
			rconn_report(conn, ERROR, n == 1 ? lns[0].name : NULL);
		}
		/* their replies were lost: did they apply?  (else uncertain) */
		if (attempt >= HOLDS_SETTLE_MAX_RESENDS || any_wait ||
			!holds_may_settle_by_count(kind, conn))
			rconn_report(conn, ERROR, n == 1 ? lns[0].name : NULL);
		counts = palloc(n * sizeof(int64));
		if (holds_settle_by_count(lns, n, kind, req, hs, counts))
		{
			/* every one applied once: the grants they answered */
			for (int i = 0; i < n; i++)
			{
				memset(&res[i], 0, sizeof(res[i]));
				res[i].status = 1;
				res[i].value = counts[i];
			}
			count_all(hs, lns, n, req, res);
			return true;
		}
		/* none applied: sent again */
	}

	/* copy every answer out: giving holds back uses the connection again */
	for (int i = 0; i < n; i++)
	{
		RReply	   *r = replies[pos[i]];

		if (r->type == RREPLY_ERROR)
		{
			/*
			 * Every script checks before it writes: its refusals granted
			 * nothing.  An error that may follow its writes is taken as a
			 * grant not known: given back to be sure (the reconcile).
			 */
			memset(&res[i], 0, sizeof(res[i]));
			res[i].status = rconn_error_may_have_applied(r) ? 1 : -1;
			if (res[i].status == 1)
				ngranted++;
			if (error == NULL)
			{
				error = pnstrdup(r->str, r->len);
				error_name = lns[i].name;
			}
			continue;
		}
		if (!holds_parse_acquire(r, &res[i]))
		{
			res[i].status = 1;	/* not known: give it back to be sure */
			bad_reply = true;
			if (error_name == NULL)
				error_name = lns[i].name;
		}
		if (res[i].status == 1)
			ngranted++;
	}
	for (int i = 0; i < n; i++)
	{
		RReply	   *w;

		if (waitpos[i] < 0 || ngranted == 0)
			continue;
		w = replies[waitpos[i]];
		if (w->type == RREPLY_INTEGER && w->integer >= wanted[i])
			continue;
		short_of = i;
		acked = w->type == RREPLY_INTEGER ? w->integer : -1;
		if (w->type == RREPLY_ERROR)
			ack_error = pnstrdup(w->str, w->len);
		else if (w->type != RREPLY_INTEGER)
			ack_error = "its reply was not a number";
		break;
	}

	if (ngranted == n && short_of < 0 && error == NULL && !bad_reply)
	{
		count_all(hs, lns, n, req, res);
		/* a replayed acquire left a surplus somewhere: bring it down */
		if (holds_n_uncertain > 0)
			holds_settle_entries();
		return true;
	}

	/*
	 * Not all of them: what was granted is given back (its entry stays
	 * uncertain for the reconcile); entries that hold nothing go.
	 */
	for (int i = 0; i < n; i++)
	{
		if (res[i].status == 1)
			continue;
		holds_set_uncertain(hs[i], false);
		holds_drop_if_unused(hs[i]);
	}
	if (ngranted > 0)
		holds_settle_entries();
	if (short_of >= 0)
		holds_acks_refused(lns[short_of].name, kind, conn, wanted[short_of], acked,
						   ack_error);
	if (error != NULL)
	{
		RReply		e = {0};

		e.type = RREPLY_ERROR;
		e.str = error;
		e.len = strlen(error);
		rconn_reply_error(&e, ERROR, error_name);
	}
	if (bad_reply)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("unexpected reply from Redis for lock \"%s\"",
						error_name)));
	return false;
}

/*
 * rlock_multi_release: one session-level hold of each name (distinct), in
 * one round trip.  Returns true when every name was held; each one that
 * was not gets the WARNING of a single release, and the others are still
 * released.
 */
bool
holds_release_set(const LockName *lns, int n, RlockKind kind)
{
	bool		all = true;
	bool		any = false;
	HeldLock  **hs = palloc(n * sizeof(HeldLock *));
	bool	   *lost = palloc0(n * sizeof(bool));
	BatchItem  *items;
	int			nitems = 0;

	for (int i = 0; i < n; i++)
	{
		HeldLock   *h = holds_find(lns[i].key, kind);

		if (h != NULL && holds_check_lost(h, lns[i].name))
			lost[i] = true;
	}
	holds_settle();
	/* every check before the table changes: an ERROR leaves it as it was */
	for (int i = 0; i < n; i++)
	{
		hs[i] = NULL;
		if (lost[i])
		{
			all = false;		/* (said so already) */
			continue;
		}
		holds_require_settled(&lns[i], kind);
		hs[i] = holds_session_hold(&lns[i], kind);
		if (hs[i] == NULL)
			all = false;
		else
			any = true;
	}
	if (!any)
		return false;			/* (nor, maybe, any table of holds yet) */
	items = holds_batch_items();
	for (int i = 0; i < n; i++)
	{
		if (hs[i] == NULL)
			continue;
		hs[i]->session_count--;
		holds_batch_add(items, &nitems, hs[i], 1, true);
	}
	if (holds_run_batch(items, nitems, ERROR) < nitems)
		all = false;
	return all;
}
