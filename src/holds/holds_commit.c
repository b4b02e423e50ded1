/*-------------------------------------------------------------------------
 *
 * holds_commit.c
 *	  The check before COMMIT (XACT_EVENT_PRE_COMMIT, rlock.verify_on_commit):
 *	  are the transaction-level locks still held, with enough lease left?
 *
 * Before COMMIT, interrupts are still allowed, and the transaction-level
 * locks are checked in one round trip: each must still be held and have
 * enough lease left to cover the commit, COMMIT_MIN_LEASE_MS; a lock
 * renewed by the watchdog is extended by the same script, a fixed lease is
 * not.  The node that answers must still be the master: the sentinels are
 * asked in the same parallel round trip, in a Cluster the other masters
 * right after it (master_confirm.c).  The locks of a kind that lives on
 * servers of its own are asked there, through the kind's renew operation
 * (holds_kinds.c).  An ERROR here rolls the transaction back, which is
 * what it is for.  holds_xact.c calls it.
 *
 * Three ways to refuse the COMMIT: a loss an earlier call found
 * (holds_lost.c, holds_refuse_lost_xact; PREPARE too); a lock that is
 * gone (not in Redis, fewer holds there than the table counts, not
 * confirmed by a majority of its
 * servers, found lost by the watchdog, or checked on a node that is no
 * longer master) is forgotten whole, its session-level holds too, and
 * reported lost; a lock still held whose lease is too short to cover the
 * commit is not lost: the rollback gives back its transaction-level holds
 * (holds_xact.c), and its session-level holds stay.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/timestamp.h"

#include "redis/redis.h"
#include "holds/holds.h"
#include "holds/holds_int.h"
#include "base/base.h"

/*
 * The lease a transaction-level lock must have left after the check before
 * COMMIT (base/base.h).  A commit that stalls longer (a synchronous
 * standby, a stopped server) can still outlive the lease; fencing tokens
 * close that window.
 */
#define COMMIT_MIN_LEASE_MS		RLOCK_COMMIT_MIN_LEASE_MS

/* The entries with transaction-level holds (palloc'd array). */
static int
holds_xact_snapshot(HeldLock ***hs)
{
	HASH_SEQ_STATUS seq;
	HeldLock   *h;
	int			n = 0;

	*hs = palloc(Max(1, holds_n_with_xact) * sizeof(HeldLock *));
	if (holds_table == NULL)
		return 0;
	hash_seq_init(&seq, holds_table);
	while ((h = hash_seq_search(&seq)) != NULL)
	{
		if (h->xact_count > 0)
			(*hs)[n++] = h;
	}
	return n;
}

/*
 * The check before COMMIT found h lost: forget it whole, its session-level
 * holds too (Redis too, at the next reconcile), and refuse the COMMIT.
 */
static void
holds_lost_at_commit(HeldLock *h, const char *why)
{
	char	   *key = pstrdup(h->key);
	bool		permits = (h->kind == RLOCK_KIND_SEMAPHORE);

	if (!registry_is_lost(h->key, h->kind))
		stats_count(RLOCK_STAT_LOCKS_LOST);
	holds_forget_and_reconcile(h);
	ereport(ERROR,
			(errcode(ERRCODE_TRANSACTION_ROLLBACK),
			 permits ?
			 errmsg("cannot commit: permits of semaphore \"%s\" held by this transaction were lost",
					key) :
			 errmsg("cannot commit: lock \"%s\" held by this transaction was lost",
					key),
			 errdetail("%s", why),
			 errhint("Writes guarded by a lost lock are never committed (rlock.verify_on_commit).")));
}

/*
 * The check before COMMIT found h still held, with left_ms of lease left,
 * too little to cover the commit: refuse the COMMIT.  h is not lost: the
 * rollback gives back its transaction-level holds, in Redis too, and keeps
 * its session-level ones (holds_end_xact).
 */
