/*-------------------------------------------------------------------------
 *
 * lock_redlock_keep.c
 *	  Keeping a Redlock (lock_redlock.c takes it): this kind's settle,
 *	  which lowers a holder's count on the masters (releases, give-backs,
 *	  reconciles), its renewal by the watchdog, and the check of this
 *	  session's Redlocks after rlock.redlock_urls changed.
 *
 * Both ask every master at once and count a majority.  A Redlock lives
 * on the masters it was taken on; after a reload that changes the setting,
 * the session's next Redlock call reconciles what it holds with the new
 * masters, as the watchdog's next renewal would: a hold that no majority
 * of them has (or, with the setting emptied, every hold) is reported lost,
 * so that no later call re-enters or releases it on masters that never had
 * it.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "holds/holds.h"
#include "locks/locks.h"
#include "locks/locks_int.h"
#include "route/route.h"
#include "base/base.h"

/* Renew script calls carry this many locks at most. */
#define REDLOCK_RENEW_BATCH		1000

/* The setting's generation this session's Redlocks were last checked for. */
static uint64 holds_generation = 0;
static bool holds_checked = false;

/*
 * Before a Redlock call: after a change of rlock.redlock_urls, reconcile
 * this session's Redlocks with the masters named now (an ERROR when they
 * cannot be asked; checked again at the next call).
 */
void
redlock_recheck_holds(void)
{
	uint64		gen = redlock_conf_generation();

	if (holds_checked && gen == holds_generation)
		return;
	if (holds_checked)
		holds_recheck_kind(RLOCK_KIND_REDLOCK);
	holds_generation = gen;
	holds_checked = true;
}

/* What a master's answer to a settle must show to count (settled). */
typedef struct SettleCount
{
	const int  *before;
	int			n;
} SettleCount;

/* Did a master hold every lock at least before[i] times? */
static bool
settled(const RconnOp *op, void *arg)
{
	SettleCount *sc = arg;

	for (int i = 0; i < sc->n; i++)
	{
		RReply	   *r = op->replies[i];

		if (sc->before[i] > 0 &&
			(r->type != RREPLY_INTEGER || r->integer < sc->before[i]))
			return false;
	}
	return true;
}

/*
 * The kind's settle (holds.h): lower this holder's count of each lock to
 * its target on every master at once, returning once a majority held
 * every lock (when some master did not, every answer is awaited).
 * held[i]: a majority answered with at least before[i] holds.
 */
static void
redlock_settle(const char *const *keys, const int *targets, const int *before,
			   int n, const char *holder, bool *held, int elevel)
{
	RedisConn  *conns[REDLOCK_MAX_MASTERS];
	int			nm;
	RedisCmd   *cmds = palloc(n * sizeof(RedisCmd));
	RconnOp    *ops;
	int		   *count = palloc0(n * sizeof(int));
	SettleCount sc;

	if (redlock_num_masters() == 0)
	{
		/* the setting was emptied: nothing can be told, leases run out */
		for (int i = 0; i < n; i++)
			held[i] = before[i] <= 0;
		return;
	}
	nm = redlock_masters(conns, keys[0]);
	for (int i = 0; i < n; i++)
		exclusive_build_reconcile(&cmds[i], RLOCK_KIND_EXCLUSIVE, keys[i],
								  holder, targets[i]);
	sc.before = before;
	sc.n = n;
	ops = redlock_run_majority(conns, nm, cmds, n, settled, &sc,
							   NULL, NULL);
	for (int m = 0; m < nm; m++)
	{
		if (ops[m].late)
			continue;			/* not waited for, or set aside (route.h) */
		if (!ops[m].ok)
		{
			/* what it keeps expires with its lease */
			rconn_report(conns[m], DEBUG1, n == 1 ? keys[0] : NULL);
			continue;
		}
		for (int i = 0; i < n; i++)
		{
			RReply	   *r = ops[m].replies[i];

			if (r->type == RREPLY_INTEGER && r->integer >= before[i])
				count[i]++;
			else if (r->type == RREPLY_ERROR)
				rconn_reply_error_of(rconn_node(conns[m]), r,
									 Min(elevel, WARNING), keys[i]);
		}
	}
	for (int i = 0; i < n; i++)
		held[i] = before[i] <= 0 || count[i] >= redlock_quorum(nm);
}

