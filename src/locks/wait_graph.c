/*-------------------------------------------------------------------------
 *
 * wait_graph.c
 *	  Waits made known (SPEC.md section 5.6): this server's in shared
 *	  memory at once (wait_slots.c), every server's in Redis once a wait
 *	  lasts; and the timing of a wait's deadlock checks (deadlock.c).
 *
 * A kind describes its next wait (wait_graph_next: its kind, its keys)
 * before it calls lock_wait or event_wait; the wait fills this backend's
 * slot when it begins and empties it when it ends (also from PG_CATCH, and
 * at exit: it is only shared memory).
 *
 * Redis learns of a wait only when it has lasted WAIT_REGISTER_AFTER_MS
 * (or half the deadlock timeout, if shorter): an uncontended acquire and a
 * short wait make no round trip for it.  The record (scripts_wait.c)
 * expires WAIT_RECORD_TTL_MS after its last refresh; the waiter refreshes
 * it every WAIT_REFRESH_MS and deletes it when the wait ends (from the
 * abort path when an ERROR ended it: no Redis I/O in PG_CATCH).  Its
 * "since" is Redis's time, so that every server orders waits alike.
 *
 * The wait loops call wait_graph_tick on each round and never sleep past
 * wait_graph_due: the tick registers, refreshes, and, once the wait has
 * lasted rlock.deadlock_timeout (PostgreSQL's deadlock_timeout when -1;
 * never when 0), checks for a deadlock, then again every deadlock_timeout
 * (at least WAIT_RECHECK_MIN_MS apart): a cycle can close after the first
 * check (a PostgreSQL lock wait joins it, another server's wait is made
 * known late).  A failure to tell Redis ends neither the wait nor the
 * checks of others: the waiter tries again at its next refresh.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "commands/dbcommands.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "redis/redis.h"
#include "route/route.h"
#include "holds/holds.h"
#include "locks/locks.h"
#include "locks/locks_int.h"
#include "base/base.h"

#define WAIT_REGISTER_AFTER_MS	100
#define WAIT_REFRESH_MS			2000
#define WAIT_RECORD_TTL_MS		6000
#define WAIT_RECHECK_MIN_MS		100

static bool exit_callback_registered = false;
static bool logged_refusal = false;

/* The next wait, as its kind describes it (wait_graph_next). */
static char next_kind[WAIT_KIND_LEN] = "";
static int	next_nkeys = 0;
static const LockName *next_lns = NULL;

/* This backend's wait, while it lasts. */
static struct
{
	bool		active;
	WaitGraphSlot self;			/* what the slot says */
	TimestampTz register_at;	/* make it known in Redis (then refresh) */
	TimestampTz check_at;		/* the next deadlock check; DT_NOEND none */
	int			check_ms;		/* between checks */
	char	   *record_key;		/* in Redis, to delete at the end */
}			cur;

/* A record of an ended wait still to delete (the abort path does). */
static char *stale_record = NULL;

static void wait_graph_cleanup(void);

/* The deadlock timeout in force: ms, 0 = never check. */
int
wait_graph_deadlock_timeout(void)
{
	return rlock_deadlock_timeout_ms >= 0 ? rlock_deadlock_timeout_ms :
		DeadlockTimeout;
}

/* Publish cur.self in the slot (or empty it: pid 0). */
static void
write_slot(bool waiting)
{
	WaitGraphSlot *s = wait_slots_mine();

	if (s == NULL)
		return;
	pg_atomic_fetch_add_u32(&s->changecount, 1);
	pg_write_barrier();
	if (waiting)
	{
		/* all but the change count, which comes first */
		memcpy(((char *) s) + sizeof(pg_atomic_uint32),
			   ((char *) &cur.self) + sizeof(pg_atomic_uint32),
			   sizeof(WaitGraphSlot) - sizeof(pg_atomic_uint32));
	}
	else
		s->pid = 0;
	pg_write_barrier();
	pg_atomic_fetch_add_u32(&s->changecount, 1);
}

/* Backend exit while waiting (a FATAL skips the wait's own end). */
static void
wait_graph_exit_callback(int code, Datum arg)
{
	if (cur.active)
		write_slot(false);
	cur.active = false;
}

/*
 * Describe the next wait: kind (a word: "exclusive", "semaphore",
 * "latch"...) and the locks it waits for (the first WAIT_MAX_KEYS of n).
 * lns must stay valid until the wait begins.
 */
void
wait_graph_next(const char *kind, const LockName *lns, int n)
{
	strlcpy(next_kind, kind, sizeof(next_kind));
	next_lns = lns;
	next_nkeys = Min(n, WAIT_MAX_KEYS);
}

/*
 * A wait begins, for ln unless the kind described it (wait_graph_next).
 * checks: it may check for deadlocks (a latch's never does).
 */
