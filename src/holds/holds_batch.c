/*-------------------------------------------------------------------------
 *
 * holds_batch.c
 *	  Batches of the held-lock table: telling Redis, in one pipelined round
 *	  trip, about many holds at once (releases at transaction end, session
 *	  end and rlock_release_all; reconciling uncertain entries).
 *
 * The table (holds_table.c) records what Redis said; this file owns what
 * goes out for many entries together (a single release is a batch of one,
 * holds_release.c), and how each answer puts the table and Redis in
 * agreement again (released, found gone and so lost, refused and so kept,
 * or not known and so uncertain).  Before the reconcile at the start of a
 * call it runs the clean-ups an ERROR left (holds_cleanup.c); a reconcile
 * in the middle of a call (holds_settle_entries) does not, since they
 * would end that call's own wait.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "holds/holds.h"
#include "holds/holds_int.h"
#include "base/base.h"

static int	holds_run_local_batch(BatchItem *items, int n, int elevel);

/*
 * Was h's name counted already, as the other side of a read/write lock?
 * (Counted now if not: *names, room for n, in holds_batch_cxt.)
 */
static bool
rw_side_counted(HeldLock *h, char ***names, int *nnames, int n)
{
	if (h->kind != RLOCK_KIND_READ && h->kind != RLOCK_KIND_WRITE)
		return false;
	for (int i = 0; i < *nnames; i++)
		if (strcmp((*names)[i], h->key) == 0)
			return true;
	if (*names == NULL)
		*names = MemoryContextAlloc(holds_batch_cxt, n * sizeof(char *));
	(*names)[(*nnames)++] = MemoryContextStrdup(holds_batch_cxt, h->key);
	return false;
}

/*
 * Tell Redis about holds already removed from our table, in one round trip.
 * Locks found gone are reported as lost and forgotten.  When Redis cannot
 * be reached the entries become uncertain and the failure is reported at
 * elevel.  An error reply to a release (NOPERM, OOM...) means it did not
 * happen: with elevel ERROR (a user's call) its session-level holds are
 * put back and the first such error is raised once the others are done;
 * otherwise (transaction end, exit) it is a WARNING and the entry stays
 * uncertain.  Returns the number of names the session's items released
 * (a read/write lock's two sides count once).
 */
/*
 * The items of a kind whose locks live on servers of their own (a
 * Redlock): lowered to the table's count wherever they live, through the
 * kind's settle operation, which never leaves them uncertain.  A lock that
 * too few of its servers still had is reported lost.
 */
static int
run_batch_elsewhere(BatchItem *items, int n, int elevel)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(holds_batch_cxt);
	const char **keys = palloc(n * sizeof(char *));
	int		   *targets = palloc(n * sizeof(int));
	int		   *before = palloc(n * sizeof(int));
	bool	   *held = palloc(n * sizeof(bool));
	int			nheld = 0;
	RlockKind	kind = items[0].h->kind;

	for (int i = 0; i < n; i++)
	{
		HeldLock   *h = items[i].h;

		Assert(h->kind == kind);
		keys[i] = h->key;
		targets[i] = holds_total(h);
		before[i] = holds_total(h) + items[i].levels;
		if (items[i].levels > 0)
			registry_releasing(h->key, h->kind, holds_total(h));
	}
	PG_TRY();
	{
		holds_kind_ops(kind)->settle(keys, targets, before, n,
									 rlock_backend_holder(), held, elevel);
	}
	PG_CATCH();
	{
		/* as in run_batch_round_trip: the watchdog renews what we count */
		for (int i = 0; i < n; i++)
			(void) holds_sync_registry(items[i].h, false);
		PG_RE_THROW();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(oldcxt);
	for (int i = 0; i < n; i++)
	{
		HeldLock   *h = items[i].h;

		if (!held[i])
		{
			if (!registry_is_lost(h->key, h->kind))
				stats_count(RLOCK_STAT_LOCKS_LOST);
			holds_report_lost(h->kind, h->key, "Fewer than a majority of its servers (those rlock.redlock_urls names now) still had it when this session released it.");
			holds_forget(h);
			continue;
		}
		/* a name this call released (not one it only reconciled) */
		if (items[i].session)
			nheld++;
		if (items[i].levels > 0)
			stats_add(RLOCK_STAT_RELEASES, items[i].levels);
		holds_set_uncertain(h, false);
		(void) holds_sync_registry(h, false);
		holds_drop_if_unused(h);
	}
	return nheld;
}

