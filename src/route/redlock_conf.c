/*-------------------------------------------------------------------------
 *
 * redlock_conf.c
 *	  rlock.redlock_urls: the independent masters a Redlock is taken on, as
 *	  the setting names them (their connections and round trips:
 *	  redlock.c).
 *
 * Each URL is a standalone Redis (redis://, rediss:// or unix://, as
 * rlock.redis_url may be); Sentinel and Cluster forms are refused: a
 * Redlock's safety comes from its masters being independent, and from
 * nothing else.  The masters share the connection pool (connection.c) and
 * the TLS settings of every other connection; a change of the setting is a
 * change of settings, after which connections are made anew.  One master
 * that does not answer costs at most the command deadline, while the
 * others answer in parallel (rconn_run_parallel).
 *
 * Each master must count once toward the majority: the check hook refuses
 * a server named twice (by the same URL, another database of it, another
 * name or address of it that can be told without waiting on the network),
 * and each new connection to a master learns the server's run_id
 * (redlock.c), so that two names no setting could tell apart (a TCP port
 * and a Unix socket of one server) fail closed.  Passwords
 * stay out of sight as rlock.redis_url's do (url.c): the GUC variable holds
 * a stand-in, SHOW and the reload's LOG line the URLs masked.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdlib.h>

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "redis/redis.h"
#include "route/route.h"
#include "route/route_int.h"
#include "net/net.h"
#include "base/base.h"

/* What the GUC variable holds, whatever the URLs (see url.c: the same). */
#define REDLOCK_STORED_VALUE	"(rlock.redlock_urls: see SHOW)"

/* What SHOW shows instead of a password. */
#define REDLOCK_PASSWORD_MASK	"********"

/* How long the check hook may spend resolving the masters' host names. */
#define REDLOCK_RESOLVE_BOUND_MS	1000

/* Addresses of one master, compared to tell two names for one server. */
#define REDLOCK_MAX_ADDRS		4

/*
 * The parsed setting: the GUC machinery keeps it (guc_malloc'd, one
 * chunk).  text holds the URLs as given (trimmed, comma-separated), then
 * the same with their passwords masked (for SHOW and the LOG line).
 */
typedef struct RedlockConf
{
	int			n;
	RedisUrl	masters[REDLOCK_MAX_MASTERS];
	int			masked_off;		/* where the masked form starts in text */
	char		text[FLEXIBLE_ARRAY_MEMBER];
} RedlockConf;

static const RedlockConf *redlock_conf = NULL;
static uint64 conf_generation = 0;

/* One master's identity as far as the check hook can tell. */
typedef struct MasterIdent
{
	bool		unix_socket;
	int			port;
	int			naddrs;
	char		addrs[REDLOCK_MAX_ADDRS][INET6_ADDRSTRLEN + 1];
} MasterIdent;

/* item with its password (if any) masked, appended to buf */
static void
append_masked(StringInfo buf, const char *item)
{
	const char *p = strstr(item, "://");
	const char *stop;
	const char *at = NULL;
	const char *colon;

	if (p != NULL)
	{
		p += 3;
		/* where rconn_parse_url looks for it: before the first '/' */
		stop = strchr(p, '/');
		for (const char *q = p; *q && (stop == NULL || q < stop); q++)
			if (*q == '@')
				at = q;
		colon = at ? memchr(p, ':', at - p) : NULL;
		if (colon != NULL && at > colon + 1)
		{
			appendBinaryStringInfo(buf, item, colon + 1 - item);
			appendStringInfoString(buf, REDLOCK_PASSWORD_MASK);
			appendStringInfoString(buf, at);
			return;
		}
	}
	appendStringInfoString(buf, item);
}

/* A numeric address in one canonical text form (IPv4-mapped as IPv4). */
static bool
canonical_address(const char *host, char *out)
{
	struct in_addr a4;
	struct in6_addr a6;

	if (inet_pton(AF_INET, host, &a4) == 1)
		return inet_ntop(AF_INET, &a4, out, INET6_ADDRSTRLEN) != NULL;
	if (inet_pton(AF_INET6, host, &a6) == 1)
	{
		if (IN6_IS_ADDR_V4MAPPED(&a6))
		{
			memcpy(&a4, &a6.s6_addr[12], 4);
			return inet_ntop(AF_INET, &a4, out, INET6_ADDRSTRLEN) != NULL;
		}
		return inet_ntop(AF_INET6, &a6, out, INET6_ADDRSTRLEN) != NULL;
	}
	return false;
}

static void
ident_add(MasterIdent *id, const char *addr)
{
	for (int i = 0; i < id->naddrs; i++)
		if (strcmp(id->addrs[i], addr) == 0)
			return;
	if (id->naddrs < REDLOCK_MAX_ADDRS)
		strlcpy(id->addrs[id->naddrs++], addr, sizeof(id->addrs[0]));
}

