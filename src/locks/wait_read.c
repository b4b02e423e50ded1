/*-------------------------------------------------------------------------
 *
 * wait_read.c
 *	  Reading the wait graph (SPEC.md section 5.6): every wait of every
 *	  server on the Redis, with the servers' names; who holds a lock (its
 *	  blockers); who blocks a PostgreSQL lock wait of this server.
 *	  rlock_waits, rlock_blocking_pids and the deadlock check read here.
 *
 * Every wait is read in one round trip (scripts_wait.c); this server's own
 * come from shared memory instead (wait_graph.c), which knows them at once
 * and exactly: Redis's copies of them are left out.  A lock's blockers are
 * read from its keys, one round trip per lock (on every master of a
 * Redlock, where a holder counts when a majority have it).  Replies are
 * trusted for nothing but their shape: a wrong one is an ERROR, and counts
 * are bounded here, not by what the server says.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/dbcommands.h"
#include "lib/stringinfo.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/timestamp.h"

#include "redis/redis.h"
#include "route/route.h"
#include "holds/holds.h"
#include "locks/locks.h"
#include "locks/locks_int.h"
#include "base/base.h"

/* The most waits read, and holders or queued waiters of one lock. */
#define WAIT_READ_MAX		10000
#define BLOCKERS_MAX		1000

/* A wait's own check reads (wait_read_tolerant); it logged a refusal. */
static bool tolerant = false;
static bool logged_refusal = false;

/*
 * During a waiter's deadlock check, an error reply (a Cluster's TRYAGAIN
 * while a slot moves, an ACL without the waits' keys) must not end the
 * wait it checks: what it refuses is taken as unknown (no wait, no
 * holder: no deadlock is claimed through it), and one LOG line per
 * session says so.  Elsewhere (rlock_waits) it is an ERROR.
 */
void
wait_read_tolerant(bool on)
{
	tolerant = on;
}

/* Was r an error reply?  (An ERROR unless tolerant: see above.) */
static bool
refused(RReply *r, const char *what)
{
	if (r->type != RREPLY_ERROR)
		return false;
	if (!tolerant)
		rconn_reply_error(r, ERROR, what);
	if (!logged_refusal)
	{
		logged_refusal = true;
		rconn_reply_error(r, LOG, what);
	}
	return true;
}

/* This server's instance UUID, as its holder ids begin. */
const char *
wait_my_uuid(void)
{
	static char uuid[37] = "";

	if (uuid[0] == '\0')
		strlcpy(uuid, rlock_backend_holder(), sizeof(uuid));
	return uuid;
}

/* The pid a holder id of a PostgreSQL session names; 0 for any other. */
int
wait_holder_pid(const char *holder)
{
	const char *p;

	if (holder == NULL || !lockname_has_holder_prefix(holder) ||
		!lockname_is_holder_identity(holder))
		return 0;
	p = holder + 37;
	for (const char *q = p; *q; q++)
		if (!isdigit((unsigned char) *q))
			return 0;			/* "<uuid>:<thread>:<more>": not ours */
	return (int) Min(strtol(p, NULL, 10), INT_MAX);
}

/* The name of the server a holder id belongs to (its UUID if unknown). */
const char *
wait_server_name(const WaitSnapshot *snap, const char *holder)
{
	if (holder == NULL || !lockname_has_holder_prefix(holder))
		return "";
	if (strncmp(holder, wait_my_uuid(), 36) == 0)
		return rlock_server_label();
	for (int i = 0; i < snap->nservers; i++)
		if (strncmp(holder, snap->server_uuids[i], 36) == 0)
			return snap->server_names[i];
	return pnstrdup(holder, 36);
}

/* A Redis time (epoch ms) on this server's clock. */
TimestampTz
wait_local_time(const WaitSnapshot *snap, int64 ms)
{
	return snap->local_now + (ms - snap->redis_now_ms) * 1000;
}

static char *
reply_text(const RReply *r)
{
	if (r == NULL || (r->type != RREPLY_STRING && r->type != RREPLY_STATUS))
		return NULL;
	return pnstrdup(r->str, r->len);
}

