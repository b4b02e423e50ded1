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
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "compat.h"
#include "connection.h"
#include "redlock.h"
#include "rlock.h"
#include "url.h"

/* The parsed setting: the GUC machinery keeps it (guc_malloc'd). */
typedef struct RedlockConf
{
	int			n;
	RedisUrl	masters[REDLOCK_MAX_MASTERS];
} RedlockConf;

static const RedlockConf *redlock_conf = NULL;

/*
 * The masters' command connections, looked up in the pool once per value
 * of the setting (pool entries live as long as the process).
 */
static RedisConn *master_conns[REDLOCK_MAX_MASTERS];
static bool master_conns_valid = false;

bool
rlock_check_redlock_urls(char **newval, void **extra, GucSource source)
{
	RedlockConf *conf;
	char	   *copy;
	char	   *item;
	char	   *save = NULL;

	conf = guc_extra_malloc(sizeof(RedlockConf));
	if (conf == NULL)
		return false;
	memset(conf, 0, sizeof(RedlockConf));
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
		if (conf->n >= REDLOCK_MAX_MASTERS)
		{
			GUC_check_errdetail("rlock.redlock_urls names more than %d masters.",
								REDLOCK_MAX_MASTERS);
			guc_extra_free(conf);
			return false;
		}
		if (strncmp(item, "redis-", 6) == 0 || strncmp(item, "rediss-", 7) == 0)
		{
			GUC_check_errdetail("Master %d of rlock.redlock_urls is a Sentinel or Cluster URL; a Redlock is taken on independent standalone masters (redis://, rediss:// or unix://).",
								conf->n + 1);
			guc_extra_free(conf);
			return false;
		}
		if (!rconn_parse_url(item, &conf->masters[conf->n], &err))
		{
			GUC_check_errdetail("Master %d of rlock.redlock_urls: %s.",
								conf->n + 1, err);
			guc_extra_free(conf);
			return false;
		}
		conf->n++;
	}
	*extra = conf;
	return true;
}

void
rlock_assign_redlock_urls(const char *newval, void *extra)
{
	const RedlockConf *conf = extra;

	/* a reload that changes nothing keeps the connections */
	if (redlock_conf == NULL || conf == NULL ||
		memcmp(redlock_conf, conf, sizeof(RedlockConf)) != 0)
		rconn_assign_string_setting(newval, extra);
	redlock_conf = conf;
	master_conns_valid = false;
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