/*
 * Who a master is: its socket's path, or its port and addresses.  A name
 * counts as itself (lower-cased) and as what it resolves to: "localhost"
 * (RFC 6761) as the loopback addresses; any other name is resolved, all
 * within REDLOCK_RESOLVE_BOUND_MS, by backends and workers only (never by the
 * postmaster, which must not wait on the network, resolve.c).  Names only
 * a resolver could tell apart are caught at run time (redlock_verify).
 */
static void
master_ident(const RedisUrl *url, MasterIdent *id, TimestampTz deadline)
{
	char		addr[INET6_ADDRSTRLEN + 1];
	char		name[256];
	size_t		len;

	memset(id, 0, sizeof(*id));
	id->unix_socket = url->scheme == URL_UNIX;
	id->port = url->port;
	if (id->unix_socket)
	{
		char		real[PATH_MAX];

		ident_add(id, realpath(url->host, real) != NULL ? real : url->host);
		return;
	}
	if (canonical_address(url->host, addr))
	{
		ident_add(id, addr);
		return;
	}
	strlcpy(name, url->host, sizeof(name));
	for (char *c = name; *c; c++)
		*c = pg_tolower((unsigned char) *c);
	len = strlen(name);
	if (len > 1 && name[len - 1] == '.')
		name[--len] = '\0';
	ident_add(id, name);
	if (strcmp(name, "localhost") == 0 ||
		(len > 10 && strcmp(name + len - 10, ".localhost") == 0))
	{
		ident_add(id, "127.0.0.1");
		ident_add(id, "::1");
		return;
	}
	/*
	 * Only a client backend looks names up (within the bound): ALTER SYSTEM
	 * refuses there, and the auxiliary processes and the worker, which also
	 * run this at every reload, must not wait on DNS.  Two names for one
	 * server that only DNS tells apart are caught at run time (run_id).
	 */
	if (IsUnderPostmaster && MyBackendType == B_BACKEND)
	{
		bool		timed_out = false;
		char	   *err = NULL;
		char		out[INET6_ADDRSTRLEN + 1];

		if (GetCurrentTimestamp() < deadline &&
			resolve_host(name, deadline, out, sizeof(out), &timed_out, &err) &&
			canonical_address(out, addr))
			ident_add(id, addr);
	}
}

static bool
same_server(const MasterIdent *a, const MasterIdent *b)
{
	if (a->unix_socket != b->unix_socket || a->port != b->port)
		return false;
	for (int i = 0; i < a->naddrs; i++)
		for (int j = 0; j < b->naddrs; j++)
			if (strcmp(a->addrs[i], b->addrs[j]) == 0)
				return true;
	return false;
}

/* How master i shows in messages: its URL without credentials. */
static char *
master_label(const RedlockConf *conf, int i)
{
	const RedisUrl *u = &conf->masters[i];

	if (u->scheme == URL_UNIX)
		return psprintf("master %d (unix://%s?db=%d)", i + 1, u->host, u->db);
	return psprintf("master %d (%s://%s%s%s:%d/%d)", i + 1,
					u->scheme == URL_REDISS ? "rediss" : "redis",
					strchr(u->host, ':') ? "[" : "", u->host,
					strchr(u->host, ':') ? "]" : "", u->port, u->db);
}

static bool
refuse(RedlockConf *conf)
{
	GUC_check_errmsg("invalid value for parameter \"rlock.redlock_urls\"");
	if (conf != NULL)
		guc_extra_free(conf);
	return false;
}

/*
 * Check hook.  Every URL must parse, and no server may be named twice (not
 * with another database, nor by another name or address of the same
 * host): each master counts once toward the majority, which is the whole
 * of a Redlock's safety.  Like rlock.redis_url (url.c), the GUC variable
 * stores a stand-in, so that PostgreSQL never shows, compares or logs a
 * password; the URLs travel to the assign hook as extra.
 */