/* One record, {holder, field, value, ...}, into *w; false if malformed. */
static bool
parse_record(const RReply *r, WaitRecord *w)
{
	int			n = 0;

	memset(w, 0, sizeof(WaitRecord));
	if (r->type != RREPLY_ARRAY || r->elements < 1 ||
		(w->holder = reply_text(r->element[0])) == NULL)
		return false;
	w->kind = "exclusive";
	w->database = "";
	w->server = "";
	for (size_t i = 1; i + 1 < r->elements; i += 2)
	{
		char	   *f = reply_text(r->element[i]);
		char	   *v = reply_text(r->element[i + 1]);

		if (f == NULL || v == NULL)
			return false;
		if (strcmp(f, "since") == 0)
			w->since_ms = strtoll(v, NULL, 10);
		else if (strcmp(f, "server") == 0)
			w->server = v;
		else if (strcmp(f, "pid") == 0)
			w->pid = (int) Min(Max(strtol(v, NULL, 10), 0), INT_MAX);
		else if (strcmp(f, "database") == 0)
			w->database = v;
		else if (strcmp(f, "kind") == 0)
			w->kind = v;
		else if (strcmp(f, "checks") == 0)
			w->checks = (strcmp(v, "1") == 0);
		else if (strcmp(f, "n") == 0)
			n = (int) Min(Max(strtol(v, NULL, 10), 0), WAIT_MAX_KEYS);
		else if (f[0] == 'k' || f[0] == 'p')
		{
			long		k = strtol(f + 1, NULL, 10);

			if (k < 1 || k > WAIT_MAX_KEYS)
				continue;
			if (f[0] == 'k')
				w->keys[k - 1] = v;
			else
				w->names[k - 1] = v;	/* the prefix length, for now */
		}
	}
	for (int k = 0; k < n; k++)
	{
		long		plen;

		if (w->keys[k] == NULL)
			return false;
		plen = w->names[k] ? strtol(w->names[k], NULL, 10) : 0;
		if (plen < 0 || plen > (long) strlen(w->keys[k]))
			plen = 0;
		w->names[k] = w->keys[k] + plen;
	}
	w->nkeys = n;
	return n > 0 && w->since_ms > 0;
}

/*
 * A slot of this server's as a record; its since on Redis's clock (when
 * it was not made known there yet: this server's, moved by offset_ms).
 */
static void
slot_record(const WaitGraphSlot *s, WaitRecord *w, int64 offset_ms)
{
	char	   *db;

	memset(w, 0, sizeof(WaitRecord));
	w->holder = psprintf("%s:%d", wait_my_uuid(), s->pid);
	w->server = pstrdup(wait_my_uuid());
	w->pid = s->pid;
	db = OidIsValid(s->dboid) ? get_database_name(s->dboid) : NULL;
	w->database = db ? db : "";
	w->kind = pnstrdup(s->kind, WAIT_KIND_LEN - 1);
	w->since_ms = s->redis_since > 0 ? s->redis_since :
		(s->since - SetEpochTimestamp()) / 1000 + offset_ms;
	w->checks = s->checks;
	w->local = true;
	w->nkeys = Min(Max(s->nkeys, 0), WAIT_MAX_KEYS);
	for (int k = 0; k < w->nkeys; k++)
	{
		int			plen;

		w->keys[k] = pnstrdup(s->keys[k], RLOCK_MAX_KEY_LEN);
		plen = Min(Max(s->prefixlen[k], 0), (int) strlen(w->keys[k]));
		w->names[k] = w->keys[k] + plen;
	}
}

/* This server's waits, from shared memory, appended to snap. */
static void
add_local_waits(WaitSnapshot *snap, int64 offset_ms)
{
	int			nslots = wait_graph_nslots();
	WaitGraphSlot *s = palloc(sizeof(WaitGraphSlot));

	snap->recs = repalloc(snap->recs, (snap->n + nslots + 1) * sizeof(WaitRecord));
	for (int i = 0; i < nslots; i++)
		if (wait_graph_read_slot(i, s))
			slot_record(s, &snap->recs[snap->n++], offset_ms);
	pfree(s);
}

/* The wait of this server's session pid, if it waits (no Redis I/O). */
bool
wait_local_record(int pid, WaitRecord *w)
{
	WaitGraphSlot *s = palloc(sizeof(WaitGraphSlot));
	bool		found = false;

	for (int i = 0; i < wait_graph_nslots() && !found; i++)
		if (wait_graph_read_slot(i, s) && s->pid == pid)
		{
			slot_record(s, w, 0);
			found = true;
		}
	pfree(s);
	return found;
}

/*
 * The waits of the n holders (NULL where a holder waits for nothing
 * known): this server's from shared memory, the others' in one round trip
 * (their records share a slot).  The deadlock check reads the graph so,
 * from the waiter outwards, never every wait.
 */
