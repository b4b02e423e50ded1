/*-------------------------------------------------------------------------
 *
 * wait_blockers.c
 *	  Who blocks a wait (SPEC.md section 5.6): a lock's holders read from
 *	  its keys, which of them block a given wait, and who blocks a
 *	  PostgreSQL lock wait of this server.
 *
 * A lock's blockers are read in one round trip per lock (a script reading
 * the hash's fields, the fair queue, the live permits), on every master of
 * a Redlock, where a holder counts when a majority have it; a view or a
 * check reads each lock once (lock_blockers_cached).  Replies are trusted
 * for their shape only, counts bounded here (BLOCKERS_MAX); an error reply
 * is an ERROR, or unknown during a waiter's check (wait_read_refused).
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "nodes/pg_list.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"

#include "redis/redis.h"
#include "route/route.h"
#include "holds/holds.h"
#include "locks/locks.h"
#include "locks/locks_int.h"
#include "base/base.h"

/* The most holders or queued waiters of one lock read. */
#define BLOCKERS_MAX		1000

/* A lock's blockers read by one view or check (lock_blockers_cached). */
typedef struct CachedBlockers
{
	const char *key;
	bool		redlock;		/* read on the Redlock's masters */
	LockBlockers *blockers;
} CachedBlockers;

/* Strings of an array reply, at most max. */
static int
reply_strings(const RReply *r, char ***out, int max)
{
	int			n = 0;

	*out = palloc((Min(r->elements, (size_t) max) + 1) * sizeof(char *));
	for (size_t i = 0; i < r->elements && n < max; i++)
	{
		char	   *s = wait_reply_text(r->element[i]);

		if (s != NULL)
			(*out)[n++] = s;
	}
	return n;
}

static void
build_blockers(RedisCmd *cmd, const char *key)
{
	rcmd_script(cmd, RLOCK_SCRIPT_LOCK_BLOCKERS, 3);
	rcmd_str(cmd, key);
	rcmd_str(cmd, lockname_derive(key, "redisson_lock_queue"));
	rcmd_str(cmd, lockname_suffixed(key, "timeout"));
	rcmd_int(cmd, BLOCKERS_MAX);
}

/* Parse {mode, {holders}, {queue}}; false if the shape is wrong. */
static bool
parse_blockers(const RReply *r, LockBlockers *b)
{
	memset(b, 0, sizeof(LockBlockers));
	b->mode = "";
	if (r == NULL || r->type != RREPLY_ARRAY || r->elements != 3 ||
		r->element[1]->type != RREPLY_ARRAY ||
		r->element[2]->type != RREPLY_ARRAY)
		return false;
	b->mode = wait_reply_text(r->element[0]);
	if (b->mode == NULL)
		b->mode = "";
	b->nholders = reply_strings(r->element[1], &b->holders, BLOCKERS_MAX);
	b->nqueue = reply_strings(r->element[2], &b->queue, BLOCKERS_MAX);
	return true;
}

/*
 * Who holds the lock key (name: the user's, for messages), read from its
 * keys; a Redlock's on its masters, a holder counting when a majority of
 * them have it (a master that does not answer has nothing).
 */
LockBlockers *
lock_blockers(const char *kind, const char *key, const char *name)
{
	LockBlockers *b = palloc0(sizeof(LockBlockers));
	RedisCmd	cmd;

	build_blockers(&cmd, key);
	if (strcmp(kind, "redlock") == 0 && redlock_num_masters() > 0)
	{
		RedisConn  *conns[REDLOCK_MAX_MASTERS];
		int			nm = redlock_masters(conns, name);
		int			quorum = redlock_quorum(nm);
		RconnOp    *ops = redlock_run(conns, nm, &cmd, 1, DT_NOEND);
		LockBlockers each[REDLOCK_MAX_MASTERS];

		b->mode = "";
		b->holders = palloc((BLOCKERS_MAX + 1) * sizeof(char *));
		for (int m = 0; m < nm; m++)
			if (!ops[m].ok || !parse_blockers(ops[m].replies[0], &each[m]))
				memset(&each[m], 0, sizeof(LockBlockers));
		for (int m = 0; m < nm; m++)
			for (int h = 0; h < each[m].nholders; h++)
			{
				int			have = 0;
				bool		dup = false;

				for (int i = 0; i < b->nholders && !dup; i++)
					dup = (strcmp(b->holders[i], each[m].holders[h]) == 0);
				for (int o = 0; o < nm && !dup; o++)
					for (int i = 0; i < each[o].nholders; i++)
						if (strcmp(each[o].holders[i], each[m].holders[h]) == 0)
						{
							have++;
							break;
						}
				if (!dup && have >= quorum && b->nholders < BLOCKERS_MAX)
					b->holders[b->nholders++] = each[m].holders[h];
			}
		return b;
	}
	{
		RReply	  **replies;

		(void) route_run(route_backend(), &cmd, 1, &replies, ERROR, name);
		if (wait_read_refused(replies[0], name))
			return b;			/* unknown: no holder */
		if (!parse_blockers(replies[0], b))
			rconn_unexpected_reply(replies[0], name);
	}
	return b;
}

