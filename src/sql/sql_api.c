/*-------------------------------------------------------------------------
 *
 * sql_api.c
 *	  SQL entry points of the locks (SPEC.md sections 5.1 and 5.2): argument
 *	  checks, then one call into the lock kind.
 *
 * Everything a user can get wrong is rejected here, before any Redis round
 * trip: NULL, empty or over-long names (lockname.c), leases and waits that
 * are not positive or exceed a year, unusable owner tokens.  The functions
 * are declared non-STRICT so that a NULL argument gets a clear ERROR rather
 * than a silent NULL result.  An owner token goes no further than here: the
 * lock kinds get the holder field it stands for (lockname_owner_field).
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "holds/holds.h"
#include "locks/locks.h"
#include "base/base.h"
#include "sql/sql.h"

/*
 * Convert an interval argument to milliseconds (rounded up), checking that
 * it is positive (or zero, if allowed) and at most a year.
 */
static int64
interval_ms(Interval *iv, const char *argname, const LockName *ln,
			bool allow_zero)
{
	return sql_interval_ms(iv, argname, "lock", ln, allow_zero);
}

/* interval_ms for an object of any kind: noun names it ("latch"). */
int64
sql_interval_ms(Interval *iv, const char *argname, const char *noun,
				const LockName *ln, bool allow_zero)
{
	double		us;

	us = ((double) iv->month * DAYS_PER_MONTH + iv->day) * USECS_PER_DAY +
		(double) iv->time;
	if (us < 0 || (us == 0 && !allow_zero))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s of %s \"%s\" must be %s", argname, noun, ln->name,
						allow_zero ? "zero or positive" : "positive"),
				 strcmp(argname, "lease") == 0 ?
				 errhint("Give NULL for a lease renewed automatically while the %s is held.",
						 strcmp(noun, "lock") == 0 ? "lock" : "permit") : 0));
	if (us > 0 && us < 1000.0 && !allow_zero)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s of %s \"%s\" is shorter than 1 millisecond",
						argname, noun, ln->name),
				 errdetail("Redis counts leases in whole milliseconds.")));
	if (us > (double) RLOCK_MAX_INTERVAL_MS * 1000.0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s of %s \"%s\" is too long", argname, noun,
						ln->name),
				 errdetail("The limit is 365 days.")));
	return (int64) ceil(us / 1000.0);
}

/* The lease argument: 0 means automatic renewal (watchdog). */
int64
sql_lease_arg(FunctionCallInfo fcinfo, int argno, const LockName *ln)
{
	if (PG_ARGISNULL(argno))
	{
		if (!registry_available())
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("lock \"%s\" needs a lease: automatic renewal is not available",
							ln->name),
					 errdetail("A NULL lease asks for renewal by rlock's background worker, which runs only when rlock is preloaded."),
					 errhint("Add rlock to shared_preload_libraries, or give a lease.")));
		return 0;
	}
	return interval_ms(PG_GETARG_INTERVAL_P(argno), "lease", ln, false);
}

/* The wait argument of the try functions: 0 = one attempt. */
int64
sql_wait_arg(FunctionCallInfo fcinfo, int argno, const LockName *ln)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("wait of lock \"%s\" must not be NULL", ln->name),
				 errhint("Give '0' for a single attempt, or use rlock_acquire to wait without limit.")));
	return interval_ms(PG_GETARG_INTERVAL_P(argno), "wait", ln, true);
}

/*
 * May s not be an owner token?  Tokens shaped like a holder identity,
 * "<uuid>:..." (a session of some PostgreSQL server, a Redisson client
 * thread, or the write field "<holder>:write" of a read/write lock), "mode"
 * (a read/write lock's own field) and tokens ending in ":write" name holders
 * of the lock protocol itself.  (A token is stored only as a digest,
 * lockname_owner_field, so it could not reach those fields anyway; the
 * refusal keeps such tokens from meaning something else to a reader.)
 */
static bool
reserved_owner(const char *s)
{
	size_t		len = strlen(s);

	if (strcmp(s, "mode") == 0)
		return true;
	if (len >= 6 && strcmp(s + len - 6, ":write") == 0)
		return true;
	return lockname_has_holder_prefix(s);
}

/*
 * The owner argument: NULL = this session; else the holder field of a
 * checked token (lockname_owner_field: a digest, never the token).  An
 * owner token is a bearer secret (SPEC.md section 8): no message names it,
 * since messages reach the server log and whoever reads it.
 */