static void
holds_short_lease_at_commit(HeldLock *h, int64 left_ms, int64 need_ms)
{
	ereport(ERROR,
			(errcode(ERRCODE_TRANSACTION_ROLLBACK),
			 h->kind == RLOCK_KIND_SEMAPHORE ?
			 errmsg("cannot commit: permits of semaphore \"%s\" held by this transaction have too little lease left to cover the commit",
					h->key) :
			 errmsg("cannot commit: lock \"%s\" held by this transaction has too little lease left to cover the commit",
					h->key),
			 errdetail("Its lease had %lld ms left, less than the %lld ms a commit is given; the transaction is rolled back, and with it its transaction-level holds of the lock.",
					   (long long) Max(left_ms, 0), (long long) need_ms),
			 errhint("Take it with a longer lease, or with a NULL lease (renewed automatically).")));
}

/* The check before COMMIT extended h's lease. */
static void
holds_renewed_at_commit(HeldLock *h, TimestampTz expires_at)
{
	if (expires_at > h->expires_at)
	{
		h->expires_at = expires_at;
		(void) holds_sync_registry(h, true);
	}
}

/*
 * holds_verify_xact for the locks of kinds that live on servers of their
 * own (a Redlock): each must still be held there (by a majority), with
 * enough lease left, asked through the kind's renew.
 */
static void
verify_elsewhere(HeldLock **hs, int n)
{
	const char *holder = rlock_backend_holder();
	RenewArg   *args = palloc(n * sizeof(RenewArg));
	RenewOutcome *outcome = palloc(n * sizeof(RenewOutcome));
	int64	   *left = palloc(n * sizeof(int64));
	TimestampTz sent_at;

	for (int kind = 0; kind < RLOCK_NUM_KINDS; kind++)
	{
		HeldLock  **of = palloc(n * sizeof(HeldLock *));
		int			m = 0;

		for (int i = 0; i < n; i++)
		{
			HeldLock   *h = hs[i];

			if (h->kind != kind)
				continue;
			holds_renew_arg(&args[m], h->key, h->kind, holder,
							h->renew_lease_ms);
			of[m++] = h;
		}
		if (m == 0)
			continue;
		sent_at = GetCurrentTimestamp();
		holds_kind_ops(kind)->renew(args, m, WARNING, DT_NOEND, outcome,
									left);
		for (int i = 0; i < m; i++)
		{
			int64		left_ms = left[i] -
				(GetCurrentTimestamp() - sent_at) / 1000;

			if (outcome[i] != RENEW_HELD)
				holds_lost_at_commit(of[i],
									 "Fewer than a majority of its servers could confirm that they still held it; the transaction is rolled back.");
			if (left[i] >= 0 && left_ms < COMMIT_MIN_LEASE_MS)
				holds_short_lease_at_commit(of[i], left_ms, COMMIT_MIN_LEASE_MS);
			if (of[i]->renew_lease_ms > 0)
				holds_renewed_at_commit(of[i],
										sent_at + of[i]->renew_lease_ms * 1000);
		}
	}
}

/*
 * A transaction-level loss an earlier call of this transaction found and
 * forgot (holds_lost.c) refuses its COMMIT, or its PREPARE ("what").
 */
void
holds_refuse_lost_xact(const char *what)
{
	RlockKind	kind;
	const char *key = holds_lost_xact_key(&kind);

	if (key == NULL)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_TRANSACTION_ROLLBACK),
			 kind == RLOCK_KIND_SEMAPHORE ?
			 errmsg("cannot %s: permits of semaphore \"%s\" held by this transaction were lost",
					what, key) :
			 errmsg("cannot %s: lock \"%s\" held by this transaction was lost",
					what, key),
			 errdetail("An earlier call of this transaction found it lost (see its WARNING); the transaction is rolled back."),
			 errhint("Writes guarded by a lost lock are never committed (rlock.verify_on_commit).")));
}

/*
 * Before COMMIT: check in one round trip that Redis still has every lock
 * held at transaction level, with enough lease left to cover the commit
 * (see COMMIT_MIN_LEASE_MS).  An ERROR here rolls the transaction back.
 */
