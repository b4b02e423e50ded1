/*-------------------------------------------------------------------------
 *
 * rlock.c
 *	  Module entry point: _PG_init and the rlock.* settings.
 *
 * rlock works with or without shared_preload_libraries.  Preloaded, it
 * reserves its shared memory (registry.c, stats.c, events.c); loaded on demand by a backend,
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

#include "redis/redis.h"
#include "holds/holds.h"
#include "route/route.h"
#include "base/base.h"
#include "locks/locks.h"
#include "worker/worker.h"

PG_MODULE_MAGIC;

void		_PG_init(void);


static const struct config_enum_entry publish_mode_options[] = {
	{"auto", RLOCK_PUBLISH_AUTO, false},
	{"publish", RLOCK_PUBLISH_PLAIN, false},
	{"spublish", RLOCK_PUBLISH_SHARDED, false},
	{NULL, 0, false}
};

static const struct config_enum_entry tls_verify_options[] = {
	{"none", RLOCK_TLS_VERIFY_NONE, false},
	{"ca", RLOCK_TLS_VERIFY_CA, false},
	{"full", RLOCK_TLS_VERIFY_FULL, false},
	{NULL, 0, false}
};

/*
 * Settings that say how to reach Redis: a change makes every connection
 * made with the old value stale (reconnected on its next use).
 */
static void
define_connection_string(const char *name, const char *desc, char **var,
						 int flags)
{
	DefineCustomStringVariable(name, desc, NULL, var, "", PGC_SIGHUP, flags,
							   NULL, net_assign_string_setting, NULL);
}

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

