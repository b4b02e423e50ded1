/*-------------------------------------------------------------------------
 *
 * sql_api_sync.c
 *	  SQL entry points of the objects that coordinate batch jobs without
 *	  being locks (SPEC.md section 5.5): the count-down latch.  Argument
 *	  checks, then one call into locks/.
 *
 * As for the locks (sql_api.c), everything a user can get wrong is refused
 * here, before any round trip, with an ERROR that names the object: a NULL
 * argument (the functions are not STRICT), a name lockname.c refuses, a
 * negative count, a wait that is negative or longer than a year.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/timestamp.h"

#include "holds/holds.h"
#include "locks/locks.h"
#include "base/base.h"
#include "sql/sql.h"

static void
latch_name_arg(FunctionCallInfo fcinfo, int argno, LockName *ln)
{
	lockname_init_as(ln, PG_ARGISNULL(argno) ? NULL :
					 PG_GETARG_TEXT_PP(argno), "latch");
}

PG_FUNCTION_INFO_V1(rlock_latch_set_count);
Datum
rlock_latch_set_count(PG_FUNCTION_ARGS)
{
	LockName	ln;
	int64		count;

	latch_name_arg(fcinfo, 0, &ln);
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("count of latch \"%s\" must not be NULL", ln.name)));
	count = PG_GETARG_INT64(1);
	if (count < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("count of latch \"%s\" must be zero or positive",
						ln.name),
				 errdetail("The count given was " INT64_FORMAT ".", count)));
	PG_RETURN_BOOL(latch_set_count(&ln, count));
}

PG_FUNCTION_INFO_V1(rlock_latch_count_down);
Datum
rlock_latch_count_down(PG_FUNCTION_ARGS)
{
	LockName	ln;

	latch_name_arg(fcinfo, 0, &ln);
	PG_RETURN_INT64(latch_count_down(&ln));
}

PG_FUNCTION_INFO_V1(rlock_latch_count);
Datum
rlock_latch_count(PG_FUNCTION_ARGS)
{
	LockName	ln;

	latch_name_arg(fcinfo, 0, &ln);
	PG_RETURN_INT64(latch_count(&ln));
}

/*
 * Wait until the latch is at zero: true then (at once when it already is,
 * or absent), false when the wait ran out.  A NULL wait waits without
 * limit and honours lock_timeout, as rlock_acquire does; an explicit wait
 * is the limit, as for rlock_try_acquire ('0': only look).
 */
PG_FUNCTION_INFO_V1(rlock_latch_await);
Datum
rlock_latch_await(PG_FUNCTION_ARGS)
{
	LockName	ln;
	int64		wait = -1;

	latch_name_arg(fcinfo, 0, &ln);
	if (!PG_ARGISNULL(1))
		wait = sql_interval_ms(PG_GETARG_INTERVAL_P(1), "wait", "latch", &ln,
							   true);
	PG_RETURN_BOOL(latch_await(&ln, wait, PG_ARGISNULL(1)));
}
