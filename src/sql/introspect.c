/*-------------------------------------------------------------------------
 *
 * introspect.c
 *	  Introspection functions of SPEC.md section 5.4: who holds a lock, how
 *	  often, for how long, and whether Redis answers.
 *
 * These read Redis, which is the truth about a lock (other sessions, other
 * servers and Redisson clients share it); they never change it and never
 * touch this session's held-lock table.  rlock_locks, the view of what this
 * server's sessions hold, reads the shared-memory registry instead, and
 * rlock_stats the shared-memory counters of stats.c (one C symbol per
 * version of its SQL declaration).  rlock_version reports the library's
 * version.
 *
 * Owner tokens are bearer secrets (SPEC.md section 8).  Redis holds only
 * their digests (lockname_owner_field), and rlock_status shows not even
 * those: a holder that is not a holder identity ("<uuid>:...") is shown as
 * OWNER_TOKEN_SHOWN to superusers and members of pg_read_all_stats, and as
 * NO_PRIVILEGE_SHOWN to other roles, as pg_stat_activity shows another
 * role's query.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "access/htup_details.h"
#include "catalog/pg_authid.h"
#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "redis/redis.h"
#include "route/route.h"
#include "holds/holds.h"
#include "locks/locks.h"
#include "base/base.h"
#include "sql/sql.h"

static Interval *
ms_interval(int64 ms)
{
	Interval   *iv = palloc0(sizeof(Interval));

	iv->time = ms * 1000;
	return iv;
}

/*
 * Run the status script: returns the reply (owned by the connection) with
 * element[0] = PTTL (-2: nothing held), element[1] = what the name is (0 a
 * lock, 1 a fair lock with waiters queued, 2 a semaphore with permits out,
 * 3 a count: a latch, or a semaphore without permits out), element[2] =
 * this session's holds (a semaphore's: permits), and then holder/count
 * pairs (a lock's: its hash's fields and values).
 */
#define STATUS_SEMAPHORE	2

static RReply *
lock_status(const LockName *ln)
{
	RedisCmd	cmd;
	RReply *r;

	rcmd_status(&cmd, ln);
	r = route_run1(route_backend(), &cmd, ln->name);
	if (r->type == RREPLY_ERROR)
		rconn_reply_error(r, ERROR, ln->name);
	if (r->type != RREPLY_ARRAY || r->elements < 3 ||
		r->element[0]->type != RREPLY_INTEGER ||
		r->element[1]->type != RREPLY_INTEGER ||
		r->element[2]->type != RREPLY_INTEGER ||
		r->elements % 2 != 1)
		rconn_unexpected_reply(r, ln->name);
	return r;
}

/*
 * This session's holds of a lock, as Redis counts them: its exclusive (or
 * read) field plus its write field ("<holder>:write", read/write locks);
 * of a semaphore, its permits; of a Redlock it holds, a majority's count.
 */
static int64
own_hold_count(const LockName *ln)
{
	int64		count;
	int64		pttl;

	if (redlock_own_status(ln, &count, &pttl))
		return count;
	return lock_status(ln)->element[2]->integer;
}

/*
 * Every introspection function takes the lock name first.  Before reading
 * Redis, undo whatever an interrupted call may have left there, so that
 * what is reported is what this session really holds.
 */
static void
name_arg(FunctionCallInfo fcinfo, LockName *ln)
{
	lockname_init(ln, PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0));
	holds_settle();
}

/*
 * rlock_version(): the version of this library, rlock.control's
 * default_version when it was built (the Makefile passes it).
 */
#ifndef RLOCK_VERSION
#error "RLOCK_VERSION: the Makefile defines it from rlock.control"
#endif

PG_FUNCTION_INFO_V1(rlock_version);
Datum
rlock_version(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(cstring_to_text(RLOCK_VERSION));
}

PG_FUNCTION_INFO_V1(rlock_holder_id);
Datum
rlock_holder_id(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(cstring_to_text(rlock_backend_holder()));
}

