/*-------------------------------------------------------------------------
 *
 * events.c
 *	  rlock_events(): the ring of this server's recent events (base/
 *	  events.c), oldest first, as rows of the rlock_events view.
 *
 * The ring is copied first (the writers' spinlock is held one entry at a
 * time), then turned into rows: database names looked up, and a holder that is an owner token's digest
 * masked as rlock_waits masks it (waits.c): superusers and members of
 * pg_read_all_stats see that a token is there, other roles not even that.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "commands/dbcommands.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "holds/holds.h"
#include "base/base.h"
#include "sql/sql.h"

#define EVENTS_COLUMNS	9

PG_FUNCTION_INFO_V1(rlock_events);
Datum
rlock_events(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	RlockEventEntry *entries;
	bool		privileged;
	int			n;

	registry_require("rlock_events");
	if (!rlock_events_available())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("rlock_events requires rlock to be preloaded")));
	InitMaterializedSRF(fcinfo, 0);
	privileged = sql_sees_owner_tokens();
	entries = palloc(mul_size(rlock_events_max, sizeof(RlockEventEntry)));
	n = rlock_events_read(entries);

	for (int i = 0; i < n; i++)
	{
		RlockEventEntry *e = &entries[i];
		Datum		vals[EVENTS_COLUMNS];
		bool		nulls[EVENTS_COLUMNS] = {0};
		char	   *dbname = OidIsValid(e->dboid) ?
			get_database_name(e->dboid) : NULL;

		vals[0] = Int64GetDatum((int64) e->seq);
		vals[1] = TimestampTzGetDatum(e->at);
		vals[2] = Int32GetDatum(e->pid);
		if (dbname)
			vals[3] = DirectFunctionCall1(namein, CStringGetDatum(dbname));
		else
			nulls[3] = true;
		vals[4] = CStringGetTextDatum(rlock_event_name(e->event));
		if (e->lock[0] != '\0')
			vals[5] = CStringGetTextDatum(e->lock);
		else
			nulls[5] = true;
		if (e->kind[0] != '\0')
			vals[6] = CStringGetTextDatum(e->kind);
		else
			nulls[6] = true;
		if (e->holder[0] != '\0')
			vals[7] = CStringGetTextDatum(sql_holder_shown(e->holder,
														   privileged));
		else
			nulls[7] = true;
		vals[8] = CStringGetTextDatum(e->detail);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, vals, nulls);
	}
	pfree(entries);
	return (Datum) 0;
}
