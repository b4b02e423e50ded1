/*-------------------------------------------------------------------------
 *
 * lock_status.c
 *	  A lock's status as the introspection functions read it (rlock_is_held,
 *	  rlock_hold_count, rlock_remaining_lease, rlock_is_locked,
 *	  rlock_status): the status script's call, and what the masters of a
 *	  Redlock this session holds say of it.
 *
 * Those functions ask rlock.redis_url's Redis, where a Redlock does not
 * live: for a name this session holds as a Redlock they ask its masters
 * instead, all at once (the status script of the exclusive lock on each),
 * and answer what a majority has: the holds this session has on at least
 * a majority of them, and the lease that majority has left.  A master that
 * does not answer counts as having nothing.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/timestamp.h"

#include "redis/redis.h"
#include "route/route.h"
#include "holds/holds.h"
#include "locks/locks.h"
#include "locks/locks_int.h"

/*
 * The status script's call for ln, asked as this session's holder
 * (scripts.c, status_body): the introspection functions send it to rlock.redis_url's
 * Redis, or to a Redlock's masters (below).
 */
void
rcmd_status(RedisCmd *cmd, const LockName *ln)
{
	rcmd_script(cmd, RLOCK_SCRIPT_STATUS, 3);
	rcmd_arg(cmd, ln->key, ln->keylen);
	rcmd_str(cmd, lockname_derive(ln->key, "redisson_lock_queue"));
	rcmd_str(cmd, lockname_suffixed(ln->key, "timeout"));
	rcmd_str(cmd, rlock_backend_holder());
}

/*
 * For a name this session holds as a Redlock: *count, its holds on at
 * least a majority of the masters, and *pttl, the lease (ms) left on that
 * majority (-2 when fewer than a majority hold it, -1 when they hold it
 * without expiry).  False, nothing asked, when it holds no Redlock of ln.
 */
bool
redlock_own_status(const LockName *ln, int64 *count, int64 *pttl)
{
	RedisConn  *conns[REDLOCK_MAX_MASTERS];
	int64		counts[REDLOCK_MAX_MASTERS];
	int64		pttls[REDLOCK_MAX_MASTERS];
	int			nm;
	int			quorum;
	int			nheld = 0;
	RedisCmd	cmd;
	RconnOp    *ops;

	if (holds_find(ln->key, RLOCK_KIND_REDLOCK) == NULL ||
		redlock_num_masters() == 0)
		return false;
	nm = redlock_masters(conns, ln->name);
	quorum = redlock_quorum(nm);
	rcmd_status(&cmd, ln);
	ops = redlock_run(conns, nm, &cmd, 1, DT_NOEND);
	for (int m = 0; m < nm; m++)
	{
		RReply	   *r = ops[m].ok ? ops[m].replies[0] : NULL;

		counts[m] = 0;
		pttls[m] = -2;
		if (r == NULL || r->type != RREPLY_ARRAY || r->elements < 3 ||
			r->element[0]->type != RREPLY_INTEGER ||
			r->element[2]->type != RREPLY_INTEGER ||
			r->element[2]->integer <= 0)
			continue;			/* silent, an error, or nothing of ours */
		counts[m] = r->element[2]->integer;
		/* without expiry: longer than any lease */
		pttls[nheld++] = r->element[0]->integer == -1 ? PG_INT64_MAX :
			r->element[0]->integer;
	}
	qsort(counts, nm, sizeof(int64), redlock_compare_desc);
	qsort(pttls, nheld, sizeof(int64), redlock_compare_desc);
	*count = counts[quorum - 1];
	*pttl = nheld < quorum ? -2 :
		(pttls[quorum - 1] == PG_INT64_MAX ? -1 : pttls[quorum - 1]);
	return true;
}