/*
 * A name this session holds as a Redlock lives on the Redlock's masters:
 * is_locked, is_held, hold_count and remaining_lease ask them
 * (redlock_own_status) rather than rlock.redis_url's Redis.
 */
PG_FUNCTION_INFO_V1(rlock_is_locked);
Datum
rlock_is_locked(PG_FUNCTION_ARGS)
{
	LockName	ln;
	int64		count;
	int64		pttl;

	name_arg(fcinfo, &ln);
	if (redlock_own_status(&ln, &count, &pttl) && count > 0)
		PG_RETURN_BOOL(true);
	PG_RETURN_BOOL(lock_status(&ln)->element[0]->integer != -2);
}

PG_FUNCTION_INFO_V1(rlock_is_held);
Datum
rlock_is_held(PG_FUNCTION_ARGS)
{
	LockName	ln;

	name_arg(fcinfo, &ln);
	PG_RETURN_BOOL(own_hold_count(&ln) > 0);
}

PG_FUNCTION_INFO_V1(rlock_hold_count);
Datum
rlock_hold_count(PG_FUNCTION_ARGS)
{
	LockName	ln;

	name_arg(fcinfo, &ln);
	/* (a count Redis keeps, within an int whatever it is) */
	PG_RETURN_INT32((int32) Max(Min(own_hold_count(&ln), PG_INT32_MAX),
								PG_INT32_MIN));
}

PG_FUNCTION_INFO_V1(rlock_remaining_lease);
Datum
rlock_remaining_lease(PG_FUNCTION_ARGS)
{
	LockName	ln;
	int64		count;
	int64		pttl;

	name_arg(fcinfo, &ln);
	if (!redlock_own_status(&ln, &count, &pttl) || pttl == -2)
		pttl = lock_status(&ln)->element[0]->integer;
	/* -2: not locked; -1: locked without expiry (not set by rlock) */
	if (pttl < 0)
		PG_RETURN_NULL();
	PG_RETURN_INTERVAL_P(ms_interval(pttl));
}

/*
 * rlock_status(name): one row per holder.  For read/write locks (a "mode"
 * field), "<holder>:write" fields are write holds and the others read holds.
 * A fair lock's hash is an exclusive lock's: it shows as "fair" while
 * waiters are queued for it, or when this session holds it as one.  An
 * owner token's holds are masked (see the top of the file).
 */
PG_FUNCTION_INFO_V1(rlock_status);
Datum
rlock_status(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	LockName	ln;
	RReply *r;
	int64		pttl;
	const char *mode = NULL;
	bool		queued;
	bool		semaphore;
	bool		privileged = sql_sees_owner_tokens();
	int			nfields;
	char	  **fields;
	char	  **values;

	name_arg(fcinfo, &ln);
	InitMaterializedSRF(fcinfo, 0);
	r = lock_status(&ln);
	pttl = r->element[0]->integer;
	if (pttl == -2)
		return (Datum) 0;

	/* copy the reply out before building tuples (which may ERROR) */
	queued = (r->element[1]->integer == 1);
	semaphore = (r->element[1]->integer == STATUS_SEMAPHORE);
	nfields = (r->elements - 3) / 2;
	fields = palloc(nfields * sizeof(char *));
	values = palloc(nfields * sizeof(char *));
	for (int i = 0; i < nfields; i++)
	{
		RReply *f = r->element[3 + 2 * i];
		RReply *v = r->element[4 + 2 * i];

		if (f->type != RREPLY_STRING ||
			v->type != (semaphore ? RREPLY_INTEGER : RREPLY_STRING))
			rconn_unexpected_reply(r, ln.name);
		fields[i] = pnstrdup(f->str, f->len);
		values[i] = semaphore ? psprintf(INT64_FORMAT, v->integer) :
			pnstrdup(v->str, v->len);
		if (!semaphore && strcmp(fields[i], "mode") == 0)
			mode = values[i];
	}

	for (int i = 0; i < nfields; i++)
	{
		Datum		vals[4];
		bool		nulls[4] = {false, false, false, false};
		const char *kind = "exclusive";
		HeldLock   *own;
		char	   *holder = fields[i];
		int64		count;

		if (mode != NULL && strcmp(holder, "mode") == 0)
			continue;
		own = holds_find(ln.key, RLOCK_KIND_FAIR);
		if (semaphore)
			kind = "semaphore";
		else if (queued ||
			(own != NULL && holds_total(own) > 0 &&
			 strcmp(holder, rlock_backend_holder()) == 0))
			kind = "fair";
		if (mode != NULL)
		{
			size_t		len = strlen(holder);

			kind = "read";
			if (len > 6 && strcmp(holder + len - 6, ":write") == 0)
			{
				kind = "write";
				holder[len - 6] = '\0';
			}
		}
		count = strtoll(values[i], NULL, 10);
		vals[0] = CStringGetTextDatum(kind);
		if (lockname_is_holder_identity(holder))
			vals[1] = CStringGetTextDatum(holder);
		else
			vals[1] = CStringGetTextDatum(privileged ? OWNER_TOKEN_SHOWN :
										  NO_PRIVILEGE_SHOWN);
		vals[2] = Int32GetDatum((int32) Max(Min(count, PG_INT32_MAX),
											PG_INT32_MIN));
		if (pttl >= 0)
			vals[3] = IntervalPGetDatum(ms_interval(pttl));
		else
			nulls[3] = true;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, vals, nulls);
	}
	return (Datum) 0;
}