void
wait_graph_begin(const LockName *ln, bool checks)
{
	TimestampTz now = GetCurrentTimestamp();
	int			dt = wait_graph_deadlock_timeout();
	int			reg_ms = WAIT_REGISTER_AFTER_MS;
	WaitGraphSlot *s = &cur.self;

	if (cur.active)
		wait_graph_end();
	memset(s, 0, sizeof(WaitGraphSlot));
	s->pid = MyProcPid;
	s->dboid = MyDatabaseId;
	s->since = now;
	strlcpy(s->kind, next_kind[0] ? next_kind : "exclusive", WAIT_KIND_LEN);
	if (next_lns == NULL || next_nkeys <= 0)
	{
		next_lns = ln;
		next_nkeys = 1;
	}
	s->nkeys = next_nkeys;
	for (int i = 0; i < s->nkeys; i++)
	{
		strlcpy(s->keys[i], next_lns[i].key, RLOCK_MAX_KEY_LEN + 1);
		s->prefixlen[i] = next_lns[i].keylen - (int) strlen(next_lns[i].name);
		if (s->prefixlen[i] < 0)
			s->prefixlen[i] = 0;
	}
	next_kind[0] = '\0';
	next_lns = NULL;
	next_nkeys = 0;
	s->checks = checks && dt > 0;

	if (dt > 0)
		reg_ms = Min(reg_ms, dt / 2);
	cur.register_at = TimestampTzPlusMilliseconds(now, reg_ms);
	cur.check_ms = Max(dt, WAIT_RECHECK_MIN_MS);
	cur.check_at = s->checks ? TimestampTzPlusMilliseconds(now, dt) : DT_NOEND;
	cur.record_key = NULL;
	cur.active = true;

	holds_on_abort(wait_graph_cleanup);
	if (!exit_callback_registered && wait_slots_mine() != NULL)
	{
		before_shmem_exit(wait_graph_exit_callback, (Datum) 0);
		exit_callback_registered = true;
	}
	write_slot(true);
}

/* The record's key of this backend's wait, in TopMemoryContext. */
static char *
record_key(void)
{
	return MemoryContextStrdup(TopMemoryContext,
							   psprintf("%s:wait:%s", RLOCK_SERVERS_KEY,
										rlock_backend_holder()));
}

/* This database's name, for the record (read once). */
static const char *
my_database(void)
{
	static char *name = NULL;

	if (name == NULL && OidIsValid(MyDatabaseId))
	{
		char	   *n = get_database_name(MyDatabaseId);

		if (n != NULL)
			name = MemoryContextStrdup(TopMemoryContext, n);
	}
	return name ? name : "";
}

/*
 * Make the wait known in Redis, or refresh it: one round trip.  Its reply
 * is Redis's "since"; a reply not an integer leaves the wait unknown there
 * (a LOG line says so once per session, for an error reply).
 */
static void
register_wait(TimestampTz now)
{
	WaitGraphSlot *s = &cur.self;
	RedisCmd	cmd;
	RReply	  **replies;
	long		secs;
	int			usecs;
	char		field[16];
	bool		ok;

	if (cur.record_key == NULL)
		cur.record_key = record_key();
	TimestampDifference(s->since, now, &secs, &usecs);
	rcmd_script(&cmd, RLOCK_SCRIPT_WAIT_REGISTER, 2);
	rcmd_str(&cmd, cur.record_key);
	rcmd_str(&cmd, RLOCK_WAITS_KEY);
	rcmd_int(&cmd, WAIT_RECORD_TTL_MS);
	rcmd_int(&cmd, secs * 1000 + usecs / 1000);
	rcmd_int(&cmd, s->redis_since);
	rcmd_str(&cmd, rlock_backend_holder());
	rcmd_str(&cmd, "server");
	rcmd_str(&cmd, registry_instance_uuid() ? registry_instance_uuid() : "");
	rcmd_str(&cmd, "pid");
	rcmd_int(&cmd, MyProcPid);
	rcmd_str(&cmd, "database");
	rcmd_str(&cmd, my_database());
	rcmd_str(&cmd, "kind");
	rcmd_str(&cmd, s->kind);
	rcmd_str(&cmd, "checks");
	rcmd_str(&cmd, s->checks ? "1" : "0");
	rcmd_str(&cmd, "n");
	rcmd_int(&cmd, s->nkeys);
	for (int i = 0; i < s->nkeys; i++)
	{
		snprintf(field, sizeof(field), "k%d", i + 1);
		rcmd_str(&cmd, pstrdup(field));
		rcmd_str(&cmd, s->keys[i]);
		snprintf(field, sizeof(field), "p%d", i + 1);
		rcmd_str(&cmd, pstrdup(field));
		rcmd_int(&cmd, s->prefixlen[i]);
	}
	/* not lock traffic (rlock_stats counts none); a failure waits for the next */
	stats_quiet = true;
	ok = route_run(route_backend(), &cmd, 1, &replies, DEBUG1, NULL);
	stats_quiet = false;
	if (!ok)
		return;
	if (replies[0]->type == RREPLY_INTEGER && replies[0]->integer > 0)
	{
		s->redis_since = replies[0]->integer;
		write_slot(true);
	}
	else if (replies[0]->type == RREPLY_ERROR && !logged_refusal)
	{
		/* (an ACL without the waits' keys: one LOG line per session) */
		logged_refusal = true;
		rconn_reply_error(replies[0], LOG, "rlock wait record");
	}
}

