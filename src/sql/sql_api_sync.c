/*-------------------------------------------------------------------------
 *
 * sql_api_sync.c
 *	  SQL entry points of the objects that coordinate batch jobs without
 *	  being locks (SPEC.md section 5.5): the count-down latch and the
 *	  semaphore.  Argument checks, then one call into locks/.
 *
 * As for the locks (sql_api.c), everything a user can get wrong is refused
 * here, before any round trip, with an ERROR that names the object: a NULL
 * argument (the functions are not STRICT), a name lockname.c refuses, a
 * negative count, permits that are not positive (or more than one call
 * may take), a lease below 1 ms, a wait that is negative or longer than a
 * year.
 *
 * Counting down a latch and taking permits change an object only of their
 * kind (SPEC.md 5.5): a count or permits key rlock did not set (no marker:
 * an application's counter, or a Redisson client's object) is refused,
 * unless the role may adopt it -- a superuser, or a role with EXECUTE on
 * rlock_latch_adopt (latches) or rlock_semaphore_add_permits (semaphores),
 * neither granted to PUBLIC -- and then marked as rlock's.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "nodes/value.h"
#include "parser/parse_func.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "holds/holds.h"
#include "locks/locks.h"
#include "base/base.h"
#include "sql/sql.h"

/*
 * Whether the calling role may run this extension's function proname(text)
 * or proname(text, integer) (nargs 1 or 2), looked up in the schema of the
 * function called: superuser, or EXECUTE on it, directly or through a role
 * (has_function_privilege's rule).
 */
static bool
may_execute(FunctionCallInfo fcinfo, const char *proname, int nargs)
{
	Oid			argtypes[2] = {TEXTOID, INT4OID};
	Oid			nsp;
	char	   *nspname;
	Oid			fn;

	if (superuser())
		return true;
	if (fcinfo->flinfo == NULL || !OidIsValid(fcinfo->flinfo->fn_oid))
		return false;
	nsp = get_func_namespace(fcinfo->flinfo->fn_oid);
	nspname = get_namespace_name(nsp);
	if (nspname == NULL)
		return false;
	fn = LookupFuncName(list_make2(makeString(nspname),
								   makeString(pstrdup(proname))),
						nargs, argtypes, true);
	if (!OidIsValid(fn))
		return false;
	return DatumGetBool(DirectFunctionCall2(has_function_privilege_id,
											ObjectIdGetDatum(fn),
											CStringGetTextDatum("EXECUTE")));
}

static void
latch_name_arg(FunctionCallInfo fcinfo, int argno, LockName *ln)
{
	lockname_init_as(ln, PG_ARGISNULL(argno) ? NULL :
					 PG_GETARG_TEXT_PP(argno), "latch");
}

/*
 * trySetCount: (name, count[, expire]).  rlock_latch_set_count is 0.3's
 * C symbol (two arguments), rlock_latch_set_count_0_4 0.4's, with the
 * expiry after which an unfinished latch disappears (NULL: never).
 */
static bool
latch_set_count_sql(FunctionCallInfo fcinfo, bool with_expire)
{
	LockName	ln;
	int64		count;
	int64		expire = 0;

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
	if (with_expire && !PG_ARGISNULL(2))
		expire = sql_interval_ms(PG_GETARG_INTERVAL_P(2), "expire", "latch",
								 &ln, false);
	return latch_set_count(&ln, count, expire);
}

PG_FUNCTION_INFO_V1(rlock_latch_set_count);
Datum
rlock_latch_set_count(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(latch_set_count_sql(fcinfo, false));
}

PG_FUNCTION_INFO_V1(rlock_latch_set_count_0_4);
Datum
rlock_latch_set_count_0_4(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(latch_set_count_sql(fcinfo, PG_NARGS() > 2));
}

PG_FUNCTION_INFO_V1(rlock_latch_count_down);
Datum
rlock_latch_count_down(PG_FUNCTION_ARGS)
{
	LockName	ln;

	latch_name_arg(fcinfo, 0, &ln);
	PG_RETURN_INT64(latch_count_down(&ln,
									 may_execute(fcinfo, "rlock_latch_adopt", 1)));
}