/*
 * rlock_locks(): every lock held by any session of this server, one row per
 * scope (a backend holding a name at session and transaction level shows
 * twice), from the shared registry.
 */
PG_FUNCTION_INFO_V1(rlock_locks);
Datum
rlock_locks(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	RegistryRow *rows;
	int			n;
	const char *uuid;
	char	   *node;

	registry_require("rlock_locks");
	InitMaterializedSRF(fcinfo, 0);
	n = registry_snapshot(&rows);
	uuid = registry_instance_uuid();
	/* every lock lives on the master (of its slot, in a Cluster) */
	node = route_is_cluster() ? NULL : route_master_address();

	for (int i = 0; i < n; i++)
	{
		RegistryRow *e = &rows[i];
		char	   *dbname = get_database_name(e->dboid);

		for (int scope = 0; scope < 2; scope++)
		{
			Datum		vals[12];
			bool		nulls[12] = {0};
			int			count = scope == 0 ? e->session_count : e->xact_count;

			if (count == 0)
				continue;
			vals[0] = Int32GetDatum(e->pid);
			if (dbname)
				vals[1] = DirectFunctionCall1(namein, CStringGetDatum(dbname));
			else
				nulls[1] = true;
			vals[2] = CStringGetTextDatum(e->key);
			vals[3] = CStringGetTextDatum(rlock_kind_name(e->kind));
			vals[4] = CStringGetTextDatum(scope == 0 ? "session" : "transaction");
			vals[5] = CStringGetTextDatum(psprintf("%s:%d", uuid, e->pid));
			vals[6] = Int32GetDatum(count);
			vals[7] = IntervalPGetDatum(ms_interval(e->lease_ms));
			vals[8] = TimestampTzGetDatum(e->acquired_at);
			if (e->renewed_at != 0)
				vals[9] = TimestampTzGetDatum(e->renewed_at);
			else
				nulls[9] = true;
			vals[10] = CStringGetTextDatum(e->state == REGISTRY_LOST ? "lost" :
												 e->state == REGISTRY_STRANDED ? "stranded" : "held");
			if (route_is_cluster() && kind_is_local(e->kind))
				node = route_node_address(e->key);
			/* (a Redlock lives on the masters of rlock.redlock_urls) */
			if (node && kind_is_local(e->kind))
				vals[11] = CStringGetTextDatum(node);
			else
				nulls[11] = true;
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, vals, nulls);
		}
	}
	return (Datum) 0;
}

