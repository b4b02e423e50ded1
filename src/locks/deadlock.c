/*-------------------------------------------------------------------------
 *
 * deadlock.c
 *	  The deadlock check of a waiter (SPEC.md section 5.6): is its wait in
 *	  a knot of waits that can never end, and is it the one to give up?
 *
 * The graph's nodes are sessions, named by holder id; an edge goes from a
 * waiter to each holder that blocks it (wait_read.c): rlock waits of
 * every server sharing the Redis, and, on this server, PostgreSQL's lock
 * waits (pg_blocking_pids), so that a cycle mixing both is found.  Nodes
 * are read from the waiter outwards, at most DEADLOCK_MAX_NODES of them.
 * A holder rlock knows no wait of (a Redisson client, a session at work)
 * can go on: it is free.  A waiter is free when what it waits for can
 * end: every blocker free for an ordinary wait, any one for a semaphore's
 * permits (one release may do).  The check finds the waiters never free,
 * to a fixed point; when the checking waiter is one, the knot is the
 * waits it reaches that reach it back.
 *
 * One victim per knot, chosen alike by every participant: the waiter of
 * the knot that checks for deadlocks whose wait began last (Redis's time;
 * then the greater holder id).  It is the last to check, so it sees every
 * wait of the knot.  Before it fails with 40P01, it reads everything
 * again: a knot seen once while a lock changes hands is not a deadlock.
 * Others find the knot and go on waiting; they look again a
 * deadlock_timeout later (the victim may not have seen it yet).
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/memutils.h"

#include "redis/redis.h"
#include "route/route.h"
#include "holds/holds.h"
#include "locks/locks.h"
#include "locks/locks_int.h"
#include "base/base.h"

#define DEADLOCK_MAX_NODES	256

typedef struct DNode
{
	const char *holder;
	const WaitRecord *wait;		/* its rlock wait; NULL: none known */
	bool		pg_wait;		/* waits for a PostgreSQL lock (this server) */
	char	   *pg_what;
	bool		or_wait;		/* free when any blocker is */
	int			nout;
	int		   *out;			/* blockers: node numbers */
	const char **via;			/* ... through which lock */
	bool		expanded;
	bool		free;
	bool		in_knot;
} DNode;

typedef struct DGraph
{
	WaitSnapshot snap;			/* only the servers' names, for DETAIL */
	bool		have_servers;
	int			n;
	DNode		nodes[DEADLOCK_MAX_NODES];
	List	   *blockers;		/* each lock's, read once (lock_blockers_cached) */
} DGraph;

/* The node of holder, added if new; -1 when the graph is full. */
static int
node_of(DGraph *g, const char *holder)
{
	DNode	   *d;

	for (int i = 0; i < g->n; i++)
		if (strcmp(g->nodes[i].holder, holder) == 0)
			return i;
	if (g->n >= DEADLOCK_MAX_NODES)
		return -1;
	d = &g->nodes[g->n];
	memset(d, 0, sizeof(DNode));
	d->holder = holder;
	return g->n++;
}

/* Read node i's blockers: its rlock wait's, or its PostgreSQL lock wait's. */
static void
expand(DGraph *g, int i)
{
	DNode	   *d = &g->nodes[i];
	const char **holders = NULL;
	const char **via = NULL;
	int			n = 0;

	d->expanded = true;
	if (d->wait != NULL)
	{
		LockBlockers *bl[WAIT_MAX_KEYS];

		for (int k = 0; k < d->wait->nkeys; k++)
			bl[k] = lock_blockers_cached(&g->blockers, d->wait->kind,
										 d->wait->keys[k], d->wait->names[k]);
		n = wait_blocking_holders(d->wait, bl, &holders, &via);
		d->or_wait = (strcmp(d->wait->kind, "semaphore") == 0);
	}
	else if (strncmp(d->holder, wait_my_uuid(), 36) == 0 &&
			 wait_holder_pid(d->holder) > 0)
	{
		int		   *pids;
		char	   *what;

		n = pg_lock_blockers(wait_holder_pid(d->holder), &pids, &what);
		if (n > 0)
		{
			d->pg_wait = true;
			d->pg_what = what;
			holders = palloc(n * sizeof(char *));
			via = palloc(n * sizeof(char *));
			for (int j = 0; j < n; j++)
			{
				holders[j] = psprintf("%s:%d", wait_my_uuid(), pids[j]);
				via[j] = NULL;
			}
		}
	}
	d->out = palloc((n + 1) * sizeof(int));
	d->via = palloc((n + 1) * sizeof(char *));
	for (int j = 0; j < n; j++)
	{
		int			to = node_of(g, holders[j]);

		d = &g->nodes[i];		/* (node_of does not move nodes) */
		if (to < 0)
			continue;			/* beyond the graph: free */
		d->out[d->nout] = to;
		d->via[d->nout++] = via[j];
	}
}

