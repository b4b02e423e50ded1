/*-------------------------------------------------------------------------
 *
 * topology.c
 *	  Which node is the master: for a Sentinel deployment
 *	  (redis-sentinel:// URLs), asked of the sentinels and confirmed by the
 *	  node itself, followed through failovers, and shared by this server's
 *	  processes.
 *
 * A connection to "the master of <name>" (NODE_SENTINEL_MASTER) has no
 * address of its own: each time it connects, it asks the sentinels
 * (SENTINEL GET-MASTER-ADDR-BY-NAME), one after another, starting with the
 * one that answered last, each bounded by rlock.connect_timeout and
 * rlock.command_timeout, and connects to the node they name, whose ROLE
 * must say "master" (the connection layer queues ROLE with the handshake
 * and reads it).  A master that just failed is not taken
 * from the first sentinel that still names it: during a failover the
 * sentinels disagree for a moment, and the one that led the failover knows
 * first.
 *
 * Failover is followed three ways: a connection that breaks (the master
 * died) or is told READONLY or a ROLE other than master (it was demoted)
 * is replaced at its next use, which asks the sentinels again; the worker
 * asks them once a second (route_watch_topology) and re-points itself; and
 * the master last confirmed lives in shared memory with an epoch that is
 * bumped when it changes, so every backend's connections to the old master
 * are replaced at their next use even when nothing broke.  The process that
 * first confirms a new master counts the failover and logs it.
 *
 * The check before COMMIT also confirms the master with the sentinels
 * (master_confirm.c).
 *
 * Locating the master, recording the one confirmed and noticing that the
 * epoch moved happen inside a connection's own life (at its connect, in its
 * handshake, before its round trips), in the connection layer below, which
 * must not call up: topology_init registers them there as hooks
 * (rconn_set_route_hooks), the only ones the route layer registers.  The
 * connection keeps what it was told; the sentinels and the shared memory
 * stay here.
 *
 * The highest replica count each master ever reported is remembered in
 * shared memory: a master that reports fewer replicas than that (it was
 * cut off from them) is still waited on, and the acquisition is refused
 * when they do not acknowledge (SPEC 10).
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/timestamp.h"

#include "route/route.h"
#include "route/route_int.h"
#include "redis/redis.h"
#include "base/base.h"

/* How often the worker asks the sentinels where the master is. */
#define WATCH_INTERVAL_MS	1000

/* Masters whose highest replica count is remembered. */
#define MAX_REPLICA_MEMORY	128

typedef struct ReplicaMemory
{
	char		addr[300];		/* host:port or socket path, "" free */
	int			replicas;		/* the most replicas it ever reported */
} ReplicaMemory;

typedef struct TopologyShared
{
	slock_t		mutex;
	pg_atomic_uint64 epoch;		/* bumped when the master changes */
	char		master[300];	/* host:port last confirmed, "" none yet */
	int			nseen;			/* seen[0..nseen-1] are in use */
	ReplicaMemory seen[MAX_REPLICA_MEMORY]; /* under mutex */
} TopologyShared;

static TopologyShared *topo = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* The sentinel that answered last: asked first next time. */
static int	first_sentinel = 0;

/* When the worker last asked the sentinels. */
static TimestampTz last_watch = 0;

/* ----------------------------------------------------------------
 * Shared memory
 * ----------------------------------------------------------------
 */

static void
topology_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(TopologyShared)));
}

static void
topology_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	topo = ShmemInitStruct("rlock topology", sizeof(TopologyShared), &found);
	if (!found)
	{
		SpinLockInit(&topo->mutex);
		pg_atomic_init_u64(&topo->epoch, 1);
		topo->master[0] = '\0';
		topo->nseen = 0;
		memset(topo->seen, 0, sizeof(topo->seen));
	}
	LWLockRelease(AddinShmemInitLock);
}

void
topology_shmem_install(void)
{
	RLOCK_SHMEM_REQUEST(prev_shmem_request_hook, topology_shmem_request);
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = topology_shmem_startup;
}