/*
 * rlock_stats(): one row of counters for the whole server, in the order of
 * RlockStat, then when they were last reset.
 *
 * Each version of the SQL function has a C symbol of its own, as
 * pg_stat_statements does, so that the library serves a catalog of any
 * version it knows until ALTER EXTENSION UPDATE runs: 0.1 declared no
 * open_connections (rlock_stats), 0.2 does (rlock_stats_0_2).
 */
typedef enum RlockStatsVersion
{
	RLOCK_STATS_0_1,
	RLOCK_STATS_0_2
} RlockStatsVersion;

static Datum
stats_row(FunctionCallInfo fcinfo, RlockStatsVersion version)
{
	TupleDesc	tupdesc;
	uint64		values[RLOCK_NUM_STATS];
	TimestampTz reset_at;
	Datum		vals[RLOCK_NUM_STATS + 1];
	bool		nulls[RLOCK_NUM_STATS + 1] = {0};
	int			n = 0;

	registry_require("rlock_stats");
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	stats_read(values, &reset_at);
	for (int s = 0; s < RLOCK_NUM_STATS; s++)
	{
		if (s == RLOCK_STAT_OPEN_CONNECTIONS && version < RLOCK_STATS_0_2)
			continue;
		if (s == RLOCK_STAT_WAIT_US || s == RLOCK_STAT_RENEWAL_US)
			vals[n++] = Float8GetDatum((double) values[s] / 1000.0);	/* ms */
		else
			vals[n++] = Int64GetDatum((int64) values[s]);
	}
	vals[n++] = TimestampTzGetDatum(reset_at);
	if (tupdesc->natts != n)
		elog(ERROR, "rlock_stats() returns %d columns, expected %d",
			 tupdesc->natts, n);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, vals, nulls)));
}

/* rlock 0.1's rlock_stats: every column but open_connections */
PG_FUNCTION_INFO_V1(rlock_stats);
Datum
rlock_stats(PG_FUNCTION_ARGS)
{
	return stats_row(fcinfo, RLOCK_STATS_0_1);
}

PG_FUNCTION_INFO_V1(rlock_stats_0_2);
Datum
rlock_stats_0_2(PG_FUNCTION_ARGS)
{
	return stats_row(fcinfo, RLOCK_STATS_0_2);
}

PG_FUNCTION_INFO_V1(rlock_stats_reset);
Datum
rlock_stats_reset(PG_FUNCTION_ARGS)
{
	registry_require("rlock_stats_reset");
	stats_reset();
	PG_RETURN_VOID();
}

/* rlock_fenced_token(name): the last fencing token handed out; NULL if none. */
PG_FUNCTION_INFO_V1(rlock_fenced_token);
Datum
rlock_fenced_token(PG_FUNCTION_ARGS)
{
	LockName	ln;
	int64		token;

	name_arg(fcinfo, &ln);
	if (!exclusive_token(&ln, &token))
		PG_RETURN_NULL();
	PG_RETURN_INT64(token);
}

/*
 * PING (and ROLE, with_role) every master of a Cluster at once; ops[i] says
 * how each fared.  Returns the number of masters.
 */
static int
ping_cluster_masters(RconnOp **ops, bool with_role)
{
	RedisConn **conns;
	int			n = route_cluster_masters(&conns);
	RedisCmd   *cmds = palloc(2 * sizeof(RedisCmd));

	rcmd_init(&cmds[0]);
	rcmd_str(&cmds[0], "PING");
	rcmd_init(&cmds[1]);
	rcmd_str(&cmds[1], "ROLE");
	*ops = palloc0(Max(n, 1) * sizeof(RconnOp));
	for (int i = 0; i < n; i++)
	{
		(*ops)[i].conn = conns[i];
		(*ops)[i].cmds = cmds;
		(*ops)[i].ncmds = with_role ? 2 : 1;
	}
	rconn_run_parallel(*ops, n);
	return n;
}

/*
 * rlock_ping(): one round trip to Redis (in a Cluster: to every master at
 * once); ERROR when one cannot be reached.
 */
