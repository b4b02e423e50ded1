/*-------------------------------------------------------------------------
 *
 * redlock.c
 *	  rlock.redlock_urls: the independent masters a Redlock is taken on,
 *	  their connections, the round trip that asks all of them at once, and
 *	  what a majority of them is.
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
 * and the first acquisition over each connection asks the server's run_id
 * in the same round trip, so that two names no setting could tell apart
 * (a TCP port and a Unix socket of one server) fail closed.  Passwords
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

/* One master's identity as far as the check hook can tell. */
typedef struct MasterIdent
{
	bool		unix_socket;
	int			port;
	int			naddrs;
	char		addrs[REDLOCK_MAX_ADDRS][INET6_ADDRSTRLEN + 1];
} MasterIdent;

/*
 * The masters' command connections, looked up in the pool once per value
 * of the setting (pool entries live as long as the process).
 */
static RedisConn *master_conns[REDLOCK_MAX_MASTERS];
static bool master_conns_valid = false;

/*
 * Who answers on each master's command connection: the server's run_id
 * (INFO server), asked once per socket, in the first acquisition's round
 * trip over it.  Two masters with one run_id are one server, whatever
 * names or addresses the setting gave them (redlock_run_identified).
 */
#define RUN_ID_LEN	40
static uint64 identified_incarnation[REDLOCK_MAX_MASTERS];
static char run_ids[REDLOCK_MAX_MASTERS][RUN_ID_LEN + 1];

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
	master_conns_valid = false;
	memset(identified_incarnation, 0, sizeof(identified_incarnation));
	memset(run_ids, 0, sizeof(run_ids));
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

/* The command connections of the masters, in conns (REDLOCK_MAX_MASTERS). */
int
redlock_masters(RedisConn **conns, const char *name)
{
	redlock_require_configured(name);
	if (!master_conns_valid)
	{
		for (int i = 0; i < redlock_conf->n; i++)
			master_conns[i] = rconn_get(&redlock_conf->masters[i],
										RCONN_COMMANDS);
		master_conns_valid = true;
	}
	memcpy(conns, master_conns, redlock_conf->n * sizeof(RedisConn *));
	return redlock_conf->n;
}

/* The subscriber connection of one master (a waiter listens there). */
RedisConn *
redlock_subscriber(int master)
{
	Assert(master >= 0 && master < redlock_num_masters());
	return rconn_get(&redlock_conf->masters[master], RCONN_SUBSCRIBER);
}

RconnOp *
redlock_run(RedisConn **conns, int n, RedisCmd *cmds, int ncmds,
			TimestampTz cap)
{
	RconnOp    *ops = palloc0(n * sizeof(RconnOp));

	for (int i = 0; i < n; i++)
	{
		ops[i].conn = conns[i];
		ops[i].cmds = cmds;
		ops[i].ncmds = ncmds;
		rconn_set_deadline_cap(conns[i], cap);
	}
	rconn_run_parallel(ops, n);
	for (int i = 0; i < n; i++)
		rconn_set_deadline_cap(conns[i], DT_NOEND);
	return ops;
}

/*
 * redlock_run of one command on every master (conns: redlock_masters'),
 * with INFO server first on each connection not identified yet.  When two
 * masters turn out to be one server, *dup_a < *dup_b name them (else both
 * are -1): the caller gives back what the command did and fails closed.
 */
RconnOp *
redlock_run_identified(RedisConn **conns, int n, RedisCmd *cmd,
					   int *dup_a, int *dup_b)
{
	RconnOp    *ops = palloc0(n * sizeof(RconnOp));
	RedisCmd   *pairs = palloc(n * 2 * sizeof(RedisCmd));
	bool		asked[REDLOCK_MAX_MASTERS];

	*dup_a = *dup_b = -1;
	for (int i = 0; i < n; i++)
	{
		RedisConn  *conn = conns[i];

		asked[i] = !rconn_is_ready(conn) ||
			rconn_incarnation(conn) != identified_incarnation[i];
		ops[i].conn = conn;
		ops[i].cmds = cmd;
		ops[i].ncmds = 1;
		if (asked[i])
		{
			rcmd_init(&pairs[2 * i]);
			rcmd_str(&pairs[2 * i], "INFO");
			rcmd_str(&pairs[2 * i], "server");
			pairs[2 * i + 1] = *cmd;
			ops[i].cmds = &pairs[2 * i];
			ops[i].ncmds = 2;
		}
	}
	rconn_run_parallel(ops, n);
	for (int i = 0; i < n; i++)
	{
		RReply	   *info;
		const char *p;

		if (!asked[i] || !ops[i].ok)
			continue;
		info = ops[i].replies[0];
		ops[i].replies++;		/* the caller's command's reply first */
		ops[i].cmds = cmd;
		ops[i].ncmds = 1;
		identified_incarnation[i] = rconn_incarnation(conns[i]);
		run_ids[i][0] = '\0';
		if (info->type != RREPLY_STRING ||
			(p = strstr(info->str, "run_id:")) == NULL)
			continue;			/* not told (ACL): not compared */
		p += 7;
		if (strspn(p, "0123456789abcdefABCDEF") == RUN_ID_LEN)
		{
			memcpy(run_ids[i], p, RUN_ID_LEN);
			run_ids[i][RUN_ID_LEN] = '\0';
		}
	}
	for (int i = 0; i < n && *dup_a < 0; i++)
	{
		if (run_ids[i][0] == '\0' ||
			identified_incarnation[i] != rconn_incarnation(conns[i]))
			continue;
		for (int j = 0; j < i; j++)
		{
			if (run_ids[j][0] != '\0' &&
				identified_incarnation[j] == rconn_incarnation(conns[j]) &&
				strcmp(run_ids[i], run_ids[j]) == 0)
			{
				*dup_a = j;
				*dup_b = i;
				break;
			}
		}
	}
	return ops;
}

/*
 * Did conn's last round trip fail without a word from its server (no
 * answer in time, the connection broke)?  Such a master may be alive, and
 * may yet grant: it is not counted as refusing the connection.
 */
bool
redlock_failed_silently(RedisConn *conn)
{
	RconnFailure f = rconn_failure(conn);

	return f == RF_TIMEOUT || f == RF_CONNECT_TIMEOUT || f == RF_LOST;
}