/*
 * The waits of nodes from..n-1, read at once (this server's from shared
 * memory, the others' in one round trip).
 */
static void
read_waits(DGraph *g, int from)
{
	int			n = g->n - from;
	const char **holders = palloc((n + 1) * sizeof(char *));
	WaitRecord **recs = palloc((n + 1) * sizeof(WaitRecord *));

	for (int i = 0; i < n; i++)
		holders[i] = g->nodes[from + i].holder;
	wait_records_fetch(holders, n, recs);
	for (int i = 0; i < n; i++)
		g->nodes[from + i].wait = recs[i];
}

/*
 * Read the graph from the waiter self outwards, a level at a time (the
 * waits of a level in one round trip, then each lock they wait for), and
 * find who is free.
 */
static void
build(DGraph *g, const char *self_holder)
{
	bool		changed = true;
	int			level = 0;

	memset(g, 0, offsetof(DGraph, nodes));
	g->blockers = NIL;
	node_of(g, self_holder);
	while (level < g->n)
	{
		int			end = g->n;

		CHECK_FOR_INTERRUPTS();
		read_waits(g, level);
		for (int i = level; i < end; i++)
			expand(g, i);
		level = end;
	}

	/* a node is free when its wait can end; to a fixed point */
	for (int i = 0; i < g->n; i++)
		g->nodes[i].free = (g->nodes[i].wait == NULL &&
							!g->nodes[i].pg_wait) ||
			g->nodes[i].nout == 0;
	while (changed)
	{
		changed = false;
		for (int i = 0; i < g->n; i++)
		{
			DNode	   *d = &g->nodes[i];
			int			nfree = 0;

			if (d->free)
				continue;
			for (int j = 0; j < d->nout; j++)
				nfree += g->nodes[d->out[j]].free ? 1 : 0;
			if (d->or_wait ? nfree > 0 : nfree == d->nout)
			{
				d->free = true;
				changed = true;
			}
		}
	}
}

/* Does node from reach node to through nodes not free? */
static bool
reaches(DGraph *g, int from, int to, bool *seen)
{
	if (from == to)
		return true;
	if (seen[from])
		return false;
	seen[from] = true;
	for (int j = 0; j < g->nodes[from].nout; j++)
	{
		int			v = g->nodes[from].out[j];

		if (!g->nodes[v].free && reaches(g, v, to, seen))
			return true;
	}
	return false;
}

/*
 * Mark the knot of node 0 (the waiters it reaches that reach it back) and
 * return its victim, or -1 when node 0 is free.
 */
static int
knot_victim(DGraph *g)
{
	bool	   *seen = palloc(g->n * sizeof(bool));
	int			victim = -1;

	if (g->nodes[0].free)
		return -1;
	for (int i = 0; i < g->n; i++)
	{
		DNode	   *d = &g->nodes[i];

		if (d->free)
			continue;
		memset(seen, 0, g->n * sizeof(bool));
		if (!reaches(g, 0, i, seen))
			continue;
		memset(seen, 0, g->n * sizeof(bool));
		if (i != 0 && !reaches(g, i, 0, seen))
			continue;
		d->in_knot = true;
		if (d->wait == NULL || !d->wait->checks)
			continue;
		if (victim < 0 ||
			d->wait->since_ms > g->nodes[victim].wait->since_ms ||
			(d->wait->since_ms == g->nodes[victim].wait->since_ms &&
			 strcmp(d->holder, g->nodes[victim].holder) > 0))
			victim = i;
	}
	pfree(seen);
	return victim;
}

/* What node d waits for, through "via" (a lock's name), in words. */
static char *
describe_wait(const DNode *d, const char *via)
{
	const char *kind;

	if (via == NULL)
		return d->pg_what ? d->pg_what : "a PostgreSQL lock";
	kind = d->wait->kind;
	if (strcmp(kind, "semaphore") == 0)
		return psprintf("rlock semaphore \"%s\"", via);
	if (strcmp(kind, "redlock") == 0)
		return psprintf("rlock Redlock \"%s\"", via);
	if (strcmp(kind, "read") == 0 || strcmp(kind, "write") == 0 ||
		strcmp(kind, "fair") == 0)
		return psprintf("rlock %s lock \"%s\"", kind, via);
	return psprintf("rlock lock \"%s\"", via);
}

