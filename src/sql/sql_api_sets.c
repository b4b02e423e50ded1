/*-------------------------------------------------------------------------
 *
 * sql_api_sets.c
 *	  SQL entry points of several locks and several Redis nodes (SPEC.md
 *	  section 5.3): the multi-lock and the Redlock.  Argument checks, then
 *	  one call into the lock kind.
 *
 * A multi-lock's names come as a text[]: a NULL array or element, an empty
 * array or more than RLOCK_MAX_MULTI_NAMES names are refused, each name is
 * checked as a single lock's is, and duplicates are dropped (the first
 * occurrence keeps its place).
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"

#include "holds/holds.h"
#include "locks/locks.h"
#include "base/base.h"
#include "sql/sql.h"

/* Longest text of a set of names quoted in messages. */
#define SET_LABEL_LEN	200

static int
compare_keys(const void *a, const void *b)
{
	const LockName *x = *(LockName *const *) a;
	const LockName *y = *(LockName *const *) b;
	int			c = strcmp(x->key, y->key);

	if (c != 0)
		return c;
	return x < y ? -1 : (x > y ? 1 : 0);
}

/*
 * The names of argument argno: *lns gets them without duplicates, in their
 * order; *label how messages about the whole set name it.  Returns how
 * many.
 */
static int
names_arg(FunctionCallInfo fcinfo, int argno, LockName **lns, LockName *label)
{
	ArrayType  *arr;
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	LockName  **sorted;
	bool	   *dup;
	int			ndistinct = 0;
	char	   *shown;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("names of a multi-lock must not be NULL")));
	arr = PG_GETARG_ARRAYTYPE_P(argno);
	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("names of a multi-lock must be a one-dimensional array, not %d-dimensional",
						ARR_NDIM(arr))));
	n = ArrayGetNItems(ARR_NDIM(arr), ARR_DIMS(arr));
	if (n > RLOCK_MAX_MULTI_NAMES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a multi-lock takes at most %d names, not %d",
						RLOCK_MAX_MULTI_NAMES, n)));
	shown = OidOutputFunctionCall(F_ARRAY_OUT, PointerGetDatum(arr));
	if (strlen(shown) > SET_LABEL_LEN)
		shown = psprintf("%.*s...", SET_LABEL_LEN, shown);
	memset(label, 0, sizeof(*label));
	label->name = shown;

	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT,
					  &elems, &nulls, &n);
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a multi-lock needs at least one name")));
	if (n > RLOCK_MAX_MULTI_NAMES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a multi-lock takes at most %d names, not %d",
						RLOCK_MAX_MULTI_NAMES, n)));
	for (int i = 0; i < n; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("name %d of multi-lock %s is NULL", i + 1,
							label->name)));
	}

	*lns = palloc(n * sizeof(LockName));
	for (int i = 0; i < n; i++)
		lockname_init(&(*lns)[i], DatumGetTextPP(elems[i]));

	/* drop duplicates, keeping each name's first place */
	sorted = palloc(n * sizeof(LockName *));
	dup = palloc0(n * sizeof(bool));
	for (int i = 0; i < n; i++)
		sorted[i] = &(*lns)[i];
	qsort(sorted, n, sizeof(LockName *), compare_keys);
	for (int i = 1; i < n; i++)
	{
		if (strcmp(sorted[i]->key, sorted[i - 1]->key) == 0)
			dup[sorted[i] - *lns] = true;
	}
	for (int i = 0; i < n; i++)
	{
		if (!dup[i])
			(*lns)[ndistinct++] = (*lns)[i];
	}
	return ndistinct;
}

static Datum
multi_acquire_sql(FunctionCallInfo fcinfo, RlockScope scope, bool try)
{
	LockName   *lns;
	LockName	label;
	int			n = names_arg(fcinfo, 0, &lns, &label);
	int64		lease = sql_lease_arg(fcinfo, 1, &label);
	int64		wait = try ? sql_wait_arg(fcinfo, 2, &label) : -1;
	bool		ok;

	ok = multi_acquire(lns, n, scope, lease, wait, !try);
	if (!try)
		PG_RETURN_VOID();
	PG_RETURN_BOOL(ok);
}