int
holds_run_batch(BatchItem *items, int n, int elevel)
{
	int			nelsewhere = 0;
	int			nheld_elsewhere = 0;

	/* the kinds that live elsewhere first, then rlock.redis_url's */
	for (int i = 0; i < n; i++)
	{
		if (!kind_is_local(items[i].h->kind))
		{
			BatchItem	t = items[nelsewhere];

			items[nelsewhere++] = items[i];
			items[i] = t;
		}
	}
	for (int kind = 0, done = 0; done < nelsewhere; kind++)
	{
		int			k = done;

		for (int i = done; i < nelsewhere; i++)
		{
			if (items[i].h->kind == kind)
			{
				BatchItem	t = items[k];

				items[k++] = items[i];
				items[i] = t;
			}
		}
		if (k > done)
			nheld_elsewhere += run_batch_elsewhere(items + done, k - done,
												   elevel);
		done = k;
	}
	return nheld_elsewhere +
		holds_run_local_batch(items + nelsewhere, n - nelsewhere, elevel);
}

/*
 * How a batch's round trip reports a failure.  A user's release whose every
 * item the worker can finish, should Redis not answer (holds_strand.c):
 * no ERROR for want of an answer; the failure goes to the server log, the
 * session hears the WARNING of the hand-over.  (Not a reconcile,
 * holds_settle's: that one still fails the call when Redis cannot be
 * asked.)
 */
static int
round_trip_elevel(const BatchItem *items, int n, int elevel)
{
	if (elevel < ERROR)
		return elevel;
	for (int i = 0; i < n; i++)
		if (items[i].levels == 0 || !holds_can_strand(items[i].h))
			return elevel;
	return LOG;
}

/*
 * The batch's round trip.  Should it be interrupted (a cancel, a timeout
 * raised as an ERROR), the table no longer counts what the batch was
 * giving back, and neither may the registry, or the watchdog would go on
 * renewing locks no session tracks (a cancelled DISCARD ALL); what Redis
 * was not told expires with its lease, or goes at the next reconcile.
 */