static uint64
epoch_now(void)
{
	return topo ? pg_atomic_read_u64(&topo->epoch) : 0;
}

/* The topology's epoch now (0: no shared memory); a route hook. */
static uint64
topology_epoch(void)
{
	return epoch_now();
}

/*
 * The node at addr answered ROLE "master" in its handshake, as the master
 * named master_name: record it as this server's master, counting and
 * logging a change; returns the epoch now.  A route hook: never throws (it
 * runs mid-handshake).
 */
static uint64
master_confirmed(const char *master_name, const char *addr)
{
	char		old[sizeof(topo->master)];
	bool		changed = false;

	if (topo == NULL)
		return 0;
	SpinLockAcquire(&topo->mutex);
	if (strcmp(topo->master, addr) != 0)
	{
		strlcpy(old, topo->master, sizeof(old));
		strlcpy(topo->master, addr, sizeof(topo->master));
		if (old[0] != '\0')
		{
			pg_atomic_fetch_add_u64(&topo->epoch, 1);
			changed = true;
		}
	}
	SpinLockRelease(&topo->mutex);
	if (changed)
	{
		stats_count(RLOCK_STAT_FAILOVERS);
		rlock_event(LOG, RLOCK_EVENT_FAILOVER, NULL, NULL, NULL,
					"rlock: Redis master \"%s\" is now %s (was %s)",
					master_name, addr, old);
	}
	return epoch_now();
}

/*
 * The most replicas the master at addr ever reported, having just reported
 * now (-1: only look).  The table is small and only read when a master
 * reports none (or its ROLE is refused), written when it reports some.
 */
int
topology_replicas_seen(const char *addr, int now)
{
	int			most = Max(now, 0);
	int			i;

	if (topo == NULL || addr[0] == '\0')
		return most;
	SpinLockAcquire(&topo->mutex);
	/* (entries are only ever added, in order: every acquisition looks) */
	for (i = 0; i < topo->nseen; i++)
	{
		if (strcmp(topo->seen[i].addr, addr) == 0)
			break;
	}
	if (i < topo->nseen)
	{
		if (topo->seen[i].replicas < most)
			topo->seen[i].replicas = most;
		most = topo->seen[i].replicas;
	}
	else if (now > 0 && topo->nseen < MAX_REPLICA_MEMORY)
	{
		strlcpy(topo->seen[i].addr, addr, sizeof(topo->seen[i].addr));
		topo->seen[i].replicas = now;
		topo->nseen++;
	}
	SpinLockRelease(&topo->mutex);
	return most;
}

/* A master at addr reported n > 0 replicas; a route hook. */
static void
replicas_reported(const char *addr, int n)
{
	(void) topology_replicas_seen(addr, n);
}

/* ----------------------------------------------------------------
 * Asking the sentinels
 * ----------------------------------------------------------------
 */

/* Does rlock.redis_url name a deployment whose masters can move? */
bool
route_follows_failover(void)
{
	return rlock_redis_conf != NULL &&
		(rlock_redis_conf->url.kind == NODE_SENTINEL_MASTER ||
		 rlock_redis_conf->url.kind == NODE_CLUSTER);
}

/* Can the node conn talks to move (a Sentinel's master, a Cluster's)? */
bool
route_node_can_move(RedisConn *conn)
{
	RedisNodeKind kind = rconn_node(conn)->kind;

	return kind == NODE_SENTINEL_MASTER || kind == NODE_CLUSTER;
}

static bool
sentinel_deployment(void)
{
	return rlock_redis_conf != NULL &&
		rlock_redis_conf->url.kind == NODE_SENTINEL_MASTER;
}

typedef enum SentinelAnswer
{
	SENTINEL_NAMED,				/* it named the master */
	SENTINEL_UNKNOWN,			/* it knows no master of that name */
	SENTINEL_FAILED				/* no answer, or an error */
} SentinelAnswer;

