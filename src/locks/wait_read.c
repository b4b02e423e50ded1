/*-------------------------------------------------------------------------
 *
 * wait_read.c
 *	  Reading the waits (SPEC.md section 5.6): every wait of every server
 *	  on the Redis, with the servers' names, or the waits of some holders;
 *	  who blocks them is read in wait_blockers.c.  rlock_waits,
 *	  rlock_blocking_pids and the deadlock check read here.
 *
 * Every wait is read in one round trip (scripts_wait.c); this server's own
 * come from shared memory instead (wait_graph.c), which knows them at once
 * and exactly: Redis's copies of them are left out.  Replies are
 * trusted for nothing but their shape: a wrong one is an ERROR, and counts
 * are bounded here, not by what the server says.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/dbcommands.h"
#include "utils/timestamp.h"

#include "redis/redis.h"
#include "route/route.h"
#include "holds/holds.h"
#include "locks/locks.h"
#include "locks/locks_int.h"
#include "base/base.h"

/* The most waits read. */
#define WAIT_READ_MAX		10000

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
bool
wait_read_refused(RReply *r, const char *what)
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

char *
wait_reply_text(const RReply *r)
{
	if (r == NULL || (r->type != RREPLY_STRING && r->type != RREPLY_STATUS))
		return NULL;
	return pnstrdup(r->str, r->len);
}

/*
 * The wait of holder, whose hash's fields and values are r's elements
 * from first on, into *w; false if malformed.
 */
static bool
parse_record(char *holder, const RReply *r, size_t first, WaitRecord *w)
{
	int			n = 0;

	memset(w, 0, sizeof(WaitRecord));
	if (holder == NULL || r->type != RREPLY_ARRAY)
		return false;
	w->holder = holder;
	w->kind = "exclusive";
	w->database = "";
	w->server = "";
	for (size_t i = first; i + 1 < r->elements; i += 2)
	{
		char	   *f = wait_reply_text(r->element[i]);
		char	   *v = wait_reply_text(r->element[i + 1]);

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
		if (wait_graph_read_slot(i, 0, s))
			slot_record(s, &snap->recs[snap->n++], offset_ms);
	pfree(s);
}

/* The wait of this server's session pid, if it waits (no Redis I/O). */
bool
wait_local_record(int pid, WaitRecord *w)
{
	WaitGraphSlot *s;
	bool		found = false;

	if (pid <= 0)
		return false;			/* (0 would match any waiter's slot) */
	s = palloc(sizeof(WaitGraphSlot));

	for (int i = 0; i < wait_graph_nslots() && !found; i++)
		if (wait_graph_read_slot(i, pid, s))
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
		WaitRecord *w = palloc(sizeof(WaitRecord));

		if (wait_read_refused(r, "rlock waits"))
			continue;			/* unknown: no wait */
		if (r->type != RREPLY_ARRAY)
			rconn_unexpected_reply(r, "rlock waits");
		if (r->elements == 0)
			continue;			/* it waits for nothing known */
		if (parse_record(pstrdup(holders[which[c]]), r, 0, w))
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
	if (wait_read_refused(r, "rlock waits"))
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

		RReply	   *rec = recs->element[i];

		/* the read script answers {holder, field, value, ...} */
		if (rec->type != RREPLY_ARRAY || rec->elements < 1 ||
			!parse_record(wait_reply_text(rec->element[0]), rec, 1, w))
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
		char	   *u = wait_reply_text(srv->element[i]);
		char	   *n = wait_reply_text(srv->element[i + 1]);

		if (u == NULL || n == NULL)
			continue;
		snap->server_uuids[snap->nservers] = u;
		snap->server_names[snap->nservers++] = n;
	}
	local_ms = (snap->local_now - SetEpochTimestamp()) / 1000;
	if (max_waits > 0)
		add_local_waits(snap, snap->redis_now_ms - local_ms);
}
