/*-------------------------------------------------------------------------
 *
 * waits.c
 *	  rlock_waits and rlock_blocking_pids (SPEC.md section 5.6): who waits
 *	  for an rlock lock on every server sharing the Redis, and who blocks
 *	  one of this server's sessions.
 *
 * rlock_waits reads every wait in one round trip (locks/wait_read.c), then
 * the blockers of each lock waited for, one round trip per lock.  A
 * blocking holder that is not a holder identity is an owner token's
 * digest: it is masked as rlock_status masks it (introspect.c), so that a
 * plain role sees who waits and for what, never an owner token.
 * rlock_blocking_pids answers as pg_blocking_pids does, for this server's
 * sessions, through rlock locks (the holders of what the session waits
 * for that are this server's sessions) and through PostgreSQL's locks.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "redis/redis.h"
#include "route/route.h"
#include "holds/holds.h"
#include "locks/locks.h"
#include "base/base.h"
#include "sql/sql.h"

#if PG_VERSION_NUM < 140000
#define ROLE_PG_READ_ALL_STATS	DEFAULT_ROLE_READ_ALL_STATS
#endif

/* May the current role see that a hold is an owner token's? */
bool
sql_sees_owner_tokens(void)
{
	return superuser() || has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS);
}

/* A holder as the current role may see it (see the top). */
const char *
sql_holder_shown(const char *holder, bool privileged)
{
	if (lockname_is_holder_identity(holder))
		return holder;
	return privileged ? OWNER_TOKEN_SHOWN : NO_PRIVILEGE_SHOWN;
}

/* The blockers of w, each lock's read once per call (cache: per key). */
static int
blockers(const WaitRecord *w, List **cache, const char ***holders)
{
	LockBlockers *bl[WAIT_MAX_KEYS];
	const char **via;

	for (int k = 0; k < w->nkeys; k++)
		bl[k] = lock_blockers_cached(cache, w->kind, w->keys[k], w->names[k]);
	return wait_blocking_holders(w, bl, holders, &via);
}

static Datum
text_array(Datum *elems, bool *nulls, int n)
{
	int			dims[1] = {n};
	int			lbs[1] = {1};

	return PointerGetDatum(construct_md_array(elems, nulls, 1, dims, lbs,
											  TEXTOID, -1, false, TYPALIGN_INT));
}

/*
 * rlock_waits(): server, pid, database, name, kind, waiting_since, holder,
 * blocking_servers, blocking_pids, blocking_holders.
 */
PG_FUNCTION_INFO_V1(rlock_waits);
Datum
rlock_waits(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	WaitSnapshot snap;
	List	   *cache = NIL;
	bool		privileged = sql_sees_owner_tokens();

	InitMaterializedSRF(fcinfo, 0);
	wait_snapshot_read(&snap, PG_INT32_MAX);
	for (int i = 0; i < snap.n; i++)
	{
		const WaitRecord *w = &snap.recs[i];
		const char **holders;
		int			n = blockers(w, &cache, &holders);
		Datum		vals[10];
		bool		nulls[10] = {0};
		Datum	   *servers = palloc((n + 1) * sizeof(Datum));
		bool	   *snulls = palloc((n + 1) * sizeof(bool));
		Datum	   *pids = palloc((n + 1) * sizeof(Datum));
		bool	   *pnulls = palloc((n + 1) * sizeof(bool));
		Datum	   *hs = palloc((n + 1) * sizeof(Datum));
		int			dims[1] = {n};
		int			lbs[1] = {1};

		for (int j = 0; j < n; j++)
		{
			int			pid = wait_holder_pid(holders[j]);
			const char *server = wait_server_name(&snap, holders[j]);

			snulls[j] = (server[0] == '\0');
			servers[j] = snulls[j] ? (Datum) 0 : CStringGetTextDatum(server);
			pnulls[j] = (pid == 0);
			pids[j] = Int32GetDatum(pid);
			hs[j] = CStringGetTextDatum(sql_holder_shown(holders[j],
														 privileged));
		}
		vals[0] = CStringGetTextDatum(wait_server_name(&snap, w->holder));
		vals[1] = Int32GetDatum(w->pid);
		vals[2] = CStringGetTextDatum(w->database);
		vals[3] = CStringGetTextDatum(w->names[0]);
		vals[4] = CStringGetTextDatum(w->kind);
		vals[5] = TimestampTzGetDatum(wait_local_time(&snap, w->since_ms));
		vals[6] = CStringGetTextDatum(w->holder);
		vals[7] = text_array(servers, snulls, n);
		vals[8] = PointerGetDatum(construct_md_array(pids, pnulls, 1, dims,
													 lbs, INT4OID,
													 sizeof(int32), true,
													 TYPALIGN_INT));
		vals[9] = text_array(hs, NULL, n);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, vals, nulls);
	}
	return (Datum) 0;
}

/*
 * rlock_blocking_pids(pid): this server's sessions that block pid, through
 * rlock locks or PostgreSQL's, as pg_blocking_pids (an empty array when
 * none; a pid that is no session of this server has none).
 */
PG_FUNCTION_INFO_V1(rlock_blocking_pids);
Datum
rlock_blocking_pids(PG_FUNCTION_ARGS)
{
	int			pid = PG_GETARG_INT32(0);
	WaitRecord	w;
	int		   *pg;
	char	   *what;
	int			npg = pg_lock_blockers(pid, &pg, &what);
	Datum	   *out;
	int			n = 0;
	int			nrl = 0;
	const char **holders = NULL;
	List	   *cache = NIL;

	if (wait_local_record(pid, &w))
		nrl = blockers(&w, &cache, &holders);
	out = palloc((npg + nrl + 1) * sizeof(Datum));
	for (int i = 0; i < npg + nrl; i++)
	{
		int			p;
		bool		dup = false;

		if (i < npg)
			p = pg[i];
		else if (strncmp(holders[i - npg], wait_my_uuid(), 36) == 0)
			p = wait_holder_pid(holders[i - npg]);
		else
			continue;			/* another server's, or no session's */
		if (p <= 0 || p == pid)
			continue;
		for (int j = 0; j < n && !dup; j++)
			dup = (DatumGetInt32(out[j]) == p);
		if (!dup)
			out[n++] = Int32GetDatum(p);
	}
	PG_RETURN_ARRAYTYPE_P(construct_array(out, n, INT4OID, sizeof(int32),
										  true, TYPALIGN_INT));
}