/*
 * Ask sentinel i of conf where master name is (no round trip past cap, a
 * timestamp or 0).
 */
static SentinelAnswer
ask_sentinel(const RedisUrlConf *conf, int i, TimestampTz cap, char *host,
			 size_t hostsize, int *port, StringInfo why)
{
	RedisUrl	node;
	RedisConn  *s;
	RedisCmd	cmd;
	RconnOp		op;
	RReply	   *r;
	const char *bad;

	memset(&node, 0, sizeof(node));
	node.scheme = conf->url.scheme;
	node.kind = NODE_SENTINEL;
	node.origin = URL_OF_REDIS_URL;	/* rlock.sentinel_password_file */
	strlcpy(node.host, conf->hosts[i].host, sizeof(node.host));
	node.port = conf->hosts[i].port;
	s = rconn_get(&node, RCONN_COMMANDS);

	rcmd_init(&cmd);
	rcmd_str(&cmd, "SENTINEL");
	rcmd_str(&cmd, "GET-MASTER-ADDR-BY-NAME");
	rcmd_str(&cmd, conf->url.master_name);
	memset(&op, 0, sizeof(op));
	op.conn = s;
	op.cmds = &cmd;
	op.ncmds = 1;
	rconn_set_deadline_cap(s, cap != 0 ? cap : DT_NOEND);
	rconn_run_parallel(&op, 1);
	rconn_set_deadline_cap(s, DT_NOEND);
	if (!op.ok)
	{
		const char *detail = rconn_failure_detail(s);
		RconnFailure f = rconn_failure(s);

		appendStringInfo(why, "%s%s: %s", why->len ? "; " : "",
						 rconn_address(s), detail[0] ? detail :
						 f == RF_TIMEOUT || f == RF_CONNECT_TIMEOUT ?
						 "no answer in time" : "no answer");
		return SENTINEL_FAILED;
	}
	r = op.replies[0];
	if (r->type == RREPLY_NIL)
		return SENTINEL_UNKNOWN;
	if (r->type == RREPLY_ERROR)
		bad = r->str;
	else if (r->type != RREPLY_ARRAY || r->elements != 2 ||
			 r->element[0]->type != RREPLY_STRING ||
			 r->element[1]->type != RREPLY_STRING)
		bad = "not an array of a host and a port";
	else
	{
		RReply	   *p = r->element[1];
		char	   *end = NULL;
		long		n = 0;

		errno = 0;
		if (p->len > 0 && p->len <= 5 && isdigit((unsigned char) p->str[0]))
			n = strtol(p->str, &end, 10);
		if (end == NULL || end != p->str + p->len || errno != 0)
			bad = "the port is not a number";
		else
			bad = route_bad_address(r->element[0]->str, r->element[0]->len,
									hostsize, n);
		if (bad == NULL)
		{
			strlcpy(host, r->element[0]->str, hostsize);
			*port = (int) n;
			return SENTINEL_NAMED;
		}
	}
	appendStringInfo(why, "%s%s: %s%.200s", why->len ? "; " : "",
					 rconn_address(s),
					 r->type == RREPLY_ERROR ? "" :
					 "it named a master address that makes no sense: ", bad);
	return SENTINEL_FAILED;
}

/*
 * Ask the sentinels, one after another, where the master is.  A master
 * named "avoid" (host:port that just failed) is taken only when no
 * sentinel names another.  On failure sets *failure and *detail.
 */
