/*-------------------------------------------------------------------------
 *
 * url.c
 *	  rlock.redis_url: parsing redis://[user[:password]@]host[:port][/db],
 *	  rediss://... (the same over TLS),
 *	  unix://[user[:password]@]/path/redis.sock[?db=N] and
 *	  redis-sentinel://[user[:password]@]host[:port][,host[:port]...][/db]#name
 *	  (rediss-sentinel://: TLS) and
 *	  redis-cluster://[user[:password]@]host[:port][,host[:port]...]
 *	  (rediss-cluster://: TLS), and keeping the password out of sight.
 *
 * The password must never show: not in SHOW or pg_settings (whose
 * reset_val and boot_val pg_read_all_settings members can read), not in
 * the postmaster's "parameter changed" LOG line on reload, not in the
 * error about an invalid value.  PostgreSQL stores and compares the value
 * a check hook leaves in *newval, and on reload logs the raw value from the
 * configuration file whenever the stored one changed.  So the check hook
 * stores the same stand-in, URL_STORED_VALUE, for every URL (the stored
 * value never changes, so PostgreSQL never logs the raw one) and hands the
 * real URL to the assign hook as the setting's "extra"; the show hook
 * displays the URL with its password masked, the assign hook logs changes
 * (masked) in the postmaster, and connections use rlock_redis_conf, never
 * the GUC's string.  An invalid value's error carries its own message, so
 * PostgreSQL does not quote the value either.  A process that receives the
 * stand-in itself (a parallel worker restoring its leader's settings)
 * keeps the URL it inherited from the postmaster.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>

#include <errno.h>
#include <limits.h>

#include "miscadmin.h"
#include "utils/memutils.h"

#include "base/base.h"
#include "net/net.h"

/* What SHOW shows instead of a password. */
#define PASSWORD_MASK	"********"

/* What the GUC variable holds, whatever the URL. */
#define URL_STORED_VALUE	"(rlock.redis_url: see SHOW)"


const RedisUrlConf *rlock_redis_conf = NULL;

/*
 * Bumped whenever a setting that says how to reach Redis changes: the
 * connections made before are replaced at their next use.
 */
uint64		net_settings_generation = 1;

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Copy [s, s+len) into dst, decoding %XX escapes. */
static bool
copy_decoded(char *dst, size_t dstsize, const char *s, size_t len)
{
	size_t		o = 0;

	for (size_t i = 0; i < len; i++)
	{
		char		c = s[i];

		if (c == '%')
		{
			int			h,
						l;

			if (i + 2 >= len)
				return false;
			h = hexval(s[i + 1]);
			l = hexval(s[i + 2]);
			if (h < 0 || l < 0)
				return false;
			c = (char) (h * 16 + l);
			i += 2;
		}
		if (o + 1 >= dstsize)
			return false;
		dst[o++] = c;
	}
	dst[o] = '\0';
	return true;
}

/* unix://...: the socket's path, then ?db=N. */
static bool
parse_unix_path(const char *p, RedisUrl *out, char **errmsg)
{
	const char *q = strchr(p, '?');
	size_t		len = q ? (size_t) (q - p) : strlen(p);

	if (*p != '/' || len < 2 || len >= 108)
	{
		*errmsg = pstrdup("the URL has no valid socket path (unix:///path/redis.sock)");
		return false;
	}
	if (!copy_decoded(out->host, sizeof(out->host), p, len))
	{
		*errmsg = pstrdup("the socket path in the URL is invalid");
		return false;
	}
	out->port = 0;
	if (q != NULL)
	{
		char	   *end;
		long		db;

		if (strncmp(q, "?db=", 4) != 0)
		{
			*errmsg = pstrdup("the only parameter of a unix:// URL is db");
			return false;
		}
		errno = 0;
		db = strtol(q + 4, &end, 10);
		if (!isdigit((unsigned char) q[4]) ||
			end == q + 4 || *end != '\0' || errno != 0 || db < 0 ||
			db > INT_MAX)
		{
			*errmsg = pstrdup("the database number in the URL is invalid");
			return false;
		}
		out->db = (int) db;
	}
	return true;
}

/*
 * Parse redis://[user[:password]@]host[:port][/db].  On failure sets
 * *errmsg to a palloc'd description (which never contains the password).
 */