PG_FUNCTION_INFO_V1(rlock_ping);
Datum
rlock_ping(PG_FUNCTION_ARGS)
{
	RedisCmd	cmd;
	RReply *r;
	RedisConn  *conn = route_backend();
	TimestampTz start;
	Interval   *iv;

	route_ready(conn, NULL);
	start = GetCurrentTimestamp();
	if (route_is_cluster())
	{
		RconnOp    *ops;
		int			n = ping_cluster_masters(&ops, false);

		for (int i = 0; i < n; i++)
			if (!ops[i].ok)
				ereport(ERROR,
						(errcode(ERRCODE_CONNECTION_FAILURE),
						 errmsg("Redis Cluster master %s did not answer PING",
								rconn_address(ops[i].conn)),
						 errhint("A failover may be under way; check the cluster with CLUSTER INFO.")));
	}
	else
	{
		rcmd_init(&cmd);
		rcmd_str(&cmd, "PING");
		r = route_run1(conn, &cmd, NULL);
		if (r->type != RREPLY_STATUS || strcmp(r->str, "PONG") != 0)
			rconn_unexpected_reply(r, NULL);
	}
	iv = palloc0(sizeof(Interval));
	iv->time = GetCurrentTimestamp() - start;
	PG_RETURN_INTERVAL_P(iv);
}

/* One row of rlock_nodes: a node, its ROLE answer (or NULL), the round trip. */
static void
node_row(ReturnSetInfo *rsinfo, const char *addr, RReply *role, int64 us)
{
	Datum		vals[4];
	bool		nulls[4] = {0};

	vals[0] = CStringGetTextDatum(addr);
	if (role != NULL && role->type == RREPLY_ARRAY && role->elements >= 1 &&
		role->element[0]->type == RREPLY_STRING)
	{
		vals[1] = CStringGetTextDatum(rlock_printable(role->element[0]->str,
													  role->element[0]->len));
		if (strcmp(role->element[0]->str, "master") == 0 &&
			role->elements >= 3 && role->element[2]->type == RREPLY_ARRAY)
			vals[2] = Int32GetDatum((int32) role->element[2]->elements);
		else
			nulls[2] = true;
	}
	else
	{
		nulls[1] = true;
		nulls[2] = true;
	}
	if (us >= 0)
	{
		Interval   *iv = palloc0(sizeof(Interval));

		iv->time = us;
		vals[3] = IntervalPGetDatum(iv);
	}
	else
		nulls[3] = true;
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, vals, nulls);
}

/*
 * rlock_nodes(): the master locks live on now, pinged: its address, its
 * role and connected replicas (ROLE; NULL where an ACL refuses ROLE), and
 * the round trip.  One row for a standalone or Sentinel deployment, one
 * per master for a Cluster.
 */
PG_FUNCTION_INFO_V1(rlock_nodes);
Datum
rlock_nodes(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	RedisConn  *conn = route_backend();
	RedisCmd	cmds[2];
	RReply	  **replies;
	TimestampTz start;

	InitMaterializedSRF(fcinfo, 0);
	route_ready(conn, NULL);
	start = GetCurrentTimestamp();
	if (route_is_cluster())
	{
		/* every master at once; one that does not answer shows NULLs */
		RconnOp    *ops;
		int			n = ping_cluster_masters(&ops, true);
		int64		us = GetCurrentTimestamp() - start;

		for (int i = 0; i < n; i++)
			node_row(rsinfo, rconn_address(ops[i].conn),
					 ops[i].ok ? ops[i].replies[1] : NULL,
					 ops[i].ok ? us : -1);
		return (Datum) 0;
	}
	rcmd_init(&cmds[0]);
	rcmd_str(&cmds[0], "PING");
	rcmd_init(&cmds[1]);
	rcmd_str(&cmds[1], "ROLE");
	route_run(conn, cmds, 2, &replies, ERROR, NULL);
	if (replies[0]->type != RREPLY_STATUS)
		rconn_unexpected_reply(replies[0], NULL);
	node_row(rsinfo, rconn_address(conn), replies[1],
			 GetCurrentTimestamp() - start);
	return (Datum) 0;
}
