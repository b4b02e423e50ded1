/*-------------------------------------------------------------------------
 *
 * settings.c
 *	  The values of the rlock.* settings, with their built-in defaults.
 *
 * Every layer reads them (net/ the TLS files, redis/ the timeouts, holds/
 * the watchdog's lease...), so they live at the bottom; src/rlock.c, at the
 * top, defines the settings themselves (names, ranges, hooks) at _PG_init.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "base/base.h"

char	   *rlock_redis_url = NULL;
char	   *rlock_key_prefix = NULL;
char	   *rlock_redlock_urls = NULL;
int			rlock_watchdog_timeout_ms = 30000;
int			rlock_connect_timeout_ms = 2000;
int			rlock_command_timeout_ms = 2000;
int			rlock_retry_timeout_ms = 2000;
bool		rlock_verify_on_commit = true;
bool		rlock_cancel_on_lost = false;
int			rlock_connection_idle_timeout_ms = 60000;
char	   *rlock_redis_password_file = NULL;
char	   *rlock_sentinel_password_file = NULL;
int			rlock_replica_acks = 1;
int			rlock_replica_ack_timeout_ms = 1000;
char	   *rlock_tls_ca_file = NULL;
char	   *rlock_tls_cert_file = NULL;
char	   *rlock_tls_key_file = NULL;
char	   *rlock_tls_server_name = NULL;
int			rlock_tls_verify = RLOCK_TLS_VERIFY_FULL;
int			rlock_publish_mode = RLOCK_PUBLISH_AUTO;
bool		rlock_preloaded = false;

/* the per-session caps of a role that is not a superuser (SPEC 8) */
int			rlock_max_locks_per_session = -1;
int			rlock_max_permits_per_session = 100;
int			rlock_max_read_holds_per_lock = 100;
int			rlock_max_owner_holds_per_session = 100;
int			rlock_max_owner_holds_per_lock = 1000;
int			rlock_max_owner_lease_s = 24 * 3600;
int			rlock_superuser_reserved_locks = 50;
