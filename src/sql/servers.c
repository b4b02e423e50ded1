/*-------------------------------------------------------------------------
 *
 * servers.c
 *	  rlock_server_name() and rlock_servers(): how this server is named, and
 *	  the servers announced on its Redis (SPEC.md section 3).
 *
 * Each server's worker keeps a hash {rlock:servers}:<instance uuid> and
 * its member in the sorted set {rlock:servers}, scored by when the hash
 * expires (src/worker/announce.c).  rlock_servers() reads the members not
 * yet expired, then their hashes, in two round trips; a hash that expired
 * in between is left out.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "redis/redis.h"
#include "route/route.h"
#include "holds/holds.h"
#include "base/base.h"
#include "sql/sql.h"

/* Fields read from each announcement, in rlock_servers' column order. */
#define NSERVER_FIELDS	4
static const char *const server_fields[NSERVER_FIELDS] = {
	"name", "started_ms", "previous_uuid", "host"
};

/* An instance UUID is 36 characters; anything longer is not one. */
#define UUID_MAX_LEN	64

PG_FUNCTION_INFO_V1(rlock_server_name);
Datum
rlock_server_name(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(cstring_to_text(rlock_server_label()));
}

static bool
is_text(const RReply *r)
{
	return r != NULL && r->type == RREPLY_STRING;
}

/*
 * rlock_servers(): uuid, name, started, previous_uuid, host of every
 * server announced on this server's Redis (this one included).
 */
PG_FUNCTION_INFO_V1(rlock_servers);
Datum
rlock_servers(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	RedisConn  *conn = route_backend();
	RedisCmd	cmd;
	RedisCmd   *cmds;
	RReply	   *r;
	RReply	  **replies = NULL;
	char	  **uuids;
	char	 ***vals;
	int			n;
	int64		now_ms = (GetCurrentTimestamp() - SetEpochTimestamp()) / 1000;

	InitMaterializedSRF(fcinfo, 0);

	rcmd_init(&cmd);
	rcmd_str(&cmd, "ZRANGEBYSCORE");
	rcmd_str(&cmd, RLOCK_SERVERS_KEY);
	rcmd_int(&cmd, now_ms);
	rcmd_str(&cmd, "+inf");
	r = route_run1(conn, &cmd, NULL);
	if (r->type != RREPLY_ARRAY)
		rconn_unexpected_reply(r, NULL);
	n = (int) r->elements;
	uuids = palloc(Max(n, 1) * sizeof(char *));
	for (int i = 0; i < n; i++)
	{
		if (!is_text(r->element[i]) || r->element[i]->len > UUID_MAX_LEN)
			rconn_unexpected_reply(r, NULL);
		uuids[i] = pstrdup(r->element[i]->str);
	}
	if (n == 0)
		return (Datum) 0;

	cmds = palloc(n * sizeof(RedisCmd));
	for (int i = 0; i < n; i++)
	{
		rcmd_init(&cmds[i]);
		rcmd_str(&cmds[i], "HMGET");
		rcmd_str(&cmds[i], psprintf("%s:%s", RLOCK_SERVERS_KEY, uuids[i]));
		for (int f = 0; f < NSERVER_FIELDS; f++)
			rcmd_str(&cmds[i], server_fields[f]);
	}
	(void) route_run(conn, cmds, n, &replies, ERROR, NULL);

	/* copy the replies out before building tuples (which may ERROR) */
	vals = palloc0(n * sizeof(char **));
	for (int i = 0; i < n; i++)
	{
		RReply	   *h = replies[i];

		if (h == NULL || h->type != RREPLY_ARRAY ||
			h->elements != NSERVER_FIELDS)
			rconn_unexpected_reply(h, NULL);
		if (!is_text(h->element[0]))
			continue;			/* expired since */
		vals[i] = palloc0(NSERVER_FIELDS * sizeof(char *));
		for (int f = 0; f < NSERVER_FIELDS; f++)
			if (is_text(h->element[f]))
				vals[i][f] = pstrdup(h->element[f]->str);
	}

	for (int i = 0; i < n; i++)
	{
		Datum		v[5];
		bool		nulls[5] = {false};
		char	   *end;
		int64		started;

		if (vals[i] == NULL)
			continue;
		v[0] = CStringGetTextDatum(uuids[i]);
		v[1] = CStringGetTextDatum(vals[i][0]);
		started = vals[i][1] ? strtoll(vals[i][1], &end, 10) : 0;
		if (vals[i][1] == NULL || *end != '\0' || started <= 0 ||
			started > INT64CONST(253402300799000))
			nulls[2] = true;
		else
			v[2] = TimestampTzGetDatum(SetEpochTimestamp() + started * 1000);
		if (vals[i][2] == NULL || vals[i][2][0] == '\0')
			nulls[3] = true;
		else
			v[3] = CStringGetTextDatum(vals[i][2]);
		if (vals[i][3] == NULL)
			nulls[4] = true;
		else
			v[4] = CStringGetTextDatum(vals[i][3]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
	}
	return (Datum) 0;
}