/*
 * On each round of a wait: make it known, refresh it, check for a
 * deadlock when due.  May throw (an outage; 40P01 for the victim).
 */
void
wait_graph_tick(void)
{
	TimestampTz now;

	if (!cur.active)
		return;
	now = GetCurrentTimestamp();
	/* (the next times first: a round trip that throws is not repeated at once) */
	if (now >= cur.register_at)
	{
		cur.register_at = TimestampTzPlusMilliseconds(now, WAIT_REFRESH_MS);
		register_wait(now);
	}
	if (now >= cur.check_at)
	{
		cur.check_at = TimestampTzPlusMilliseconds(now, cur.check_ms);
		stats_quiet = true;
		PG_TRY();
		{
			deadlock_check(&cur.self);
		}
		PG_FINALLY();
		{
			stats_quiet = false;
		}
		PG_END_TRY();
	}
}

/* When the wait has work for wait_graph_tick (DT_NOEND: none). */
TimestampTz
wait_graph_due(void)
{
	if (!cur.active)
		return DT_NOEND;
	return Min(cur.register_at, cur.check_at);
}

/* Delete the record of an ended wait, if any: never throws. */
static void
delete_record(char *key)
{
	RedisCmd	cmds[2];
	RReply	  **replies;

	rcmd_init(&cmds[0]);
	rcmd_str(&cmds[0], "DEL");
	rcmd_str(&cmds[0], key);
	rcmd_init(&cmds[1]);
	rcmd_str(&cmds[1], "ZREM");
	rcmd_str(&cmds[1], RLOCK_WAITS_KEY);
	rcmd_str(&cmds[1], rlock_backend_holder());
	stats_quiet = true;
	(void) route_run(route_backend(), cmds, 2, &replies, DEBUG1, NULL);
	stats_quiet = false;
}

/*
 * Forget the waits of a former run of this server (crash_cleanup.c, after
 * a restart): none can be alive.  One round trip; false if it failed.
 */
bool
wait_graph_forget_server(const char *uuid, TimestampTz cap)
{
	RedisCmd	cmd;
	RReply	  **replies;
	RedisConn  *conn = route_backend();
	bool		ok;

	if (uuid == NULL || strlen(uuid) != 36)
		return true;
	rcmd_script(&cmd, RLOCK_SCRIPT_WAIT_FORGET, 1);
	rcmd_str(&cmd, RLOCK_WAITS_KEY);
	rcmd_str(&cmd, RLOCK_SERVERS_KEY ":wait:");
	rcmd_str(&cmd, psprintf("%s:", uuid));
	stats_quiet = true;
	rconn_set_deadline_cap(conn, cap);
	ok = route_run(conn, &cmd, 1, &replies, DEBUG1, NULL);
	rconn_set_deadline_cap(conn, DT_NOEND);
	stats_quiet = false;
	return ok && replies[0]->type == RREPLY_INTEGER;
}

/* The abort path's clean-up: a record an ERROR left (holds_on_abort). */
static void
wait_graph_cleanup(void)
{
	char	   *key = stale_record;

	if (key == NULL)
		return;
	stale_record = NULL;
	delete_record(key);
	pfree(key);
}

/* The wait ended (acquired, or its time ran out): forget it. */
void
wait_graph_end(void)
{
	char	   *key = cur.record_key;

	if (!cur.active)
		return;
	cur.active = false;
	cur.record_key = NULL;
	write_slot(false);
	if (key != NULL)
	{
		delete_record(key);
		pfree(key);
	}
}

/*
 * The wait was ended by an ERROR (in PG_CATCH): empty the slot, and leave
 * the record's deletion to the abort path.
 */
void
wait_graph_abandon(void)
{
	if (!cur.active)
		return;
	cur.active = false;
	write_slot(false);
	if (cur.record_key != NULL)
	{
		if (stale_record != NULL)
			pfree(stale_record);
		stale_record = cur.record_key;
		cur.record_key = NULL;
	}
}
