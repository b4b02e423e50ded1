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

#include <ctype.h>
#include <unistd.h>

#include "postmaster/postmaster.h"
#include "utils/guc.h"

#include "base/base.h"

char	   *rlock_redis_url = NULL;
char	   *rlock_key_prefix = NULL;
char	   *rlock_redlock_urls = NULL;
int			rlock_watchdog_timeout_ms = 30000;
int			rlock_connect_timeout_ms = 2000;
int			rlock_command_timeout_ms = 2000;
int			rlock_retry_timeout_ms = 2000;
int			rlock_deadlock_timeout_ms = -1;
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
char	   *rlock_server_name_setting = NULL;

/* the per-session caps of a role that is not a superuser (SPEC 8) */
int			rlock_max_locks_per_session = -1;
int			rlock_max_permits_per_session = 100;
int			rlock_max_read_holds_per_lock = 100;
int			rlock_max_owner_holds_per_session = 100;
int			rlock_max_owner_holds_per_lock = 1000;
int			rlock_max_owner_lease_s = 24 * 3600;
int			rlock_superuser_reserved_locks = 50;

/*
 * How this server is named to the others on its Redis (SPEC.md section 3):
 * rlock.server_name, else cluster_name, else "<host>:<port>".
 */
const char *
rlock_server_label(void)
{
	static char label[256];
	char		host[200];

	if (rlock_server_name_setting != NULL && rlock_server_name_setting[0] != '\0')
		return rlock_server_name_setting;
	if (cluster_name != NULL && cluster_name[0] != '\0')
		return cluster_name;
	if (gethostname(host, sizeof(host)) != 0)
		strlcpy(host, "localhost", sizeof(host));
	host[sizeof(host) - 1] = '\0';
	snprintf(label, sizeof(label), "%s:%d", host, PostPortNumber);
	return label;
}

/*
 * The label as a Redis client name may carry it: no spaces or other
 * characters CLIENT SETNAME refuses (each becomes '_'), at most maxlen
 * bytes (out has room for maxlen + 1).
 */
void
rlock_server_label_sanitized(char *out, int maxlen)
{
	const char *l = rlock_server_label();
	int			i;

	for (i = 0; i < maxlen && l[i] != '\0'; i++)
		out[i] = (l[i] > ' ' && l[i] < 127) ? l[i] : '_';
	out[i] = '\0';
}
