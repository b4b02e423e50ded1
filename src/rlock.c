/*-------------------------------------------------------------------------
 *
 * rlock.c
 *	  Module entry point: _PG_init and the rlock.* settings.
 *
 * rlock works with or without shared_preload_libraries.  Preloaded, it
 * reserves its shared memory (registry.c, stats.c); loaded on demand by a backend,
 * locks with a fixed lease still work, and what needs shared memory says
 * so.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/guc.h"

#include "compat.h"
#include "connection.h"
#include "holds.h"
#include "registry.h"
#include "stats.h"
#include "waitqueue.h"
#include "watchdog.h"
#include "rlock.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

char	   *rlock_redis_url = NULL;
char	   *rlock_key_prefix = NULL;
int			rlock_watchdog_timeout_ms = 30000;
int			rlock_connect_timeout_ms = 2000;
int			rlock_command_timeout_ms = 2000;
bool		rlock_verify_on_commit = true;
bool		rlock_cancel_on_lost = false;

static bool
check_key_prefix(char **newval, void **extra, GucSource source)
{
	if (*newval && strlen(*newval) >= RLOCK_MAX_KEY_LEN)
	{
		GUC_check_errdetail("rlock.key_prefix must be shorter than %d bytes.",
							RLOCK_MAX_KEY_LEN);
		return false;
	}
	return true;
}

const char *
rlock_kind_name(RlockKind kind)
{
	switch (kind)
	{
		case RLOCK_KIND_EXCLUSIVE:
			return "exclusive";
		case RLOCK_KIND_READ:
			return "read";
		case RLOCK_KIND_WRITE:
			return "write";
		case RLOCK_KIND_FAIR:
			return "fair";
	}
	return "unknown";
}

/*
 * May one session hold one name as both kinds?  Only the two sides of a
 * read/write lock (a writer may also read); every other mix is refused.
 */
bool
rlock_kinds_compatible(RlockKind a, RlockKind b)
{
	if (a == b)
		return true;
	return (a == RLOCK_KIND_READ || a == RLOCK_KIND_WRITE) &&
		(b == RLOCK_KIND_READ || b == RLOCK_KIND_WRITE);
}

void
_PG_init(void)
{
	if (IsBinaryUpgrade)
		return;

	DefineCustomStringVariable("rlock.redis_url",
							   "Redis server that holds the locks.",
							   "redis://[user[:password]@]host[:port][/db]",
							   &rlock_redis_url,
							   "redis://127.0.0.1:6379/0",
							   PGC_SIGHUP,
							   GUC_SUPERUSER_ONLY,
							   rlock_check_redis_url, rlock_assign_redis_url,
							   rlock_show_redis_url);

	DefineCustomStringVariable("rlock.key_prefix",
							   "Prefix of every lock's Redis key.",
							   NULL,
							   &rlock_key_prefix,
							   "",
							   PGC_SUSET,
							   0,
							   check_key_prefix, NULL, NULL);

	DefineCustomIntVariable("rlock.watchdog_timeout",
							"Lease of locks taken without a lease; renewed every third of it.",
							NULL,
							&rlock_watchdog_timeout_ms,
							30000, 100, INT_MAX / 4,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("rlock.connect_timeout",
							"Bound on establishing a Redis connection.",
							NULL,
							&rlock_connect_timeout_ms,
							2000, 1, RLOCK_MAX_USER_TIMEOUT_MS,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("rlock.command_timeout",
							"Bound on one Redis round trip (not on waiting for a lock).",
							NULL,
							&rlock_command_timeout_ms,
							2000, 1, RLOCK_MAX_USER_TIMEOUT_MS,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("rlock.verify_on_commit",
							 "Before COMMIT, check that the transaction's rlock transaction-level locks are still held.",
							 "If one was lost, COMMIT fails and the transaction rolls back.",
							 &rlock_verify_on_commit,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("rlock.cancel_on_lost",
							 "Cancel the running statement of a session whose lock the watchdog found lost.",
							 NULL,
							 &rlock_cancel_on_lost,
							 false,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	/*
	 * The registry's size is fixed when shared memory is created; a
	 * PGC_POSTMASTER setting cannot be defined once the server runs, so it
	 * exists only when rlock is preloaded (as the registry does).
	 */
	if (process_shared_preload_libraries_in_progress)
		DefineCustomIntVariable("rlock.max_locks",
								"Capacity of the shared-memory registry of held locks.",
								NULL,
								&rlock_max_locks,
								10000, 16, RLOCK_MAX_LOCKS_LIMIT,
								PGC_POSTMASTER,
								0,
								NULL, NULL, NULL);

	MarkGUCPrefixReserved("rlock");

	/* DISCARD ALL releases session locks, as it does advisory locks */
	holds_install_hooks();

	if (process_shared_preload_libraries_in_progress)
	{
		registry_install_hooks();
		stats_install_hooks();
		waitqueue_install_hooks();
		watchdog_register();
	}
}
