/*-------------------------------------------------------------------------
 *
 * scripts.h
 *	  The Lua scripts rlock runs in Redis.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_SCRIPTS_H
#define RLOCK_SCRIPTS_H

#include "connection.h"
#include "rlock.h"

typedef enum RlockScriptId
{
	RLOCK_SCRIPT_ACQUIRE,
	RLOCK_SCRIPT_RELEASE,
	RLOCK_SCRIPT_RECONCILE,
	RLOCK_SCRIPT_FORCE_RELEASE,
	RLOCK_SCRIPT_STATUS,
	RLOCK_SCRIPT_RENEW,
	RLOCK_SCRIPT_READ_ACQUIRE,
	RLOCK_SCRIPT_WRITE_ACQUIRE,
	RLOCK_SCRIPT_READ_RELEASE,
	RLOCK_SCRIPT_WRITE_RELEASE,
	RLOCK_SCRIPT_RW_RECONCILE,
	RLOCK_SCRIPT_FAIR_ACQUIRE,
	RLOCK_SCRIPT_FAIR_RELEASE,
	RLOCK_SCRIPT_FAIR_GIVE_UP,
	RLOCK_NUM_SCRIPTS
} RlockScriptId;

typedef struct RlockScript
{
	const char *name;
	const char *body;
	char		sha1[41];		/* hex digest, computed on first use */
} RlockScript;

/* Start cmd as EVALSHA of the script with nkeys keys; add keys, then args. */
extern void rcmd_script(RedisCmd *cmd, RlockScriptId id, int nkeys);

/* One lock for the renew script: its holder's field, how, its lease. */
typedef struct RenewArg
{
	const char *key;
	const char *field;			/* the holder's field in the lock's hash */
	const char *how;			/* "x" renew, "r" renew a read hold, "c" check */
	int64		lease_ms;
} RenewArg;

extern void rcmd_renew_arg(RenewArg *arg, const char *key, RlockKind kind,
						   const char *holder, int64 renew_lease_ms);

/*
 * Renew script calls for n locks, at most maxper keys a call, the keys of
 * one call sharing a hash slot (in a Cluster): returns the number of calls
 * in *cmds; the locks of call g are order[starts[g]] ... order[starts[g+1]-1],
 * and its reply has a (hold count, PTTL) pair for each, in that order.
 */
extern int	rcmd_renew_calls(const RenewArg *args, int n, int maxper,
							 RedisCmd **cmds, int **order, int **starts);

#endif							/* RLOCK_SCRIPTS_H */