static RReply **
run_batch_round_trip(RedisConn *conn, RedisCmd *cmds, BatchItem *items,
					 int n, int elevel)
{
	RReply	  **replies = NULL;

	PG_TRY();
	{
		(void) route_run(conn, cmds, n, &replies, elevel,
						 n == 1 ? items[0].h->key : NULL);
	}
	PG_CATCH();
	{
		for (int i = 0; i < n; i++)
			(void) holds_sync_registry(items[i].h, false);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return replies;
}

/*
 * The batch's items of rlock.redis_url's kinds: one round trip.  Resets
 * holds_batch_cxt, where the items of the other kinds were prepared too.
 */
static int
holds_run_local_batch(BatchItem *items, int n, int elevel)
{
	MemoryContext oldcxt;
	RedisCmd   *cmds;
	RReply **replies = NULL;
	RedisConn  *conn = route_backend();
	const char *holder = rlock_backend_holder();
	int			nheld = 0;
	RReply *failed = NULL;
	const char *bad_key = NULL;	/* a reply of a shape no script returns */
	const char *failed_key = NULL;
	TimestampTz sent_at = GetCurrentTimestamp();
	char	  **rw_counted = NULL;	/* read/write names counted (copies) */
	int			nrw_counted = 0;

	if (n == 0)
	{
		MemoryContextReset(holds_batch_cxt);
		return 0;
	}
	oldcxt = MemoryContextSwitchTo(holds_batch_cxt);
	cmds = palloc(n * sizeof(RedisCmd));
	for (int i = 0; i < n; i++)
	{
		HeldLock   *h = items[i].h;
		const RlockKindOps *ops = holds_kind_ops(h->kind);

		items[i].latch = NULL;
		if (items[i].levels > 0)
			items[i].latch = ops->build_release(&cmds[i], h->kind, h->key,
												holder, items[i].levels,
												holds_keep_lease(h));
		else
			ops->build_reconcile(&cmds[i], h->kind, h->key, holder,
								 holds_total(h));
	}
	MemoryContextSwitchTo(oldcxt);

	/*
	 * Until Redis confirms, our table and Redis may disagree.  What a
	 * user's call leaves uncertain is reconciled when its transaction ends;
	 * what a transaction end leaves uncertain waits for the next call.
	 */
	for (int i = 0; i < n; i++)
	{
		bool		retry = items[i].h->settle_at_end || elevel >= ERROR;

		holds_set_uncertain(items[i].h, true);
		items[i].h->settle_at_end = retry;

		/* the watchdog may find it gone now: our release, not a loss */
		if (items[i].levels > 0)
			registry_releasing(items[i].h->key, items[i].h->kind,
							   holds_total(items[i].h));
	}

	replies = run_batch_round_trip(conn, cmds, items, n,
								   round_trip_elevel(items, n, elevel));

	for (int i = 0; i < n; i++)
	{
		HeldLock   *h = items[i].h;
		/* (a Cluster's node that failed leaves NULL for its commands) */
		RReply *r = replies != NULL ? replies[i] : NULL;
		bool		lost;
		bool		new_expiry;

		if (r == NULL)
		{
			/* nothing left of the name here: the worker finishes it */
			if (holds_can_strand(h))
			{
				bool		count = items[i].session &&
					!rw_side_counted(h, &rw_counted, &nrw_counted, n);

				if (holds_strand(h))
				{
					if (count)
						nheld++;
					continue;
				}
			}
			(void) holds_sync_registry(h, false);
			continue;			/* stays uncertain */
		}
		if (r->type != RREPLY_INTEGER && r->type != RREPLY_NIL &&
			r->type != RREPLY_ERROR)
		{
			/*
			 * No release or reconcile answers that: the connection is out
			 * of step (closed before its next use) and the reply says
			 * nothing.  The entry stays uncertain, as if unanswered.
			 */
			rconn_distrust(r);
			if (bad_key == NULL)
				bad_key = MemoryContextStrdup(holds_batch_cxt, h->key);
			(void) holds_sync_registry(h, false);
			continue;
		}
		if (r->type == RREPLY_ERROR && !rconn_reply_is(r, "RLOCKKIND"))
		{
			if (elevel >= ERROR && items[i].session)
			{
				/*
				 * A refusal before the script ran: the release did not
				 * happen, the holds are still ours.  An error that may
				 * follow its writes leaves the entry uncertain at the
				 * count the release meant: the reconcile lowers Redis to
				 * it (Redis has it or one release more), where restoring
				 * the count would take a release that ran for a lost
				 * lock and forget what Redis still holds.
				 */
				if (rconn_error_may_have_applied(r))
					holds_set_uncertain(h, true);
				else
				{
					h->session_count += items[i].levels;
					holds_set_uncertain(h, false);
				}
				if (failed == NULL)
				{
					oldcxt = MemoryContextSwitchTo(holds_batch_cxt);
					failed = palloc(sizeof(RReply));
					*failed = *r;
					failed->str = pnstrdup(r->str, r->len);
					failed_key = pstrdup(h->key);
					MemoryContextSwitchTo(oldcxt);
				}
			}
			else
				rconn_reply_error(r, WARNING, h->key);
			(void) holds_sync_registry(h, false);
			continue;
		}
		if (items[i].levels > 0)
			lost = (r->type == RREPLY_NIL || r->type == RREPLY_ERROR);
		else
			lost = (r->type == RREPLY_ERROR ||
					(r->type == RREPLY_INTEGER && holds_total(h) > 0 &&
					 r->integer < holds_total(h)));
		if (items[i].latch != NULL && r->type == RREPLY_INTEGER)
			route_defer_del(conn, items[i].latch);
		if (lost)
		{
			if (!registry_is_lost(h->key, h->kind))
				stats_count(RLOCK_STAT_LOCKS_LOST);
			holds_report_lost(h->kind, h->key, "It expired or was released by someone else while this session held it.");
			holds_forget(h);
			continue;
		}
		/*
		 * Count a name this call released: a release, or the reconcile of
		 * an uncertain hold that found more of ours than it keeps; not the
		 * reconcile of a lock found lost (rlock_release_all's), which
		 * released nothing.
		 */
		if (items[i].session &&
			(items[i].levels > 0 ||
			 (r->type == RREPLY_INTEGER && r->integer > holds_total(h))) &&
			!rw_side_counted(h, &rw_counted, &nrw_counted, n))
			nheld++;
		new_expiry = false;
		if (items[i].levels > 0)
		{
			stats_add(RLOCK_STAT_RELEASES, items[i].levels);
			if (holds_keep_lease(h) > 0)
			{
				h->expires_at = sent_at + holds_keep_lease(h) * 1000;
				new_expiry = true;
			}
		}
		holds_set_uncertain(h, false);
		/* an entry that holds nothing leaves the registry at once */
		if (holds_total(h) > 0)
			(void) holds_sync_registry(h, new_expiry);
		holds_drop_if_unused(h);
	}
	if (failed != NULL)
		rconn_reply_error(failed, ERROR, failed_key);
	if (bad_key != NULL)
		ereport(elevel >= ERROR ? ERROR : WARNING,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("unexpected reply from Redis for lock \"%s\"", bad_key),
				 errdetail("Redis answered a release or a reconcile with a reply of a type neither returns; the connection was closed."),
				 errhint("What this session holds is checked with Redis again at its next call.")));
	MemoryContextReset(holds_batch_cxt);
	return nheld;
}