static const char *
owner_arg(FunctionCallInfo fcinfo, int argno, const LockName *ln)
{
	char	   *owner;
	size_t		len;

	if (PG_ARGISNULL(argno))
		return NULL;
	owner = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	len = strlen(owner);
	if (len == 0 || len > RLOCK_MAX_OWNER_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("owner of lock \"%s\" must be 1 to %d bytes long",
						ln->name, RLOCK_MAX_OWNER_LEN)));
	if (reserved_owner(owner))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("owner token of lock \"%s\" is reserved", ln->name),
				 errdetail("\"mode\", tokens ending in \":write\" and tokens of the form <uuid>:... name holders of the lock protocol itself.")));
	return lockname_owner_field(owner);
}

static const char *
owner_for_acquire(FunctionCallInfo fcinfo, int argno, const LockName *ln,
				  bool lease_null)
{
	const char *owner = owner_arg(fcinfo, argno, ln);

	if (owner != NULL && lease_null)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lock \"%s\" taken for an owner token needs a lease",
						ln->name),
				 errdetail("A lock taken for an owner token is not tied to this session, so nothing would renew it or release it."),
				 errhint("Give a lease, such as '10 minutes'.")));
	return owner;
}

void
sql_name_arg(FunctionCallInfo fcinfo, int argno, LockName *ln)
{
	lockname_init(ln, PG_ARGISNULL(argno) ? NULL : PG_GETARG_TEXT_PP(argno));
}