bool
rlock_check_redlock_urls(char **newval, void **extra, GucSource source)
{
	RedlockConf *conf;
	RedisUrl	masters[REDLOCK_MAX_MASTERS];
	MasterIdent *ids;
	StringInfoData full;
	StringInfoData masked;
	int			n = 0;
	char	   *copy;
	char	   *item;
	char	   *save = NULL;
	char	   *stored;
	TimestampTz deadline;

	if (*newval != NULL && strcmp(*newval, REDLOCK_STORED_VALUE) == 0)
	{
		/* a parallel worker restoring its leader's settings */
		size_t		size;

		if (redlock_conf == NULL)
			return refuse(NULL);
		size = offsetof(RedlockConf, text) + redlock_conf->masked_off +
			strlen(redlock_conf->text + redlock_conf->masked_off) + 1;
		conf = guc_extra_malloc(size);
		if (conf == NULL)
			return false;
		memcpy(conf, redlock_conf, size);
		*extra = conf;
		return true;
	}

	initStringInfo(&full);
	initStringInfo(&masked);
	memset(masters, 0, sizeof(masters));
	copy = pstrdup(*newval ? *newval : "");
	for (item = strtok_r(copy, ",", &save); item != NULL;
		 item = strtok_r(NULL, ",", &save))
	{
		char	   *err = NULL;
		char	   *end;

		while (*item == ' ' || *item == '\t')
			item++;
		end = item + strlen(item);
		while (end > item && (end[-1] == ' ' || end[-1] == '\t'))
			*--end = '\0';
		if (*item == '\0')
			continue;
		if (n >= REDLOCK_MAX_MASTERS)
		{
			GUC_check_errdetail("rlock.redlock_urls names more than %d masters.",
								REDLOCK_MAX_MASTERS);
			return refuse(NULL);
		}
		if (strncmp(item, "redis-", 6) == 0 || strncmp(item, "rediss-", 7) == 0)
		{
			GUC_check_errdetail("Master %d of rlock.redlock_urls is a Sentinel or Cluster URL; a Redlock is taken on independent standalone masters (redis://, rediss:// or unix://).",
								n + 1);
			return refuse(NULL);
		}
		if (!rconn_parse_url(item, &masters[n], &err))
		{
			GUC_check_errdetail("Master %d of rlock.redlock_urls: %s.",
								n + 1, err);
			return refuse(NULL);
		}
		/* it gets the credentials of its own URL, nobody else's */
		masters[n].origin = URL_OF_REDLOCK;
		masters[n].master = n;
		if (n > 0)
		{
			appendStringInfoChar(&full, ',');
			appendStringInfoChar(&masked, ',');
		}
		appendStringInfoString(&full, item);
		append_masked(&masked, item);
		n++;
	}

	conf = guc_extra_malloc(offsetof(RedlockConf, text) + full.len + 1 +
							masked.len + 1);
	if (conf == NULL)
		return false;
	memset(conf, 0, offsetof(RedlockConf, text));
	conf->n = n;
	memcpy(conf->masters, masters, sizeof(masters));
	memcpy(conf->text, full.data, full.len + 1);
	conf->masked_off = full.len + 1;
	memcpy(conf->text + conf->masked_off, masked.data, masked.len + 1);

	/* one server named twice would count twice toward the majority */
	ids = palloc(Max(n, 1) * sizeof(MasterIdent));
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
										   REDLOCK_RESOLVE_BOUND_MS);
	for (int i = 0; i < n; i++)
	{
		master_ident(&conf->masters[i], &ids[i], deadline);
		for (int j = 0; j < i; j++)
		{
			if (!same_server(&ids[j], &ids[i]))
				continue;
			GUC_check_errdetail("%s and %s of rlock.redlock_urls are the same Redis server; each master of a Redlock must be an independent server, named once.",
								master_label(conf, j), master_label(conf, i));
			GUC_check_errhint("List each Redis master once (a database index does not make another master).");
			return refuse(conf);
		}
	}

	stored = guc_extra_malloc(strlen(REDLOCK_STORED_VALUE) + 1);
	if (stored == NULL)
	{
		guc_extra_free(conf);
		return false;
	}
	strcpy(stored, REDLOCK_STORED_VALUE);
	guc_extra_free(*newval);
	*newval = stored;
	*extra = conf;
	return true;
}

void
rlock_assign_redlock_urls(const char *newval, void *extra)
{
	const RedlockConf *conf = extra;
	bool		changed = redlock_conf == NULL || conf == NULL ||
		strcmp(redlock_conf->text, conf->text) != 0;

	/* PostgreSQL cannot log the change (it never sees one): do it here */
	if (changed && !IsUnderPostmaster && redlock_conf != NULL && conf != NULL &&
		!process_shared_preload_libraries_in_progress)
		ereport(LOG,
				(errmsg("parameter \"rlock.redlock_urls\" changed to \"%s\"",
						conf->text + conf->masked_off)));
	/* a reload that changes nothing keeps the connections */
	if (changed)
		net_assign_string_setting(newval, extra);
	redlock_conf = conf;
	conf_generation++;
}

/* How many times the setting was assigned (redlock.c looks up anew). */
uint64
redlock_conf_generation(void)
{
	return conf_generation;
}

/* SHOW rlock.redlock_urls: the URLs with their passwords masked. */
const char *
rlock_show_redlock_urls(void)
{
	if (redlock_conf == NULL)
		return "";
	return redlock_conf->text + redlock_conf->masked_off;
}

int
redlock_num_masters(void)
{
	return redlock_conf != NULL ? redlock_conf->n : 0;
}

/* Master i's URL (i < redlock_num_masters()). */
const RedisUrl *
redlock_master_url(int i)
{
	Assert(i >= 0 && i < redlock_num_masters());
	return &redlock_conf->masters[i];
}

/* ERROR unless rlock.redlock_urls names at least one master. */
void
redlock_require_configured(const char *name)
{
	if (redlock_num_masters() == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("Redlock \"%s\" needs rlock.redlock_urls", name),
				 errdetail("rlock.redlock_urls names no Redis master."),
				 errhint("Set rlock.redlock_urls to the comma-separated URLs of independent Redis masters (an odd number, such as 3 or 5) in postgresql.conf.")));
}

