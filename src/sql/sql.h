/*-------------------------------------------------------------------------
 *
 * sql.h
 *	  The door of src/sql/: the SQL entry points, thin: arguments checked,
 *	  then one call down.  Only the files of this folder use it.
 *
 *	  sql_api.c			the locks' functions
 *	  sql_api_sets.c	the same for the multi-lock and the Redlock
 *	  sql_api_sync.c	the count-down latch's and the semaphore's functions
 *	  sql_api_assert.c	rlock_assert_held, a job's check before it commits
 *	  waits.c			rlock_waits, rlock_blocking_pids: who waits, who
 *						blocks (and what a role may see of a holder)
 *	  introspect.c		the functions that report: rlock_status,
 *						rlock_locks, rlock_stats, rlock_ping...
 *	  servers.c			rlock_server_name, rlock_servers: the servers
 *						announced on the Redis
 *	  histograms.c		rlock_stats_histograms: wait and hold times per
 *						kind, cumulative buckets
 *	  events.c			rlock_events: this server's recent events, holders
 *						masked
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_SQL_H
#define RLOCK_SQL_H

#include "fmgr.h"
#include "datatype/timestamp.h"

#include "base/base.h"

/* A lock name argument (ERROR when NULL, empty or too long). */
extern void sql_name_arg(FunctionCallInfo fcinfo, int argno, LockName *ln);
/* A lease argument in ms: 0 for NULL, automatic renewal. */
extern int64 sql_lease_arg(FunctionCallInfo fcinfo, int argno,
						   const LockName *ln);
/* A wait argument in ms: 0 for one attempt. */
extern int64 sql_wait_arg(FunctionCallInfo fcinfo, int argno,
						  const LockName *ln);

/*
 * An interval in ms (rounded up), positive (or zero when allowed) and at
 * most a year; errors name the argument and the object ("lock", "latch").
 */
extern int64 sql_interval_ms(Interval *iv, const char *argname,
							 const char *noun, const LockName *ln,
							 bool allow_zero);

/*
 * waits.c: what a role may see of a holder (an owner token's digest is
 * masked: introspect.c explains).
 */
#define OWNER_TOKEN_SHOWN		"<owner token>"
#define NO_PRIVILEGE_SHOWN		"<insufficient privilege>"
extern bool sql_sees_owner_tokens(void);
extern const char *sql_holder_shown(const char *holder, bool privileged);

#endif							/* RLOCK_SQL_H */
