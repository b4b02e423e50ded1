/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  The differences between the PostgreSQL major versions rlock builds
 *	  against, 13 to 17: this header owns the PG_VERSION_NUM tests, and the
 *	  rest of rlock calls the macros and inline functions below.
 *
 * Where a newer API can be had exactly on an older server it is provided
 * under its own name (MarkGUCPrefixReserved, InitMaterializedSRF); where
 * the versions differ in meaning or signature rlock calls an RLOCK_ macro.
 * (url.c keeps its own guard on guc_malloc, PostgreSQL 16.)
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_COMPAT_H
#define RLOCK_COMPAT_H

#include "fmgr.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#if PG_VERSION_NUM >= 140000
#include "utils/wait_event.h"
#else
#include "pgstat.h"				/* PG_WAIT_EXTENSION before 14 */
#endif

#if PG_VERSION_NUM < 150000
#include "funcapi.h"
#include "postmaster/autovacuum.h"
#include "replication/walsender.h"
#include "utils/tuplestore.h"
#endif

#if PG_VERSION_NUM >= 150000
#include "common/pg_prng.h"
#endif
#if PG_VERSION_NUM >= 170000
#include "storage/procnumber.h"
#endif

/*
 * Shared memory.  From PostgreSQL 15 it is requested from shmem_request_hook
 * (RequestAddinShmemSpace refuses elsewhere); before, _PG_init requests it
 * directly.  RLOCK_SHMEM_REQUEST(prev, fn) installs fn in the hook, saving
 * the previous one in prev, or calls fn at once.
 */
#if PG_VERSION_NUM >= 150000
#define RLOCK_SHMEM_REQUEST(prev, fn) \
	do { \
		(prev) = shmem_request_hook; \
		shmem_request_hook = (fn); \
	} while (0)
#else
typedef void (*shmem_request_hook_type) (void);

#define RLOCK_SHMEM_REQUEST(prev, fn) \
	do { \
		(prev) = NULL; \
		(fn) (); \
	} while (0)
#endif

/*
 * The number of PGPROCs of backends and background workers.  Before
 * PostgreSQL 15 MaxBackends is still 0 when _PG_init requests shared memory;
 * it is then computed as InitializeMaxBackends will.
 */
static inline int
rlock_max_backends(void)
{
#if PG_VERSION_NUM < 150000
	if (MaxBackends == 0)
		return MaxConnections + autovacuum_max_workers + 1 +
			max_worker_processes + max_wal_senders;
#endif
	return MaxBackends;
}

/* This process's index in the PGPROC array (MyProcNumber in 17). */
#if PG_VERSION_NUM >= 170000
#define RLOCK_MY_PROC_NUMBER	((int) MyProcNumber)
#else
#define RLOCK_MY_PROC_NUMBER	(MyProc->pgprocno)
#endif

/*
 * 64 random bits, not cryptographically strong: the backend's PRNG
 * (pg_prng from 15; random(), which the postmaster seeds for each backend,
 * 31 bits a call, before).
 */
static inline uint64
rlock_random_uint64(void)
{
#if PG_VERSION_NUM >= 150000
	return pg_prng_uint64(&pg_global_prng_state);
#else
	return ((uint64) random() << 62) ^ ((uint64) random() << 31) ^
		(uint64) random();
#endif
}

/* Reserving the rlock.* prefix of settings (renamed in 15). */
#if PG_VERSION_NUM < 150000
#define MarkGUCPrefixReserved(className) EmitWarningsOnPlaceholders(className)
#endif

/*
 * A set-returning function's tuplestore in materialize mode.
 * InitMaterializedSRF arrived in 15.1 (15.0 named it SetSingleFuncCall);
 * before 15 it is written out here, as funcapi.c has it.
 */