PG_FUNCTION_INFO_V1(rlock_multi_acquire);
Datum
rlock_multi_acquire(PG_FUNCTION_ARGS)
{
	return multi_acquire_sql(fcinfo, RLOCK_SCOPE_SESSION, false);
}

PG_FUNCTION_INFO_V1(rlock_multi_try_acquire);
Datum
rlock_multi_try_acquire(PG_FUNCTION_ARGS)
{
	return multi_acquire_sql(fcinfo, RLOCK_SCOPE_SESSION, true);
}

PG_FUNCTION_INFO_V1(rlock_multi_xact_acquire);
Datum
rlock_multi_xact_acquire(PG_FUNCTION_ARGS)
{
	return multi_acquire_sql(fcinfo, RLOCK_SCOPE_XACT, false);
}

PG_FUNCTION_INFO_V1(rlock_multi_xact_try_acquire);
Datum
rlock_multi_xact_try_acquire(PG_FUNCTION_ARGS)
{
	return multi_acquire_sql(fcinfo, RLOCK_SCOPE_XACT, true);
}

PG_FUNCTION_INFO_V1(rlock_multi_release);
Datum
rlock_multi_release(PG_FUNCTION_ARGS)
{
	LockName   *lns;
	LockName	label;
	int			n = names_arg(fcinfo, 0, &lns, &label);

	PG_RETURN_BOOL(multi_release(lns, n));
}

/* ----------------------------------------------------------------
 * Redlock: the exclusive lock on a quorum of rlock.redlock_urls
 * ----------------------------------------------------------------
 */

static Datum
redlock_acquire_sql(FunctionCallInfo fcinfo, RlockScope scope, bool try)
{
	LockName	ln;
	int64		lease;
	int64		wait;
	bool		ok;

	sql_name_arg(fcinfo, 0, &ln);
	lease = sql_lease_arg(fcinfo, 1, &ln);
	if (lease > 0 && lease <= REDLOCK_DRIFT_MS(lease))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease of Redlock \"%s\" is too short", ln.name),
				 errdetail("A Redlock is valid for its lease less its masters' round trip and a clock drift of 1%% of the lease plus 2 ms: %lld ms leave nothing.",
						   (long long) lease),
				 errhint("Give a lease of seconds: the masters' round trips must fit in it.")));
	wait = try ? sql_wait_arg(fcinfo, 2, &ln) : -1;
	ok = redlock_acquire(&ln, scope, lease, wait, !try);
	if (!try)
		PG_RETURN_VOID();
	PG_RETURN_BOOL(ok);
}

PG_FUNCTION_INFO_V1(rlock_redlock_acquire);
Datum
rlock_redlock_acquire(PG_FUNCTION_ARGS)
{
	return redlock_acquire_sql(fcinfo, RLOCK_SCOPE_SESSION, false);
}

PG_FUNCTION_INFO_V1(rlock_redlock_try_acquire);
Datum
rlock_redlock_try_acquire(PG_FUNCTION_ARGS)
{
	return redlock_acquire_sql(fcinfo, RLOCK_SCOPE_SESSION, true);
}

PG_FUNCTION_INFO_V1(rlock_redlock_xact_acquire);
Datum
rlock_redlock_xact_acquire(PG_FUNCTION_ARGS)
{
	return redlock_acquire_sql(fcinfo, RLOCK_SCOPE_XACT, false);
}

PG_FUNCTION_INFO_V1(rlock_redlock_xact_try_acquire);
Datum
rlock_redlock_xact_try_acquire(PG_FUNCTION_ARGS)
{
	return redlock_acquire_sql(fcinfo, RLOCK_SCOPE_XACT, true);
}

PG_FUNCTION_INFO_V1(rlock_redlock_release);
Datum
rlock_redlock_release(PG_FUNCTION_ARGS)
{
	LockName	ln;

	sql_name_arg(fcinfo, 0, &ln);
	PG_RETURN_BOOL(redlock_release(&ln));
}