PG_FUNCTION_INFO_V1(rlock_acquire);
Datum
rlock_acquire(PG_FUNCTION_ARGS)
{
	LockName	ln;
	int64		lease;
	const char *owner;

	sql_name_arg(fcinfo, 0, &ln);
	owner = owner_for_acquire(fcinfo, 2, &ln, PG_ARGISNULL(1));
	lease = sql_lease_arg(fcinfo, 1, &ln);
	exclusive_acquire(&ln, RLOCK_SCOPE_SESSION, lease, -1, owner, true, NULL);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(rlock_try_acquire);
Datum
rlock_try_acquire(PG_FUNCTION_ARGS)
{
	LockName	ln;
	int64		lease;
	int64		wait;
	const char *owner;

	sql_name_arg(fcinfo, 0, &ln);
	owner = owner_for_acquire(fcinfo, 3, &ln, PG_ARGISNULL(1));
	lease = sql_lease_arg(fcinfo, 1, &ln);
	wait = sql_wait_arg(fcinfo, 2, &ln);
	PG_RETURN_BOOL(exclusive_acquire(&ln, RLOCK_SCOPE_SESSION, lease, wait,
									 owner, false, NULL));
}

PG_FUNCTION_INFO_V1(rlock_release);
Datum
rlock_release(PG_FUNCTION_ARGS)
{
	LockName	ln;

	sql_name_arg(fcinfo, 0, &ln);
	PG_RETURN_BOOL(holds_release(&ln, RLOCK_KIND_EXCLUSIVE,
								 owner_arg(fcinfo, 1, &ln)));
}

PG_FUNCTION_INFO_V1(rlock_xact_acquire);
Datum
rlock_xact_acquire(PG_FUNCTION_ARGS)
{
	LockName	ln;
	int64		lease;

	sql_name_arg(fcinfo, 0, &ln);
	lease = sql_lease_arg(fcinfo, 1, &ln);
	exclusive_acquire(&ln, RLOCK_SCOPE_XACT, lease, -1, NULL, true, NULL);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(rlock_xact_try_acquire);
Datum
rlock_xact_try_acquire(PG_FUNCTION_ARGS)
{
	LockName	ln;
	int64		lease;
	int64		wait;

	sql_name_arg(fcinfo, 0, &ln);
	lease = sql_lease_arg(fcinfo, 1, &ln);
	wait = sql_wait_arg(fcinfo, 2, &ln);
	PG_RETURN_BOOL(exclusive_acquire(&ln, RLOCK_SCOPE_XACT, lease, wait,
									 NULL, false, NULL));
}

PG_FUNCTION_INFO_V1(rlock_release_all);
Datum
rlock_release_all(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(holds_release_all_session());
}

PG_FUNCTION_INFO_V1(rlock_force_release);
Datum
rlock_force_release(PG_FUNCTION_ARGS)
{
	LockName	ln;

	sql_name_arg(fcinfo, 0, &ln);
	PG_RETURN_BOOL(exclusive_force_release(&ln));
}

/* ----------------------------------------------------------------
 * Fenced lock (SPEC.md 5.2): the exclusive lock, returning a fencing token.
 * Released with rlock_release.
 * ----------------------------------------------------------------
 */

PG_FUNCTION_INFO_V1(rlock_fenced_acquire);
Datum
rlock_fenced_acquire(PG_FUNCTION_ARGS)
{
	LockName	ln;
	int64		lease;
	const char *owner;
	int64		token;

	sql_name_arg(fcinfo, 0, &ln);
	owner = owner_for_acquire(fcinfo, 2, &ln, PG_ARGISNULL(1));
	lease = sql_lease_arg(fcinfo, 1, &ln);
	exclusive_acquire(&ln, RLOCK_SCOPE_SESSION, lease, -1, owner, true,
					  &token);
	PG_RETURN_INT64(token);
}

PG_FUNCTION_INFO_V1(rlock_fenced_try_acquire);
Datum
rlock_fenced_try_acquire(PG_FUNCTION_ARGS)
{
	LockName	ln;
	int64		lease;
	int64		wait;
	const char *owner;
	int64		token;

	sql_name_arg(fcinfo, 0, &ln);
	owner = owner_for_acquire(fcinfo, 3, &ln, PG_ARGISNULL(1));
	lease = sql_lease_arg(fcinfo, 1, &ln);
	wait = sql_wait_arg(fcinfo, 2, &ln);
	if (!exclusive_acquire(&ln, RLOCK_SCOPE_SESSION, lease, wait, owner,
						   false, &token))
		PG_RETURN_NULL();		/* not acquired: no token */
	PG_RETURN_INT64(token);
}

PG_FUNCTION_INFO_V1(rlock_fenced_xact_acquire);
Datum
rlock_fenced_xact_acquire(PG_FUNCTION_ARGS)
{
	LockName	ln;
	int64		lease;
	int64		token;

	sql_name_arg(fcinfo, 0, &ln);
	lease = sql_lease_arg(fcinfo, 1, &ln);
	exclusive_acquire(&ln, RLOCK_SCOPE_XACT, lease, -1, NULL, true, &token);
	PG_RETURN_INT64(token);
}

PG_FUNCTION_INFO_V1(rlock_fenced_xact_try_acquire);
Datum
rlock_fenced_xact_try_acquire(PG_FUNCTION_ARGS)
{
	LockName	ln;
	int64		lease;
	int64		wait;
	int64		token;

	sql_name_arg(fcinfo, 0, &ln);
	lease = sql_lease_arg(fcinfo, 1, &ln);
	wait = sql_wait_arg(fcinfo, 2, &ln);
	if (!exclusive_acquire(&ln, RLOCK_SCOPE_XACT, lease, wait, NULL, false,
						   &token))
		PG_RETURN_NULL();		/* not acquired: no token */
	PG_RETURN_INT64(token);
}

/* ----------------------------------------------------------------
 * Read/write lock and fair lock (SPEC.md 5.2): rlock_read_*,
 * rlock_write_* and rlock_fair_*, with the arguments of the exclusive
 * functions.
 * ----------------------------------------------------------------
 */

/*
 * (name, lease[, wait][, owner]): the session functions take an owner, the
 * try functions a wait.
 */
static Datum
kind_acquire_sql(FunctionCallInfo fcinfo, RlockKind kind, RlockScope scope,
			   bool is_try)
{
	LockName	ln;
	int64		lease;
	int64		wait = -1;
	const char *owner = NULL;

	sql_name_arg(fcinfo, 0, &ln);
	if (scope == RLOCK_SCOPE_SESSION)
		owner = owner_for_acquire(fcinfo, is_try ? 3 : 2, &ln,
								  PG_ARGISNULL(1));
	lease = sql_lease_arg(fcinfo, 1, &ln);
	if (is_try)
		wait = sql_wait_arg(fcinfo, 2, &ln);
	if (kind == RLOCK_KIND_FAIR)
		return BoolGetDatum(fair_acquire(&ln, scope, lease, wait, owner,
										 !is_try));
	return BoolGetDatum(rw_acquire(&ln, kind, scope, lease, wait, owner,
								   !is_try));
}

static Datum
kind_release_sql(FunctionCallInfo fcinfo, RlockKind kind)
{
	LockName	ln;

	sql_name_arg(fcinfo, 0, &ln);
	return BoolGetDatum(holds_release(&ln, kind, owner_arg(fcinfo, 1, &ln)));
}

PG_FUNCTION_INFO_V1(rlock_read_acquire);
Datum
rlock_read_acquire(PG_FUNCTION_ARGS)
{
	kind_acquire_sql(fcinfo, RLOCK_KIND_READ, RLOCK_SCOPE_SESSION, false);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(rlock_read_try_acquire);
Datum
rlock_read_try_acquire(PG_FUNCTION_ARGS)
{
	return kind_acquire_sql(fcinfo, RLOCK_KIND_READ, RLOCK_SCOPE_SESSION, true);
}

PG_FUNCTION_INFO_V1(rlock_read_xact_acquire);
Datum
rlock_read_xact_acquire(PG_FUNCTION_ARGS)
{
	kind_acquire_sql(fcinfo, RLOCK_KIND_READ, RLOCK_SCOPE_XACT, false);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(rlock_read_xact_try_acquire);
Datum
rlock_read_xact_try_acquire(PG_FUNCTION_ARGS)
{
	return kind_acquire_sql(fcinfo, RLOCK_KIND_READ, RLOCK_SCOPE_XACT, true);
}

PG_FUNCTION_INFO_V1(rlock_read_release);
Datum
rlock_read_release(PG_FUNCTION_ARGS)
{
	return kind_release_sql(fcinfo, RLOCK_KIND_READ);
}

PG_FUNCTION_INFO_V1(rlock_write_acquire);
Datum
rlock_write_acquire(PG_FUNCTION_ARGS)
{
	kind_acquire_sql(fcinfo, RLOCK_KIND_WRITE, RLOCK_SCOPE_SESSION, false);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(rlock_write_try_acquire);
Datum
rlock_write_try_acquire(PG_FUNCTION_ARGS)
{
	return kind_acquire_sql(fcinfo, RLOCK_KIND_WRITE, RLOCK_SCOPE_SESSION, true);
}

PG_FUNCTION_INFO_V1(rlock_write_xact_acquire);
Datum
rlock_write_xact_acquire(PG_FUNCTION_ARGS)
{
	kind_acquire_sql(fcinfo, RLOCK_KIND_WRITE, RLOCK_SCOPE_XACT, false);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(rlock_write_xact_try_acquire);
Datum
rlock_write_xact_try_acquire(PG_FUNCTION_ARGS)
{
	return kind_acquire_sql(fcinfo, RLOCK_KIND_WRITE, RLOCK_SCOPE_XACT, true);
}

PG_FUNCTION_INFO_V1(rlock_write_release);
Datum
rlock_write_release(PG_FUNCTION_ARGS)
{
	return kind_release_sql(fcinfo, RLOCK_KIND_WRITE);
}

PG_FUNCTION_INFO_V1(rlock_fair_acquire);
Datum
rlock_fair_acquire(PG_FUNCTION_ARGS)
{
	kind_acquire_sql(fcinfo, RLOCK_KIND_FAIR, RLOCK_SCOPE_SESSION, false);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(rlock_fair_try_acquire);
Datum
rlock_fair_try_acquire(PG_FUNCTION_ARGS)
{
	return kind_acquire_sql(fcinfo, RLOCK_KIND_FAIR, RLOCK_SCOPE_SESSION, true);
}

PG_FUNCTION_INFO_V1(rlock_fair_xact_acquire);
Datum
rlock_fair_xact_acquire(PG_FUNCTION_ARGS)
{
	kind_acquire_sql(fcinfo, RLOCK_KIND_FAIR, RLOCK_SCOPE_XACT, false);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(rlock_fair_xact_try_acquire);
Datum
rlock_fair_xact_try_acquire(PG_FUNCTION_ARGS)
{
	return kind_acquire_sql(fcinfo, RLOCK_KIND_FAIR, RLOCK_SCOPE_XACT, true);
}

PG_FUNCTION_INFO_V1(rlock_fair_release);
Datum
rlock_fair_release(PG_FUNCTION_ARGS)
{
	return kind_release_sql(fcinfo, RLOCK_KIND_FAIR);
}
