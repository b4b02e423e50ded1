/*-------------------------------------------------------------------------
 *
 * sql_api.h
 *	  The argument checks of the SQL entry points (sql_api.c), shared by
 *	  the entry points of each part of the SQL API.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_SQL_API_H
#define RLOCK_SQL_API_H

#include "fmgr.h"

#include "lockname.h"

/* A lock name argument (ERROR when NULL, empty or too long). */
extern void sql_name_arg(FunctionCallInfo fcinfo, int argno, LockName *ln);
/* A lease argument in ms: 0 for NULL, automatic renewal. */
extern int64 sql_lease_arg(FunctionCallInfo fcinfo, int argno,
						   const LockName *ln);
/* A wait argument in ms: 0 for one attempt. */
extern int64 sql_wait_arg(FunctionCallInfo fcinfo, int argno,
						  const LockName *ln);

#endif							/* RLOCK_SQL_API_H */
