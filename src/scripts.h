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

#endif							/* RLOCK_SCRIPTS_H */