static void
describe_node(StringInfo buf, DGraph *g, const DNode *d, const char *word)
{
	int			pid = d->wait ? d->wait->pid : wait_holder_pid(d->holder);

	if (!g->have_servers)
	{
		wait_snapshot_read(&g->snap, 0);	/* the servers' names */
		g->have_servers = true;
	}
	appendStringInfo(buf, "%s %d on server \"%s\"", word, pid,
					 wait_server_name(&g->snap, d->holder));
}

/*
 * The knot's edges from node 0 round back to it, one DETAIL line each:
 * the shortest way back, found breadth first through the knot.
 */
static char *
knot_detail(DGraph *g)
{
	int		   *prev = palloc(g->n * sizeof(int));
	int		   *prev_edge = palloc(g->n * sizeof(int));
	int		   *queue = palloc((g->n + 1) * sizeof(int));
	int			head = 0;
	int			tail = 0;
	int			last = -1;
	int			last_edge = -1;
	int		   *path = palloc((g->n + 1) * sizeof(int));
	int		   *path_edge = palloc((g->n + 1) * sizeof(int));
	int			len = 0;
	StringInfoData buf;

	for (int i = 0; i < g->n; i++)
		prev[i] = -1;
	queue[tail++] = 0;
	while (head < tail && last < 0)
	{
		int			u = queue[head++];

		for (int j = 0; j < g->nodes[u].nout && last < 0; j++)
		{
			int			v = g->nodes[u].out[j];

			if (!g->nodes[v].in_knot)
				continue;
			if (v == 0)
			{
				last = u;
				last_edge = j;
			}
			else if (prev[v] < 0)
			{
				prev[v] = u;
				prev_edge[v] = j;
				queue[tail++] = v;
			}
		}
	}
	/* the path, back to front: last -> 0, then prev links */
	for (int u = last, e = last_edge; u >= 0 && len <= g->n;)
	{
		path[len] = u;
		path_edge[len++] = e;
		if (u == 0)
			break;
		e = prev_edge[u];
		u = prev[u];
	}
	initStringInfo(&buf);
	for (int i = len - 1; i >= 0; i--)
	{
		DNode	   *d = &g->nodes[path[i]];
		DNode	   *to = &g->nodes[d->out[path_edge[i]]];

		if (buf.len > 0)
			appendStringInfoChar(&buf, '\n');
		describe_node(&buf, g, d, "Process");
		appendStringInfo(&buf, " waits for %s; blocked by ",
						 describe_wait(d, d->via[path_edge[i]]));
		describe_node(&buf, g, to, "process");
		appendStringInfoChar(&buf, '.');
	}
	return buf.data;
}

/*
 * The check of the waiter whose wait self describes: fails with 40P01 when
 * its wait is in a knot and it is the knot's victim, twice in a row.
 */
void
deadlock_check(const WaitGraphSlot *self)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext,
											  "rlock deadlock check",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	const char *me = rlock_backend_holder();
	DGraph	   *g = palloc(sizeof(DGraph));
	char	   *detail = NULL;
	int			victim;

	/* what Redis refuses is unknown, never the end of the wait */
	wait_read_tolerant(true);
	PG_TRY();
	{
		build(g, me);
		victim = knot_victim(g);
		if (victim == 0)
		{
			/* read it all again: a hand-off seen half done is no deadlock */
			build(g, me);
			victim = knot_victim(g);
			if (victim == 0 && g->nodes[0].wait != NULL)
				detail = knot_detail(g);
		}
	}
	PG_FINALLY();
	{
		wait_read_tolerant(false);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(old);
	if (detail != NULL)
	{
		char	   *d = pstrdup(detail);

		MemoryContextDelete(cxt);
		(void) rlock_event_record(RLOCK_EVENT_DEADLOCK, self->kind,
								  self->nkeys > 0 ? self->keys[0] : NULL, me,
								  "deadlock detected: %s", d);
		ereport(ERROR,
				(errcode(ERRCODE_T_R_DEADLOCK_DETECTED),
				 errmsg("deadlock detected"),
				 errdetail_internal("%s", d)));
	}
	MemoryContextDelete(cxt);
}
