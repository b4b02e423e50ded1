/*-------------------------------------------------------------------------
 *
 * holds_assert.c
 *	  rlock_assert_held: does this session still hold a lock, in Redis too?
 *
 * A batch job run by a scheduler that keeps no WARNING (pg_cron) must be
 * able to fail when its lock was lost (SPEC 6, "a loss the caller can act
 * on"), so it asks before it commits.  Every kind this session holds under
 * the name is checked: the registry first (the watchdog's finding, or a
 * lease past its fail-closed moment, needs no round trip), then Redis, in
 * one round trip on a node confirmed master (the renew script in check
 * mode), so that a lease that ran out, or a key deleted, is caught even
 * before the watchdog noticed.  A lock found lost is forgotten whole, as
 * the check before COMMIT does (a transaction-level hold's loss is noted,
 * so that the COMMIT fails too if the ERROR is caught), and the ERROR
 * names it with the SQLSTATE of a lost lock, 40000 (transaction_rollback),
 * COMMIT's refusal's.  A name this session does not hold at all (never
 * taken, released, or found lost by an earlier call) fails the same way.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "redis/redis.h"
#include "holds/holds.h"
#include "holds/holds_int.h"
#include "base/base.h"

static const char *
kind_word(RlockKind kind)
{
	switch (kind)
	{
		case RLOCK_KIND_READ:
			return "read lock";
		case RLOCK_KIND_WRITE:
			return "write lock";
		case RLOCK_KIND_FAIR:
			return "fair lock";
		case RLOCK_KIND_REDLOCK:
			return "redlock";
		default:
			return "lock";
	}
}

/* h was found lost: forget it whole, and fail naming it. */
static void
assert_lost(HeldLock *h, const char *name, const char *why)
{
	RlockKind	kind = h->kind;

	if (!registry_is_lost(h->key, h->kind))
		stats_count(RLOCK_STAT_LOCKS_LOST);
	holds_forget_and_reconcile(h);
	ereport(ERROR,
			(errcode(ERRCODE_TRANSACTION_ROLLBACK),
			 kind == RLOCK_KIND_SEMAPHORE ?
			 errmsg("permits of rlock semaphore \"%s\" held by this session were lost",
					name) :
			 errmsg("rlock %s \"%s\" held by this session was lost",
					kind_word(kind), name),
			 errdetail("%s", why),
			 errhint("Another holder may have run meanwhile: do not commit the work it guarded.")));
}

/* The locks of a kind that lives on servers of its own (a Redlock). */
static void
assert_elsewhere(HeldLock *h, const char *name)
{
	RenewArg	arg;
	RenewOutcome outcome = RENEW_UNKNOWN;
	int64		left = -1;

	holds_renew_arg(&arg, h->key, h->kind, rlock_backend_holder(), 0);
	holds_kind_ops(h->kind)->renew(&arg, 1, WARNING, DT_NOEND, &outcome,
								   &left);
	if (outcome != RENEW_HELD)
		assert_lost(h, name,
					"Fewer than a majority of its servers could confirm that they still held it.");
}

/*
 * ERROR (40000) naming ln unless this session holds it, as every kind it
 * holds it as, and Redis agrees.
 */
void
holds_assert_held(const LockName *ln)
{
	HeldLock   *hs[RLOCK_NUM_KINDS];
	RenewArg	args[RLOCK_NUM_KINDS];
	RedisCmd   *cmds;
	RReply	  **replies;
	int		   *order;
	int		   *starts;
	int			ncalls;
	int			n = 0;
	int			nheld = 0;
	char	   *why;
	const char *holder = rlock_backend_holder();

	/* what an interrupted call left uncertain is settled first */
	holds_settle();
	for (int k = 0; k < RLOCK_NUM_KINDS; k++)
	{
		HeldLock   *h = holds_find(ln->key, k);

		if (h == NULL || holds_total(h) == 0)
			continue;
		holds_require_settled(ln, k);
		if (registry_is_lost(h->key, h->kind))
			assert_lost(h, ln->name,
						"It expired, was force-released, Redis restarted, or it could not be renewed in time.");
		nheld++;
		if (!kind_is_local(h->kind))
		{
			assert_elsewhere(h, ln->name);
			continue;
		}
		holds_renew_arg(&args[n], h->key, h->kind, holder, 0);
		hs[n++] = h;
	}
	if (nheld == 0)
		ereport(ERROR,
				(errcode(ERRCODE_TRANSACTION_ROLLBACK),
				 errmsg("rlock lock \"%s\" is not held by this session",
						ln->name),
				 errdetail("It was not taken, was released, or was found lost earlier (see that WARNING)."),
				 errhint("Another holder may have run meanwhile: do not commit the work it guarded.")));
	if (n == 0)
		return;

	/* one round trip, on a node that is still master */
	ncalls = holds_renew_calls(args, n, n, &cmds, &order, &starts);
	if (!route_run_confirmed(route_backend(), cmds, ncalls, &replies,
							 ln->key, &why))
		assert_lost(hs[0], ln->name, why);
	for (int g = 0; g < ncalls; g++)
	{
		RReply	   *r = replies[g];
		int			first = starts[g];
		int			count = starts[g + 1] - first;

		if (r->type == RREPLY_ERROR)
			rconn_reply_error(r, ERROR, ln->name);
		if (r->type != RREPLY_ARRAY || r->elements != 2 * count)
			rconn_unexpected_reply(r, ln->name);
		for (int j = 0; j < count; j++)
		{
			HeldLock   *h = hs[order[first + j]];
			RReply	   *c = r->element[2 * j];
			RReply	   *t = r->element[2 * j + 1];

			if (c->type != RREPLY_INTEGER || t->type != RREPLY_INTEGER)
				rconn_unexpected_reply(r, ln->name);
			if (c->integer < holds_total(h))
				assert_lost(h, ln->name,
							h->kind == RLOCK_KIND_SEMAPHORE ?
							"Redis no longer has all of them: they expired, were taken away, or Redis restarted." :
							"Redis no longer has it: it expired, was force-released, or Redis restarted.");
		}
	}

	/* in a Cluster: do the other masters agree that those nodes own them? */
	if (route_is_cluster())
	{
		const char *keys[RLOCK_NUM_KINDS];
		int			bad;

		for (int i = 0; i < n; i++)
			keys[i] = hs[i]->key;
		bad = route_confirm_owners(keys, n, &why);
		if (bad >= 0)
			assert_lost(hs[bad], ln->name, why);
	}
}