bool
rconn_parse_url(const char *url, RedisUrl *out, char **errmsg)
{
	const char *p;
	const char *at;
	const char *hostend;
	const char *slash;

	memset(out, 0, sizeof(*out));
	out->port = 6379;
	out->db = 0;

	if (url != NULL && strncmp(url, "redis://", 8) == 0)
		out->scheme = URL_REDIS;
	else if (url != NULL && strncmp(url, "rediss://", 9) == 0)
		out->scheme = URL_REDISS;
	else if (url != NULL && strncmp(url, "unix://", 7) == 0)
		out->scheme = URL_UNIX;
	else
	{
		*errmsg = pstrdup("the URL must start with \"redis://\", \"rediss://\", \"unix://\", \"redis-sentinel://\", \"rediss-sentinel://\", \"redis-cluster://\" or \"rediss-cluster://\"");
		return false;
	}
	p = strstr(url, "://") + 3;
	slash = strchr(p, '/');
	/* the userinfo ends at the last '@' before the host (unix: the path) */
	at = NULL;
	for (const char *q = p; *q && (slash == NULL || q < slash); q++)
		if (*q == '@')
			at = q;
	if (at != NULL)
	{
		const char *colon = memchr(p, ':', at - p);

		if (colon != NULL)
		{
			if (!copy_decoded(out->user, sizeof(out->user), p, colon - p) ||
				!copy_decoded(out->password, sizeof(out->password),
							  colon + 1, at - colon - 1))
			{
				*errmsg = pstrdup("the user or password in the URL is invalid");
				return false;
			}
		}
		else if (!copy_decoded(out->user, sizeof(out->user), p, at - p))
		{
			*errmsg = pstrdup("the user in the URL is invalid");
			return false;
		}
		p = at + 1;
	}

	if (out->scheme == URL_UNIX)
		return parse_unix_path(p, out, errmsg);

	/* host: name, IPv4 address, or [IPv6 address] */
	if (*p == '[')
	{
		const char *close = strchr(p, ']');

		if (close == NULL || close - p - 1 <= 0 ||
			close - p - 1 >= (int) sizeof(out->host))
		{
			*errmsg = pstrdup("the IPv6 address in the URL is invalid");
			return false;
		}
		memcpy(out->host, p + 1, close - p - 1);
		out->host[close - p - 1] = '\0';
		hostend = close + 1;
	}
	else
	{
		hostend = p;
		while (*hostend && *hostend != ':' && *hostend != '/')
			hostend++;
		if (hostend == p || hostend - p >= (int) sizeof(out->host))
		{
			*errmsg = pstrdup("the URL has no valid host");
			return false;
		}
		memcpy(out->host, p, hostend - p);
		out->host[hostend - p] = '\0';
	}
	p = hostend;

	if (*p == ':')
	{
		char	   *end;
		long		port;

		errno = 0;
		port = strtol(p + 1, &end, 10);
		/* digits only: strtol would take " 65" and "+65" */
		if (!isdigit((unsigned char) p[1]) ||
			end == p + 1 || errno != 0 || port < 1 || port > 65535 ||
			(*end != '\0' && *end != '/'))
		{
			*errmsg = pstrdup("the port in the URL is invalid");
			return false;
		}
		out->port = (int) port;
		p = end;
	}
	if (*p == '/')
	{
		char	   *end;
		long		db;

		p++;
		if (*p != '\0')
		{
			errno = 0;
			db = strtol(p, &end, 10);
			if (!isdigit((unsigned char) *p) ||
				end == p || *end != '\0' || errno != 0 || db < 0 ||
				db > INT_MAX)
			{
				*errmsg = pstrdup("the database number in the URL is invalid");
				return false;
			}
			out->db = (int) db;
		}
	}
	else if (*p != '\0')
	{
		*errmsg = pstrdup("the URL has trailing characters after the host");
		return false;
	}
	return true;
}

/*
 * The deployments with several hosts:
 *   redis-sentinel://[user[:password]@]host[:port][,host[:port]...][/db]#name,
 *   Lettuce's form (rediss-sentinel://: TLS to the sentinels and the nodes):
 *   the hosts are the sentinels (port 26379 by default); user, password and
 *   db are the data nodes'; name is the master's name in the sentinels.
 *   redis-cluster://[user[:password]@]host[:port][,host[:port]...]
 *   (rediss-cluster://: TLS): the hosts are seed nodes of a Redis Cluster
 *   (port 6379 by default), which has no database but 0 and no name.
 */