void
wait_records_fetch(const char *const *holders, int n, WaitRecord **out)
{
	RedisCmd   *cmds = palloc((n + 1) * sizeof(RedisCmd));
	int		   *which = palloc((n + 1) * sizeof(int));
	int			ncmds = 0;
	RReply	  **replies;

	for (int i = 0; i < n; i++)
	{
		out[i] = NULL;
		if (wait_graph_nslots() > 0 &&
			strncmp(holders[i], wait_my_uuid(), 36) == 0)
		{
			WaitRecord *w = palloc(sizeof(WaitRecord));
			int			pid = wait_holder_pid(holders[i]);

			if (pid > 0 && wait_local_record(pid, w))
				out[i] = w;
			continue;
		}
		rcmd_init(&cmds[ncmds]);
		rcmd_str(&cmds[ncmds], "HGETALL");
		rcmd_str(&cmds[ncmds], psprintf("%s:wait:%s", RLOCK_SERVERS_KEY,
										holders[i]));
		which[ncmds++] = i;
	}
	if (ncmds == 0)
		return;
	(void) route_run(route_backend(), cmds, ncmds, &replies, ERROR,
					 "rlock waits");
	for (int c = 0; c < ncmds; c++)
	{
		RReply	   *r = replies[c];
		RReply		rec;
		RReply	   *name;
		WaitRecord *w = palloc(sizeof(WaitRecord));

		if (refused(r, "rlock waits"))
			continue;			/* unknown: no wait */
		if (r->type != RREPLY_ARRAY)
			rconn_unexpected_reply(r, "rlock waits");
		if (r->elements == 0)
			continue;			/* it waits for nothing known */
		/* as the read script answers: the holder first, then the fields */
		name = palloc0(sizeof(RReply));
		name->type = RREPLY_STRING;
		name->str = (char *) holders[which[c]];
		name->len = strlen(name->str);
		rec.type = RREPLY_ARRAY;
		rec.elements = r->elements + 1;
		rec.element = palloc((r->elements + 1) * sizeof(RReply *));
		rec.element[0] = name;
		memcpy(rec.element + 1, r->element, r->elements * sizeof(RReply *));
		if (parse_record(&rec, w))
			out[which[c]] = w;
	}
}

/*
 * Every wait of every server on the Redis (this server's from shared
 * memory), and the servers' names: one round trip.  max_waits 0 reads
 * only the servers' names.
 */
void
wait_snapshot_read(WaitSnapshot *snap, int max_waits)
{
	RedisCmd	cmd;
	RReply	  **replies;
	RReply	   *r;
	RReply	   *recs;
	RReply	   *srv;
	int64		local_ms;

	memset(snap, 0, sizeof(WaitSnapshot));
	rcmd_script(&cmd, RLOCK_SCRIPT_WAIT_READ, 2);
	rcmd_str(&cmd, RLOCK_WAITS_KEY);
	rcmd_str(&cmd, RLOCK_SERVERS_KEY);
	rcmd_str(&cmd, RLOCK_SERVERS_KEY ":wait:");
	rcmd_str(&cmd, RLOCK_SERVERS_KEY ":");
	rcmd_int(&cmd, Min(Max(max_waits, 0), WAIT_READ_MAX));
	(void) route_run(route_backend(), &cmd, 1, &replies, ERROR,
					 "rlock waits");
	r = replies[0];
	snap->local_now = GetCurrentTimestamp();
	if (refused(r, "rlock waits"))
		return;					/* no wait, no server's name known */
	if (r->type != RREPLY_ARRAY || r->elements != 3 ||
		r->element[0]->type != RREPLY_INTEGER ||
		r->element[1]->type != RREPLY_ARRAY ||
		r->element[2]->type != RREPLY_ARRAY)
		rconn_unexpected_reply(r, "rlock waits");
	snap->redis_now_ms = r->element[0]->integer;
	recs = r->element[1];
	srv = r->element[2];

	snap->recs = palloc0((Min(recs->elements, WAIT_READ_MAX) + 1) *
						 sizeof(WaitRecord));
	for (size_t i = 0; i < recs->elements && i < WAIT_READ_MAX; i++)
	{
		WaitRecord *w = &snap->recs[snap->n];

		if (!parse_record(recs->element[i], w))
			continue;			/* half written, or not ours: no edge */
		/* this server's waits come from shared memory, when it has them */
		if (wait_graph_nslots() > 0 &&
			strncmp(w->holder, wait_my_uuid(), 36) == 0)
			continue;
		snap->n++;
	}
	snap->nservers = 0;
	snap->server_uuids = palloc((srv->elements / 2 + 1) * sizeof(char *));
	snap->server_names = palloc((srv->elements / 2 + 1) * sizeof(char *));
	for (size_t i = 0; i + 1 < srv->elements && i < 2000; i += 2)
	{
		char	   *u = reply_text(srv->element[i]);
		char	   *n = reply_text(srv->element[i + 1]);

		if (u == NULL || n == NULL)
			continue;
		snap->server_uuids[snap->nservers] = u;
		snap->server_names[snap->nservers++] = n;
	}
	local_ms = (snap->local_now - SetEpochTimestamp()) / 1000;
	if (max_waits > 0)
		add_local_waits(snap, snap->redis_now_ms - local_ms);
}

/* Strings of an array reply, at most max. */
static int
reply_strings(const RReply *r, char ***out, int max)
{
	int			n = 0;

	*out = palloc((Min(r->elements, (size_t) max) + 1) * sizeof(char *));
	for (size_t i = 0; i < r->elements && n < max; i++)
	{
		char	   *s = reply_text(r->element[i]);

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
	b->mode = reply_text(r->element[0]);
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
		if (refused(replies[0], name))
			return b;			/* unknown: no holder */
		if (!parse_blockers(replies[0], b))
			rconn_unexpected_reply(replies[0], name);
	}
	return b;
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