/*
 * Mark a latch's count (a Redisson client's, say) as rlock's, so that
 * roles without this function's grant may count it down; false when the
 * latch is absent.
 */
PG_FUNCTION_INFO_V1(rlock_latch_adopt);
Datum
rlock_latch_adopt(PG_FUNCTION_ARGS)
{
	LockName	ln;

	latch_name_arg(fcinfo, 0, &ln);
	PG_RETURN_BOOL(latch_adopt(&ln));
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
 * is the limit, as for rlock_try_acquire ('0': only look).  0.4's symbol
 * takes must_exist too: an absent latch is then an ERROR (SPEC.md 5.5,
 * "Absent is not done"); 0.3's, rlock_latch_await, has two arguments.
 */
static bool
latch_await_sql(FunctionCallInfo fcinfo, bool with_must_exist)
{
	LockName	ln;
	int64		wait = -1;
	bool		must_exist = false;

	latch_name_arg(fcinfo, 0, &ln);
	if (!PG_ARGISNULL(1))
		wait = sql_interval_ms(PG_GETARG_INTERVAL_P(1), "wait", "latch", &ln,
							   true);
	if (with_must_exist)
	{
		if (PG_ARGISNULL(2))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("must_exist of latch \"%s\" must not be NULL",
							ln.name)));
		must_exist = PG_GETARG_BOOL(2);
	}
	return latch_await(&ln, wait, PG_ARGISNULL(1), must_exist);
}

PG_FUNCTION_INFO_V1(rlock_latch_await);
Datum
rlock_latch_await(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(latch_await_sql(fcinfo, false));
}

PG_FUNCTION_INFO_V1(rlock_latch_await_0_4);
Datum
rlock_latch_await_0_4(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(latch_await_sql(fcinfo, PG_NARGS() > 2));
}

/*
 * Delete a latch rlock set (not granted to PUBLIC): its waiters wake.  An
 * unmarked count (an application's counter, perhaps) is refused.
 */
PG_FUNCTION_INFO_V1(rlock_latch_delete);
Datum
rlock_latch_delete(PG_FUNCTION_ARGS)
{
	LockName	ln;

	latch_name_arg(fcinfo, 0, &ln);
	PG_RETURN_BOOL(latch_delete(&ln));
}

/* The most permits one call takes or gives back (each is one permit id). */
#define RLOCK_MAX_PERMITS_PER_CALL	10000

static void
sem_name_arg(FunctionCallInfo fcinfo, int argno, LockName *ln)
{
	lockname_init_as(ln, PG_ARGISNULL(argno) ? NULL :
					 PG_GETARG_TEXT_PP(argno), "semaphore");
}

/* A permits argument: not NULL; positive and bounded when taken one by one. */
static int
permits_arg(FunctionCallInfo fcinfo, int argno, const LockName *ln,
			bool held)
{
	int32		permits;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("permits of semaphore \"%s\" must not be NULL",
						ln->name)));
	permits = PG_GETARG_INT32(argno);
	if (held && permits <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("permits of semaphore \"%s\" must be positive",
						ln->name),
				 errdetail("The number given was %d.", permits)));
	if (held && permits > RLOCK_MAX_PERMITS_PER_CALL)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many permits of semaphore \"%s\" in one call",
						ln->name),
				 errdetail("One call takes or gives back at most %d permits; %d were asked for.",
						   RLOCK_MAX_PERMITS_PER_CALL, permits)));
	return permits;
}

/* The lease of the permits: 0 for NULL, renewed by the watchdog. */
static int64
sem_lease_arg(FunctionCallInfo fcinfo, int argno, const LockName *ln)
{
	if (PG_ARGISNULL(argno))
	{
		if (!registry_available())
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("permits of semaphore \"%s\" need a lease: automatic renewal is not available",
							ln->name),
					 errdetail("A NULL lease asks for renewal by rlock's background worker, which runs only when rlock is preloaded."),
					 errhint("Add rlock to shared_preload_libraries, or give a lease.")));
		return 0;
	}
	return sql_interval_ms(PG_GETARG_INTERVAL_P(argno), "lease", "semaphore",
						   ln, false);
}