static bool
parse_multi_host(const char *url, bool cluster, RedisUrl *out,
				 RedisHostAddr *hosts, int *n, char **errmsg)
{
	const char *scheme = cluster ? "cluster" : "sentinel";
	bool		tls = strncmp(url, "rediss-", 7) == 0;
	const char *p = strstr(url, "://") + 3;
	const char *hash = strchr(p, '#');
	const char *slash;
	const char *at = NULL;
	const char *first;
	const char *hostsend;
	char		name[sizeof(out->master_name)];

	*n = 0;
	name[0] = '\0';
	if (cluster && hash != NULL)
	{
		*errmsg = pstrdup("a Cluster URL takes no #name");
		return false;
	}
	if (!cluster)
	{
		if (hash == NULL || hash[1] == '\0')
		{
			*errmsg = pstrdup("a Sentinel URL must end with #mastername");
			return false;
		}
		if (!copy_decoded(name, sizeof(name), hash + 1, strlen(hash + 1)))
		{
			*errmsg = pstrdup("the master name in the URL is invalid");
			return false;
		}
	}
	else
		hash = p + strlen(p);
	slash = memchr(p, '/', hash - p);
	if (cluster && slash != NULL)
	{
		*errmsg = pstrdup("a Cluster URL takes no /db: a Redis Cluster has only database 0");
		return false;
	}
	hostsend = slash ? slash : hash;
	for (const char *q = p; q < hostsend; q++)
		if (*q == '@')
			at = q;
	first = at ? at + 1 : p;

	for (const char *h = first; h <= hostsend;)
	{
		const char *end = h;
		bool		bracket = false;
		const char *portpart;
		RedisUrl	one;

		while (end < hostsend && (bracket || *end != ','))
		{
			if (*end == '[')
				bracket = true;
			else if (*end == ']')
				bracket = false;
			end++;
		}
		if (end == h)
		{
			*errmsg = psprintf("the URL has an empty %s address",
							   cluster ? "seed node" : "sentinel");
			return false;
		}
		if (*n >= RLOCK_MAX_HOSTS)
		{
			*errmsg = psprintf("the URL names more than %d %s",
							   RLOCK_MAX_HOSTS,
							   cluster ? "seed nodes" : "sentinels");
			return false;
		}
		if (!rconn_parse_url(psprintf("redis://%.*s", (int) (end - h), h),
							 &one, errmsg))
			return false;
		portpart = (*h == '[') ? memchr(h, ']', end - h) : h;
		strlcpy(hosts[*n].host, one.host, sizeof(hosts[*n].host));
		hosts[*n].port = (portpart && memchr(portpart, ':', end - portpart))
			? one.port : cluster ? RLOCK_REDIS_PORT : RLOCK_SENTINEL_PORT;
		(*n)++;
		h = end + 1;
	}

	/* user, password and db, parsed as a redis:// URL with a stand-in host */
	if (!rconn_parse_url(psprintf("%s://%.*s%s-node%.*s", tls ? "rediss" : "redis",
								  at ? (int) (at - p + 1) : 0, p, scheme,
								  slash ? (int) (hash - slash) : 0,
								  slash ? slash : ""),
						 out, errmsg))
		return false;
	out->kind = cluster ? NODE_CLUSTER : NODE_SENTINEL_MASTER;
	out->host[0] = '\0';
	out->port = 0;
	strlcpy(out->master_name, name, sizeof(out->master_name));
	return true;
}

/*
 * Parse any form rlock.redis_url takes: a standalone node, a Sentinel
 * deployment (then *nhosts > 0 and out is its master) or a Cluster (then
 * out->kind is NODE_CLUSTER and the hosts are its seeds).
 */
static bool
rconn_parse_deployment(const char *url, RedisUrl *out,
					   RedisHostAddr *hosts, int *nhosts,
					   char **errmsg)
{
	*nhosts = 0;
	if (url != NULL && (strncmp(url, "redis-sentinel://", 17) == 0 ||
						strncmp(url, "rediss-sentinel://", 18) == 0 ||
						strncmp(url, "redis-cluster://", 16) == 0 ||
						strncmp(url, "rediss-cluster://", 17) == 0))
	{
		memset(out, 0, sizeof(*out));
		return parse_multi_host(url, strstr(url, "-cluster://") != NULL,
								out, hosts, nhosts, errmsg);
	}
	if (url != NULL && strstr(url, "://") != NULL &&
		strncmp(url, "redis-", 6) == 0)
	{
		*errmsg = pstrdup("the only deployment schemes are \"redis-sentinel://\", \"rediss-sentinel://\", \"redis-cluster://\" and \"rediss-cluster://\"");
		return false;
	}
	return rconn_parse_url(url, out, errmsg);
}

/*
 * Where the password of url is, if it has one: [*start, *end).  The
 * userinfo is what precedes the last '@' before the path, as rconn_parse_url
 * reads it (a '#' in a password is the password's).
 */
static bool
find_password(const char *url, const char **start, const char **end)
{
	const char *p = strstr(url, "://");
	const char *slash;
	const char *at;
	const char *colon;

	if (p == NULL)
		return false;
	p += 3;
	slash = strchr(p, '/');
	at = NULL;
	for (const char *q = p; *q && (slash == NULL || q < slash); q++)
		if (*q == '@')
			at = q;
	if (at == NULL)
		return false;
	colon = memchr(p, ':', at - p);
	if (colon == NULL)
		return false;
	*start = colon + 1;
	*end = at;
	return true;
}