void
_PG_init(void)
{
	/*
	 * Function pointers only, before anything else: whatever runs rlock's
	 * code in this process finds the connection layer's route hooks, the
	 * lock kinds and the end-of-holds callbacks wired in.
	 */
	route_init();
	locks_init();
	holds_init();
	/* a password in a URL is refused when not preloaded (SPEC 8) */
	rlock_preloaded = process_shared_preload_libraries_in_progress;

	if (IsBinaryUpgrade)
		return;

	DefineCustomStringVariable("rlock.redis_url",
							   "Redis server that holds the locks.",
							   "redis://[user[:password]@]host[:port][/db], rediss://... (TLS) or unix://[user[:password]@]/path/redis.sock[?db=N]",
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

	DefineCustomStringVariable("rlock.redlock_urls",
							   "Independent Redis masters of the Redlock (rlock_redlock_*).",
							   "Comma-separated redis://, rediss:// or unix:// URLs.",
							   &rlock_redlock_urls,
							   "",
							   PGC_SIGHUP,
							   GUC_SUPERUSER_ONLY,
							   rlock_check_redlock_urls,
							   rlock_assign_redlock_urls,
							   rlock_show_redlock_urls);

	DefineCustomIntVariable("rlock.watchdog_timeout",
							"Lease of locks taken without a lease; renewed every third of it.",
							NULL,
							&rlock_watchdog_timeout_ms,
							30000, RLOCK_MIN_WATCHDOG_TIMEOUT_MS, INT_MAX / 4,
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

	DefineCustomIntVariable("rlock.retry_timeout",
							"How long a call (other than a wait) retries a refused or reset Redis connection.",
							"Counted from the first failure; 0 turns retries off.  Never beyond statement_timeout.",
							&rlock_retry_timeout_ms,
							2000, 0, RLOCK_MAX_USER_TIMEOUT_MS,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("rlock.deadlock_timeout",
							"How long an rlock wait lasts before it checks for a deadlock.",
							"-1: PostgreSQL's deadlock_timeout; 0: never check.",
							&rlock_deadlock_timeout_ms,
							-1, -1, INT_MAX,
							PGC_SUSET,
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

	DefineCustomIntVariable("rlock.connection_idle_timeout",
							"Close a Redis connection unused for this long.",
							"Even in a session that sits idle; it is reopened on next use.  0 keeps connections open.",
							&rlock_connection_idle_timeout_ms,
							60000, 0, INT_MAX,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	define_connection_string("rlock.redis_password_file",
							 "File whose first line is the Redis password, used when rlock.redis_url has none.",
							 &rlock_redis_password_file, GUC_SUPERUSER_ONLY);
	define_connection_string("rlock.sentinel_password_file",
							 "File whose first line is the password of the sentinels of a redis-sentinel:// URL.",
							 &rlock_sentinel_password_file, GUC_SUPERUSER_ONLY);
	DefineCustomIntVariable("rlock.replica_acks",
							"Replicas that must acknowledge an acquisition (Redis WAIT) when the master has replicas.",
							"0 does not wait.  Fewer acknowledgements undo the acquisition and fail it.",
							&rlock_replica_acks,
							1, 0, 64,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("rlock.replica_ack_timeout",
							"How long an acquisition waits for its replica acknowledgements.",
							NULL,
							&rlock_replica_ack_timeout_ms,
							1000, 1, RLOCK_MAX_USER_TIMEOUT_MS,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
	define_connection_string("rlock.tls_ca_file",
							 "CA certificates that verify Redis servers' certificates (rediss:// URLs).",
							 &rlock_tls_ca_file, 0);
	define_connection_string("rlock.tls_cert_file",
							 "Client certificate rlock presents to Redis over TLS.",
							 &rlock_tls_cert_file, 0);
	define_connection_string("rlock.tls_key_file",
							 "Private key of rlock.tls_cert_file.",
							 &rlock_tls_key_file, GUC_SUPERUSER_ONLY);
	define_connection_string("rlock.tls_server_name",
							 "Name sent to Redis over TLS (SNI) and verified in its certificate, instead of the URL's host.",
							 &rlock_tls_server_name, 0);
	DefineCustomEnumVariable("rlock.tls_verify",
							 "How Redis servers' TLS certificates are verified: full (CA and host name), ca, none.",
							 NULL,
							 &rlock_tls_verify,
							 RLOCK_TLS_VERIFY_FULL,
							 tls_verify_options,
							 PGC_SIGHUP,
							 0,
							 NULL, net_assign_enum_setting, NULL);

	DefineCustomEnumVariable("rlock.publish_mode",
							 "How releases are published and waiters subscribe: publish, spublish (sharded pub/sub, Redis 7), or auto.",
							 "auto: sharded on a Redis Cluster that has it (Redisson's default), plain elsewhere.",
							 &rlock_publish_mode,
							 RLOCK_PUBLISH_AUTO,
							 publish_mode_options,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	/*
	 * Per-session caps (SPEC 8): what one session of a role that is not a
	 * superuser may hold, so that no role fills the registry or makes one
	 * Redis script slow for everyone.  Superusers set them, and are not
	 * bound by them.
	 */
	DefineCustomIntVariable("rlock.max_locks_per_session",
							"Most locks (names, per kind) one session of a role that is not a superuser holds at once.",
							"-1: a tenth of rlock.max_locks.",
							&rlock_max_locks_per_session,
							-1, -1, RLOCK_MAX_LOCKS_LIMIT,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("rlock.max_permits_per_session",
							"Most semaphore permits, of all semaphores together, one session of a role that is not a superuser holds at once.",
							NULL,
							&rlock_max_permits_per_session,
							100, 0, INT_MAX,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("rlock.max_read_holds_per_lock",
							"Most read holds of one read/write lock, re-entries included, one session of a role that is not a superuser holds at once.",
							NULL,
							&rlock_max_read_holds_per_lock,
							100, 0, INT_MAX,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("rlock.max_owner_holds_per_session",
							"Most holds taken for owner tokens by one session of a role that is not a superuser, until they are released by it or their lease runs out.",
							NULL,
							&rlock_max_owner_holds_per_session,
							100, 0, INT_MAX,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("rlock.max_owner_holds_per_lock",
							"Most read holds for owner tokens one read/write lock takes from roles that are not superusers.",
							"Counted in Redis, whichever sessions took them.",
							&rlock_max_owner_holds_per_lock,
							1000, 1, INT_MAX,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("rlock.max_owner_lease",
							"Longest lease of a hold taken for an owner token by a role that is not a superuser.",
							NULL,
							&rlock_max_owner_lease_s,
							24 * 3600, 1, (int) (RLOCK_MAX_INTERVAL_MS / 1000),
							PGC_SUSET,
							GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("rlock.superuser_reserved_locks",
							"Entries of the registry of held locks (rlock.max_locks) only superusers may take.",
							"At most half of rlock.max_locks counts.",
							&rlock_superuser_reserved_locks,
							50, 0, RLOCK_MAX_LOCKS_LIMIT,
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

	/* the ring of rlock_events: its size is fixed with shared memory */
	if (process_shared_preload_libraries_in_progress)
		DefineCustomIntVariable("rlock.events_max",
								"Entries of the ring of this server's recent events (rlock_events).",
								NULL,
								&rlock_events_max,
								1000, 10, 100000,
								PGC_POSTMASTER,
								0,
								NULL, NULL, NULL);

	if (process_shared_preload_libraries_in_progress)
		DefineCustomStringVariable("rlock.server_name",
								   "How this server is named to the others on its Redis.",
								   "Empty: cluster_name, or else host:port.",
								   &rlock_server_name_setting,
								   "",
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
		events_install_hooks();
		route_shmem_install();
		waitqueue_install_hooks();
		wait_graph_install_hooks();
		watchdog_register();
	}
}