/*
 * lock_blockers, each key read once per cache (a List the caller starts
 * as NIL and keeps for one view or one check).
 */
LockBlockers *
lock_blockers_cached(List **cache, const char *kind, const char *key,
					 const char *name)
{
	ListCell   *lc;
	CachedBlockers *c;
	bool		redlock = (strcmp(kind, "redlock") == 0);

	foreach(lc, *cache)
	{
		c = lfirst(lc);
		if (c->redlock == redlock && strcmp(c->key, key) == 0)
			return c->blockers;
	}
	c = palloc(sizeof(CachedBlockers));
	c->key = key;
	c->redlock = redlock;
	c->blockers = lock_blockers(kind, key, name);
	*cache = lappend(*cache, c);
	return c->blockers;
}

/*
 * The holders that block wait w on its locks (bl: each lock's blockers,
 * read by the caller, w->nkeys of them): a read waiter only by a writer; a
 * fair waiter also by those queued ahead of it; never by itself (its own
 * permits of a semaphore may end by their lease, or permits be added: no
 * deadlock is claimed on them).  Returns how many, with the lock's name
 * each blocks it through.
 */
int
wait_blocking_holders(const WaitRecord *w, LockBlockers **bl,
					  const char ***holders, const char ***names)
{
	int			max = 0;
	int			n = 0;

	if (strcmp(w->kind, "latch") == 0)
		return 0;
	for (int k = 0; k < w->nkeys; k++)
		max += bl[k]->nholders + bl[k]->nqueue;
	*holders = palloc((max + 1) * sizeof(char *));
	*names = palloc((max + 1) * sizeof(char *));
	for (int k = 0; k < w->nkeys; k++)
	{
		LockBlockers *b = bl[k];

		if (strcmp(w->kind, "read") != 0 || strcmp(b->mode, "write") == 0)
			for (int h = 0; h < b->nholders; h++)
			{
				if (strcmp(b->holders[h], w->holder) == 0)
					continue;
				(*holders)[n] = b->holders[h];
				(*names)[n++] = w->names[k];
			}
		if (strcmp(w->kind, "fair") == 0)
			for (int q = 0; q < b->nqueue; q++)
			{
				if (strcmp(b->queue[q], w->holder) == 0)
					break;		/* those behind it do not block it */
				(*holders)[n] = b->queue[q];
				(*names)[n++] = w->names[k];
			}
	}
	return n;
}

/*
 * The sessions of this server that block pid's wait for a PostgreSQL lock
 * (as pg_blocking_pids), and what it waits for in PostgreSQL's words
 * ("ShareLock on transaction 123"; NULL when it waits for none).
 */
int
pg_lock_blockers(int pid, int **pids, char **what)
{
	ArrayType  *arr;
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	int			k = 0;
	BlockedProcsData *bd;

	*what = NULL;
	*pids = NULL;
	arr = DatumGetArrayTypeP(DirectFunctionCall1(pg_blocking_pids,
												 Int32GetDatum(pid)));
	deconstruct_array(arr, INT4OID, sizeof(int32), true, TYPALIGN_INT,
					  &elems, &nulls, &n);
	if (n == 0)
		return 0;
	*pids = palloc(n * sizeof(int));
	for (int i = 0; i < n; i++)
		if (!nulls[i])
			(*pids)[k++] = DatumGetInt32(elems[i]);

	bd = GetBlockerStatusData(pid);
	for (int i = 0; i < bd->nprocs && *what == NULL; i++)
	{
		BlockedProcData *bp = &bd->procs[i];

		for (int j = 0; j < bp->num_locks; j++)
		{
			LockInstanceData *li = &bd->locks[bp->first_lock + j];
			StringInfoData buf;

			if (li->pid != bp->pid || li->waitLockMode == NoLock)
				continue;
			initStringInfo(&buf);
			appendStringInfo(&buf, "%s on ",
							 GetLockmodeName(li->locktag.locktag_lockmethodid,
											 li->waitLockMode));
			DescribeLockTag(&buf, &li->locktag);
			*what = buf.data;
			break;
		}
	}
	if (*what == NULL)
		*what = pstrdup("a PostgreSQL lock");
	return k;
}