/* url with its password (if any) masked, palloc'd. */
static char *
mask_password(const char *url)
{
	const char *pw_start;
	const char *pw_end;

	if (find_password(url, &pw_start, &pw_end) && pw_end > pw_start)
		return psprintf("%.*s%s%s", (int) (pw_start - url), url,
						PASSWORD_MASK, pw_end);
	return pstrdup(url);
}

static RedisUrlConf *
new_conf(const RedisUrl *url, const RedisHostAddr *hosts,
		 int nhosts, const char *full)
{
	size_t		len = strlen(full);
	RedisUrlConf *conf = guc_extra_malloc(offsetof(RedisUrlConf, full) + len + 1);

	if (conf == NULL)
		return NULL;
	conf->url = *url;
	conf->nhosts = nhosts;
	if (nhosts > 0)
		memcpy(conf->hosts, hosts,
			   nhosts * sizeof(RedisHostAddr));
	memcpy(conf->full, full, len + 1);
	return conf;
}

bool
rlock_check_redis_url(char **newval, void **extra, GucSource source)
{
	RedisUrl	url;
	RedisHostAddr hosts[RLOCK_MAX_HOSTS];
	int			nhosts = 0;
	char	   *err = NULL;
	RedisUrlConf *conf;
	char	   *stored;

	if (*newval != NULL && strcmp(*newval, URL_STORED_VALUE) == 0)
	{
		/* a parallel worker restoring its leader's settings */
		if (rlock_redis_conf == NULL)
		{
			GUC_check_errmsg("invalid value for parameter \"rlock.redis_url\"");
			return false;
		}
		conf = new_conf(&rlock_redis_conf->url, rlock_redis_conf->hosts,
						rlock_redis_conf->nhosts, rlock_redis_conf->full);
		if (conf == NULL)
			return false;
		*extra = conf;
		return true;
	}

	if (*newval == NULL ||
		!rconn_parse_deployment(*newval, &url, hosts, &nhosts, &err))
	{
		/* our own message: PostgreSQL would quote the value, password and all */
		GUC_check_errmsg("invalid value for parameter \"rlock.redis_url\"");
		GUC_check_errdetail("Invalid Redis URL: %s.", err ? err : "no value");
		GUC_check_errhint("The forms are redis://[user[:password]@]host[:port][/db], rediss://... (TLS), unix://[user[:password]@]/path/redis.sock[?db=N], redis-sentinel://[user[:password]@]host[:port][,host[:port]...][/db]#mastername and redis-cluster://[user[:password]@]host[:port][,host[:port]...] (rediss-sentinel://, rediss-cluster://: TLS).");
		return false;
	}

	/* its nodes may be sent rlock.redis_password_file's secret */
	url.origin = URL_OF_REDIS_URL;
	conf = new_conf(&url, hosts, nhosts, *newval);
	if (conf == NULL)
		return false;
	*extra = conf;

	stored = guc_extra_malloc(strlen(URL_STORED_VALUE) + 1);
	if (stored == NULL)
		return false;
	strcpy(stored, URL_STORED_VALUE);
	guc_extra_free(*newval);
	*newval = stored;
	return true;
}

void
rlock_assign_redis_url(const char *newval, void *extra)
{
	const RedisUrlConf *conf = (const RedisUrlConf *) extra;

	/* PostgreSQL cannot log the change (it never sees one): do it here */
	if (!IsUnderPostmaster && rlock_redis_conf != NULL && conf != NULL &&
		strcmp(rlock_redis_conf->full, conf->full) != 0)
		ereport(LOG,
				(errmsg("parameter \"rlock.redis_url\" changed to \"%s\"",
						mask_password(conf->full))));
	if (rlock_redis_conf == NULL || conf == NULL ||
		strcmp(rlock_redis_conf->full, conf->full) != 0)
		net_settings_generation++;
	rlock_redis_conf = conf;
}

/* Assign hooks of the settings that say how to reach Redis. */
void
net_assign_string_setting(const char *newval, void *extra)
{
	net_settings_generation++;
}

void
net_assign_enum_setting(int newval, void *extra)
{
	net_settings_generation++;
}

/* SHOW rlock.redis_url: the URL with its password masked. */
const char *
rlock_show_redis_url(void)
{
	static char *shown = NULL;

	if (rlock_redis_conf == NULL)
		return "";
	if (shown != NULL)
		pfree(shown);
	shown = MemoryContextStrdup(TopMemoryContext,
								mask_password(rlock_redis_conf->full));
	return shown;
}