/*
 * Room for one item per entry of the table, in holds_batch_cxt: holds_run_batch frees it
 * (even when it fails, at the next batch).
 */
BatchItem *
holds_batch_items(void)
{
	Assert(holds_table != NULL);	/* callers have something to release */
	return MemoryContextAlloc(holds_batch_cxt,
							  Max(1, hash_get_num_entries(holds_table)) *
							  sizeof(BatchItem));
}

/* Add an item for h: release "levels", or reconcile if h is uncertain. */
void
holds_batch_add(BatchItem *items, int *n, HeldLock *h, int levels, bool session)
{
	items[*n].h = h;
	items[*n].levels = h->uncertain ? 0 : levels;
	items[*n].session = session;
	(*n)++;
}

/*
 * holds_settle's batch in a Cluster: reported at WARNING, and without
 * waiting for a master that is down (rconn_set_impatient).
 */
static void
settle_impatiently(BatchItem *items, int n)
{
	rconn_set_impatient(route_backend(), true);
	PG_TRY();
	{
		holds_run_batch(items, n, WARNING);
	}
	PG_FINALLY();
	{
		rconn_set_impatient(route_backend(), false);
	}
	PG_END_TRY();
}

/*
 * Reconcile every uncertain entry with Redis, after the clean-ups an
 * ERROR left to do.  Runs before each rlock call; ERROR when Redis cannot
 * be reached (the entries stay uncertain); in a Cluster a WARNING.
 */
void
holds_settle(void)
{
	holds_run_cleanups();
	holds_settle_entries();
}

/*
 * The reconcile alone, for a call that is under way (an attempt of a wait
 * that gives back what it was granted): the clean-ups are for what an
 * earlier call left, and would end this call's own wait (its channel).
 */
void
holds_settle_entries(void)
{
	HASH_SEQ_STATUS seq;
	HeldLock   *h;
	BatchItem  *items;
	int			n = 0;

	if (holds_n_uncertain == 0 || holds_table == NULL)
		return;
	items = holds_batch_items();
	hash_seq_init(&seq, holds_table);
	while ((h = hash_seq_search(&seq)) != NULL)
	{
		if (h->uncertain)
			holds_batch_add(items, &n, h, 0, false);
	}

	/*
	 * One Redis: when it cannot be asked, nothing can be done.  A Cluster:
	 * a master that is down must not stop the locks of the others; what
	 * stays uncertain is refused by the calls on that very lock
	 * (holds_require_settled).
	 */
	if (!route_is_cluster())
		holds_run_batch(items, n, ERROR);
	else
		settle_impatiently(items, n);
}

/*
 * Reconcile every hold of kind with its servers now, as if an interrupted
 * call had left it uncertain (the servers a Redlock lives on changed): what
 * they do not confirm is reported lost.
 */
void
holds_recheck_kind(RlockKind kind)
{
	HASH_SEQ_STATUS seq;
	HeldLock   *h;

	if (holds_table == NULL)
		return;
	hash_seq_init(&seq, holds_table);
	while ((h = hash_seq_search(&seq)) != NULL)
	{
		if (h->kind == kind && holds_total(h) > 0)
			holds_set_uncertain(h, true);
	}
	holds_settle_entries();
}

/*
 * rlock_release_all(): release every session-level hold, all levels.
 * Returns the number of names released (both sides of a read/write lock:
 * one name).
 */
int
holds_release_all_session(void)
{
	HASH_SEQ_STATUS seq;
	HeldLock   *h;
	BatchItem  *items;
	int			n = 0;

	if (holds_table == NULL || hash_get_num_entries(holds_table) == 0)
		return 0;
	holds_settle();
	items = holds_batch_items();
	hash_seq_init(&seq, holds_table);
	while ((h = hash_seq_search(&seq)) != NULL)
	{
		int			levels = h->session_count;

		if (levels == 0)
			continue;
		if (registry_is_lost(h->key, h->kind))
		{
			holds_report_lost(h->kind, h->key, "It expired, was force-released, Redis restarted, or it could not be renewed in time.");
			h->session_count = 0;
			holds_set_uncertain(h, true);
			holds_batch_add(items, &n, h, 0, false);
			continue;
		}
		h->session_count = 0;
		holds_batch_add(items, &n, h, levels, true);
	}
	return holds_run_batch(items, n, ERROR);
}