#if PG_VERSION_NUM >= 150000 && PG_VERSION_NUM < 150001
#define InitMaterializedSRF(fcinfo, flags) SetSingleFuncCall(fcinfo, flags)
#elif PG_VERSION_NUM < 150000
#define MAT_SRF_USE_EXPECTED_DESC	0x01
#define MAT_SRF_BLESS				0x02

static inline void
InitMaterializedSRF(FunctionCallInfo fcinfo, bits32 flags)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext old_context;
	TupleDesc	stored_tupdesc;

	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("set-valued function called in context that cannot accept a set")));
	if (!(rsinfo->allowedModes & SFRM_Materialize) ||
		((flags & MAT_SRF_USE_EXPECTED_DESC) != 0 &&
		 rsinfo->expectedDesc == NULL))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("materialize mode required, but it is not allowed in this context")));

	old_context = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	if ((flags & MAT_SRF_USE_EXPECTED_DESC) != 0)
		stored_tupdesc = CreateTupleDescCopy(rsinfo->expectedDesc);
	else if (get_call_result_type(fcinfo, NULL, &stored_tupdesc) !=
			 TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	if ((flags & MAT_SRF_BLESS) != 0)
		BlessTupleDesc(stored_tupdesc);

	rsinfo->returnMode = SFRM_Materialize;
	rsinfo->setResult =
		tuplestore_begin_heap((rsinfo->allowedModes & SFRM_Materialize_Random) != 0,
							  false, work_mem);
	rsinfo->setDesc = stored_tupdesc;
	MemoryContextSwitchTo(old_context);
}
#endif

/*
 * ProcessUtility_hook's parameters (readOnlyTree arrived in 14), for a
 * hook's definition and for passing them on.
 */
#if PG_VERSION_NUM >= 140000
#define RLOCK_UTILITY_PARAMS \
	PlannedStmt *pstmt, const char *queryString, bool readOnlyTree, \
	ProcessUtilityContext context, ParamListInfo params, \
	QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc
#define RLOCK_UTILITY_ARGS \
	pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc
#else
#define RLOCK_UTILITY_PARAMS \
	PlannedStmt *pstmt, const char *queryString, \
	ProcessUtilityContext context, ParamListInfo params, \
	QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc
#define RLOCK_UTILITY_ARGS \
	pstmt, queryString, context, params, queryEnv, dest, qc
#endif

/*
 * A WaitEventSet that lives until freed (in TopMemoryContext, owned by no
 * resource owner).  PostgreSQL 17 takes the resource owner instead of the
 * memory context.
 */
#if PG_VERSION_NUM >= 170000
#define RLOCK_CREATE_WAIT_EVENT_SET(nevents) \
	CreateWaitEventSet(NULL, (nevents))
#else
#define RLOCK_CREATE_WAIT_EVENT_SET(nevents) \
	CreateWaitEventSet(TopMemoryContext, (nevents))
#endif

/*
 * A wait event of rlock's own, named "name" (base/wait_events.c decides
 * which wait shows which): from 17 a named one that pg_stat_activity shows
 * as wait_event = name (registered, server-wide, by the first process to
 * ask); before, wait_event = 'Extension'.  wait_event_type is 'Extension'
 * on all.
 */
#if PG_VERSION_NUM >= 170000
#define RLOCK_WAIT_EVENT_NEW(name)	WaitEventExtensionNew(name)
#else
#define RLOCK_WAIT_EVENT_NEW(name)	((void) (name), PG_WAIT_EXTENSION)
#endif

/*
 * GUC values and extras are malloc'd before PostgreSQL 16, and allocated
 * with guc_malloc (in the GUC memory context) since.
 */
#if PG_VERSION_NUM >= 160000
#define guc_extra_malloc(size)	guc_malloc(LOG, (size))
#define guc_extra_free(ptr)		guc_free(ptr)
#else
#define guc_extra_malloc(size)	malloc(size)
#define guc_extra_free(ptr)		free(ptr)
#endif

#endif							/* RLOCK_COMPAT_H */