void
holds_verify_xact(void)
{
	HeldLock  **hs;
	RenewArg   *args;
	RedisCmd   *cmds;
	RReply	  **replies;
	int		   *order;
	int		   *starts;
	int			ncalls;
	const char *holder = rlock_backend_holder();
	TimestampTz sent_at;
	TimestampTz now;
	char	   *why;
	int			n;

	if (!rlock_verify_on_commit)
		return;
	/* (the reconcile may find a lock gone, and note it) */
	if (holds_any_xact())
		holds_settle();
	holds_refuse_lost_xact("commit");
	if (!holds_any_xact())
		return;
	n = holds_xact_snapshot(&hs);
	if (n == 0)
		return;
	for (int i = 0; i < n; i++)
	{
		if (registry_is_lost(hs[i]->key, hs[i]->kind))
			holds_lost_at_commit(hs[i],
								 "It expired, was force-released, Redis restarted, or it could not be renewed in time while the transaction held it; the transaction is rolled back.");
	}

	/* the kinds that live on servers of their own are asked there */
	{
		int			nlocal = 0;
		int			nelse = 0;
		HeldLock  **elsewhere = palloc(n * sizeof(HeldLock *));

		for (int i = 0; i < n; i++)
		{
			if (kind_is_local(hs[i]->kind))
				hs[nlocal++] = hs[i];
			else
				elsewhere[nelse++] = hs[i];
		}
		if (nelse > 0)
			verify_elsewhere(elsewhere, nelse);
		n = nlocal;
		if (n == 0)
			return;
	}

	args = palloc(n * sizeof(RenewArg));
	for (int i = 0; i < n; i++)
	{
		HeldLock   *h = hs[i];

		holds_renew_arg(&args[i], h->key, h->kind, holder, h->renew_lease_ms);
	}
	/* one call (in a Cluster: one per slot, every node at once) */
	ncalls = holds_renew_calls(args, n, n, &cmds, &order, &starts);
	sent_at = GetCurrentTimestamp();
	/* ... and, after a failover, is the node that answers still master? */
	if (!route_run_confirmed(route_backend(), cmds, ncalls, &replies,
							 n == 1 ? hs[0]->key : NULL, &why))
		holds_lost_at_commit(hs[0], psprintf("%s The transaction is rolled back.",
											 why));
	now = GetCurrentTimestamp();
	for (int g = 0; g < ncalls; g++)
	{
		RReply	   *r = replies[g];
		int			first = starts[g];
		int			count = starts[g + 1] - first;
		const char *what = count == 1 ? hs[order[first]]->key : NULL;

		if (r->type == RREPLY_ERROR)
			rconn_reply_error(r, ERROR, what);
		if (r->type != RREPLY_ARRAY || r->elements != 2 * count)
			rconn_unexpected_reply(r, what);
		for (int j = 0; j < count; j++)
		{
			HeldLock   *h = hs[order[first + j]];
			RReply	   *c = r->element[2 * j];
			RReply	   *t = r->element[2 * j + 1];
			int64		left;
			int64		need;

			if (c->type != RREPLY_INTEGER || t->type != RREPLY_INTEGER)
				rconn_unexpected_reply(r, h->key);
			if (c->integer < holds_total(h))
				holds_lost_at_commit(h,
									 "It expired, was force-released, or Redis restarted while the transaction held it; the transaction is rolled back.");

			/* what is left for sure: Redis measured it somewhere in the trip */
			left = t->integer - (now - sent_at) / 1000;
			/* (a fixed-lease permit: with the clock margin on top) */
			need = COMMIT_MIN_LEASE_MS +
				holds_clock_margin_ms(h->kind, h->renew_lease_ms > 0,
									  h->lease_ms);
			if (t->integer >= 0 && left < need)
				holds_short_lease_at_commit(h, left, need);
			if (h->renew_lease_ms > 0)
				holds_renewed_at_commit(h, sent_at + h->renew_lease_ms * 1000);
		}
	}

	/* in a Cluster: do the other masters agree that those nodes own them? */
	if (route_is_cluster())
	{
		const char **keys = palloc(n * sizeof(char *));
		int			bad;

		for (int i = 0; i < n; i++)
			keys[i] = hs[i]->key;
		bad = route_confirm_owners(keys, n, &why);
		if (bad >= 0)
			holds_lost_at_commit(hs[bad], psprintf("%s The transaction is rolled back.",
												   why));
	}
}