PG_FUNCTION_INFO_V1(rlock_semaphore_set_permits);
Datum
rlock_semaphore_set_permits(PG_FUNCTION_ARGS)
{
	LockName	ln;
	int			permits;

	sem_name_arg(fcinfo, 0, &ln);
	permits = permits_arg(fcinfo, 1, &ln, false);
	if (permits <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("permits of semaphore \"%s\" must be positive",
						ln.name),
				 errdetail("The number given was %d.", permits)));
	PG_RETURN_BOOL(semaphore_set_permits(&ln, permits));
}

PG_FUNCTION_INFO_V1(rlock_semaphore_add_permits);
Datum
rlock_semaphore_add_permits(PG_FUNCTION_ARGS)
{
	LockName	ln;
	int			permits;

	sem_name_arg(fcinfo, 0, &ln);
	permits = permits_arg(fcinfo, 1, &ln, false);
	(void) semaphore_add_permits(&ln, permits);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(rlock_semaphore_available);
Datum
rlock_semaphore_available(PG_FUNCTION_ARGS)
{
	LockName	ln;
	int64		avail;

	sem_name_arg(fcinfo, 0, &ln);
	avail = semaphore_available(&ln);
	if (avail > PG_INT32_MAX || avail < PG_INT32_MIN)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("permits available of semaphore \"%s\" are out of range for integer",
						ln.name),
				 errdetail("Redis holds %lld.", (long long) avail)));
	PG_RETURN_INT32((int32) avail);
}

/* The acquire functions: (name, permits, lease[, wait]). */
static bool
sem_acquire_sql(FunctionCallInfo fcinfo, RlockScope scope, bool try)
{
	LockName	ln;
	int			permits;
	int64		lease;
	int64		wait = -1;

	sem_name_arg(fcinfo, 0, &ln);
	permits = permits_arg(fcinfo, 1, &ln, true);
	lease = sem_lease_arg(fcinfo, 2, &ln);
	if (try)
	{
		if (PG_ARGISNULL(3))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("wait of semaphore \"%s\" must not be NULL",
							ln.name),
					 errhint("Give '0' for a single attempt, or use rlock_semaphore_acquire to wait without limit.")));
		wait = sql_interval_ms(PG_GETARG_INTERVAL_P(3), "wait", "semaphore",
							   &ln, true);
	}
	return semaphore_acquire(&ln, scope, permits, lease, wait, !try,
							 may_execute(fcinfo, "rlock_semaphore_add_permits", 2));
}

PG_FUNCTION_INFO_V1(rlock_semaphore_acquire);
Datum
rlock_semaphore_acquire(PG_FUNCTION_ARGS)
{
	sem_acquire_sql(fcinfo, RLOCK_SCOPE_SESSION, false);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(rlock_semaphore_try_acquire);
Datum
rlock_semaphore_try_acquire(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(sem_acquire_sql(fcinfo, RLOCK_SCOPE_SESSION, true));
}

PG_FUNCTION_INFO_V1(rlock_semaphore_xact_acquire);
Datum
rlock_semaphore_xact_acquire(PG_FUNCTION_ARGS)
{
	sem_acquire_sql(fcinfo, RLOCK_SCOPE_XACT, false);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(rlock_semaphore_xact_try_acquire);
Datum
rlock_semaphore_xact_try_acquire(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(sem_acquire_sql(fcinfo, RLOCK_SCOPE_XACT, true));
}

/* Give back permits this session holds at session level. */
PG_FUNCTION_INFO_V1(rlock_semaphore_release);
Datum
rlock_semaphore_release(PG_FUNCTION_ARGS)
{
	LockName	ln;
	int			permits;

	sem_name_arg(fcinfo, 0, &ln);
	permits = permits_arg(fcinfo, 1, &ln, true);
	PG_RETURN_BOOL(semaphore_release(&ln, permits));
}

/*
 * Delete a semaphore rlock set (not granted to PUBLIC), with its permits
 * out: their holders report them lost; its waiters wake.
 */
PG_FUNCTION_INFO_V1(rlock_semaphore_delete);
Datum
rlock_semaphore_delete(PG_FUNCTION_ARGS)
{
	LockName	ln;

	sem_name_arg(fcinfo, 0, &ln);
	PG_RETURN_BOOL(semaphore_delete(&ln));
}