int
redlock_compare_desc(const void *a, const void *b)
{
	int64		x = *(const int64 *) a;
	int64		y = *(const int64 *) b;

	return x > y ? -1 : (x < y ? 1 : 0);
}

/*
 * The kind's renew (holds.h): the renew script on every master at once.
 * Held when a majority holds it; gone when the masters that answered
 * leave no majority possible; else not known.  The lease left for sure is
 * what the majority's last member has.
 */
static void
redlock_renew(const RenewArg *args, int n, int elevel, TimestampTz cap,
			  RenewOutcome *outcome, int64 *left_ms)
{
	RedisConn  *conns[REDLOCK_MAX_MASTERS];
	int			nm = redlock_num_masters();
	int			quorum = redlock_quorum(nm);
	RedisCmd   *cmds;
	int		   *order;
	int		   *starts;
	int			ncalls;
	RconnOp    *ops;
	int		   *holding = palloc0(n * sizeof(int));
	int		   *unknown = palloc0(n * sizeof(int));
	int64	   *pttls = palloc(n * REDLOCK_MAX_MASTERS * sizeof(int64));

	for (int i = 0; i < n; i++)
	{
		outcome[i] = RENEW_UNKNOWN;
		if (left_ms)
			left_ms[i] = -1;
	}
	if (nm == 0)
	{
		/* no master now: lost, as after a change of rlock.redis_url */
		for (int i = 0; i < n; i++)
			outcome[i] = RENEW_GONE;
		return;
	}
	(void) redlock_masters(conns, "");
	ncalls = rcmd_renew_calls(args, n, REDLOCK_RENEW_BATCH, &cmds, &order,
							  &starts);
	ops = redlock_run(conns, nm, cmds, ncalls, cap);
	for (int m = 0; m < nm; m++)
	{
		if (!ops[m].ok)
		{
			if (!ops[m].late)	/* (late: set aside, see route.h) */
				rconn_report(conns[m], Min(elevel, DEBUG1), NULL);
			for (int i = 0; i < n; i++)
				unknown[i]++;
			continue;
		}
		for (int g = 0; g < ncalls; g++)
		{
			RReply	   *r = ops[m].replies[g];
			int			first = starts[g];
			int			count = starts[g + 1] - first;

			for (int j = 0; j < count; j++)
			{
				int			i = order[first + j];

				if (r->type != RREPLY_ARRAY || r->elements != 2 * count ||
					r->element[2 * j]->type != RREPLY_INTEGER)
				{
					unknown[i]++;
					continue;
				}
				if (r->element[2 * j]->integer > 0)
				{
					RReply	   *t = r->element[2 * j + 1];

					pttls[i * REDLOCK_MAX_MASTERS + holding[i]] =
						t->type == RREPLY_INTEGER ? t->integer : -1;
					holding[i]++;
				}
			}
		}
	}
	for (int i = 0; i < n; i++)
	{
		if (holding[i] >= quorum)
		{
			int64	   *p = &pttls[i * REDLOCK_MAX_MASTERS];

			outcome[i] = RENEW_HELD;
			qsort(p, holding[i], sizeof(int64), redlock_compare_desc);
			if (left_ms)
				left_ms[i] = p[quorum - 1];
		}
		else if (holding[i] + unknown[i] < quorum)
			outcome[i] = RENEW_GONE;
	}
}

/* (no build_release, build_reconcile: its holds never go to rlock.redis_url) */
const RlockKindOps redlock_ops = {
	.settle = redlock_settle,
	.renew = redlock_renew,
};