static bool
ask_sentinels(const char *avoid, char *host, size_t hostsize, int *port,
			  RconnFailure *failure, char **detail)
{
	const RedisUrlConf *conf = rlock_redis_conf;
	int			n = conf ? conf->nhosts : 0;
	int			nunknown = 0;
	char		fallback[256] = "";
	int			fallback_port = 0;
	StringInfoData why;
	TimestampTz cap = 0;

	/* where nothing can interrupt us, all the sentinels share one bound */
	if (rconn_uninterruptible())
		cap = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
										  RLOCK_UNINTERRUPTIBLE_CAP_MS);
	initStringInfo(&why);
	for (int k = 0; k < n; k++)
	{
		int			i = (first_sentinel + k) % n;
		char		addr[300];

		switch (ask_sentinel(conf, i, cap, host, hostsize, port, &why))
		{
			case SENTINEL_NAMED:
				snprintf(addr, sizeof(addr),
						 strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, *port);
				if (avoid != NULL && avoid[0] != '\0' &&
					strcmp(addr, avoid) == 0)
				{
					if (fallback[0] == '\0')
					{
						strlcpy(fallback, host, sizeof(fallback));
						fallback_port = *port;
					}
					continue;
				}
				first_sentinel = i;
				return true;
			case SENTINEL_UNKNOWN:
				nunknown++;
				break;
			case SENTINEL_FAILED:
				break;
		}
	}
	if (fallback[0] != '\0')
	{
		strlcpy(host, fallback, hostsize);
		*port = fallback_port;
		return true;
	}
	*failure = RF_NO_MASTER;
	if (n == 0)
		*detail = pstrdup("rlock.redis_url names no sentinel.");
	else if (nunknown > 0)
		*detail = psprintf("No sentinel knows a master named \"%s\" (%d of %d sentinels answered).%s%s",
						   conf->url.master_name, nunknown, n,
						   why.len ? " " : "", why.data);
	else
		*detail = psprintf("No sentinel answered: %s.", why.data);
	return false;
}

/*
 * The background worker, every loop: at most once a second, ask the
 * sentinels where the master is, and when it moved, reconnect the worker's
 * connection to it now (confirming it, which tells every backend through
 * shared memory).  Failures are left to the next time; never throws for
 * Redis's sake.
 */
void
route_watch_topology(void)
{
	RedisConn  *conn;
	char		host[256];
	char		addr[300];
	int			port;
	RconnFailure failure;
	char	   *detail;
	TimestampTz now = GetCurrentTimestamp();

	if (!sentinel_deployment() ||
		!TimestampDifferenceExceeds(last_watch, now, WATCH_INTERVAL_MS))
		return;
	last_watch = now;
	conn = route_backend();
	if (!ask_sentinels(NULL, host, sizeof(host), &port, &failure, &detail))
	{
		ereport(DEBUG1,
				(errmsg_internal("rlock watchdog: could not ask the sentinels: %s",
								 detail)));
		return;
	}
	snprintf(addr, sizeof(addr), strchr(host, ':') ? "[%s]:%d" : "%s:%d",
			 host, port);
	if (!rconn_is_closed(conn) && strcmp(addr, rconn_address(conn)) == 0)
		return;
	rconn_relocate(conn, false);	/* replaced now */
	(void) rconn_ensure(conn);
}

/* host:port of the master now (palloc'd), or NULL when not known yet. */
char *
route_master_address(void)
{
	RedisConn  *conn = route_backend();

	if (topo != NULL && sentinel_deployment())
	{
		char		addr[sizeof(topo->master)];

		SpinLockAcquire(&topo->mutex);
		strlcpy(addr, topo->master, sizeof(addr));
		SpinLockRelease(&topo->mutex);
		if (addr[0] != '\0')
			return pstrdup(addr);
	}
	if (rconn_node(conn)->kind == NODE_SENTINEL_MASTER &&
		rconn_node(conn)->host[0] == '\0')
		return NULL;
	return pstrdup(rconn_address(conn));
}

/*
 * Register the moments of a connection's life that concern the topology
 * with the connection layer (route_init, from _PG_init).
 */
void
topology_init(void)
{
	static const RconnRouteHooks hooks = {
		.locate_master = ask_sentinels,
		.topology_epoch = topology_epoch,
		.master_confirmed = master_confirmed,
		.replicas_reported = replicas_reported,
	};

	rconn_set_route_hooks(&hooks);
}
