/*-------------------------------------------------------------------------
 *
 * sql_api_assert.c
 *	  rlock_assert_held(name): the check a batch job makes before it
 *	  commits (SPEC 6, "a loss the caller can act on").
 *
 * A scheduler such as pg_cron keeps no WARNING, so a job whose lock was
 * lost mid-run must fail to be seen: this ERRORs (SQLSTATE 40000, naming
 * the lock) unless the session still holds the name, as every kind it
 * holds it as, and Redis agrees (holds_assert.c).  It only reads the
 * caller's own holds, so PUBLIC may execute it.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"

#include "holds/holds.h"
#include "base/base.h"
#include "sql/sql.h"

PG_FUNCTION_INFO_V1(rlock_assert_held);
Datum
rlock_assert_held(PG_FUNCTION_ARGS)
{
	LockName	ln;

	sql_name_arg(fcinfo, 0, &ln);
	holds_assert_held(&ln);
	PG_RETURN_VOID();
}
