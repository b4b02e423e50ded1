/*-------------------------------------------------------------------------
 *
 * connection.c
 *	  Redis connections: a backend-local pool of them, keyed by node and
 *	  use, each connected on first use, checked before every round trip and
 *	  closed when idle.
 *
 * This file and the connection_*.c beside it own all I/O with Redis, as
 * postgres_fdw's connection.c owns its connections.  A connection sits on
 * a transport of our own (transport.c: a non-blocking TCP or Unix socket,
 * TLS in transport_tls.c); hiredis only parses replies.  Every wait goes
 * through the one wait primitive (connection_wait.c), which sleeps on the
 * sockets and the process latch with a deadline, so cancel,
 * statement_timeout, lock_timeout and backend termination interrupt it, and
 * rlock.connect_timeout / rlock.command_timeout bound it
 * (connection_bounds.c).
 *
 * The files call each other in one direction, lowest first:
 * connection_command.c (building commands), connection_bounds.c (how
 * long), connection_error.c (why it failed, worded), connection_reply.c
 * (the bounded parser), connection_io.c (bytes), connection_wait.c (the
 * wait), connection_close.c (closing connections, idle ones included,
 * and counting the open ones), this file (the pool), connection_connect.c
 * (connecting and the handshake), connection_exchange.c (driving round trips) and
 * connection_pubsub.c (waiting for messages).
 *
 * A process has, per Redis node, at most one connection for commands and
 * scripts and one that waiters subscribe on (a subscribed RESP2 connection
 * cannot run commands).  Connections are made on first use, remember the
 * settings generation they were made with (a reload that changes how to
 * reach Redis makes them reconnect), and are closed once unused for
 * rlock.connection_idle_timeout (even in an idle session:
 * connection_close.c) or when their node is no longer the configured one;
 * rlock_stats.open_connections counts them.  A connection left with a
 * command in flight (an interrupt arrived mid round trip) is "busy" and is
 * discarded on its next use: its pending reply would be mistaken for the
 * next one.  A failure on a connection that had worked before (Redis
 * restarted, idle connection closed) is retried once on a fresh one, as
 * postgres_fdw does, when its commands cannot apply twice
 * (rcmd_resendable: a release carries a request id latch; an acquire
 * script is "once" unless it carries one, and a session's own acquire
 * whose reply was lost is settled by its count instead, holds_acquire.c);
 * a blip longer than that is ridden out by connection_retry.c.
 *
 * A Cluster's connection (NODE_CLUSTER) is in the pool too, but as a
 * handle only: it never has a socket.  The route layer, above, names it
 * (rconn_set_label), runs its round trips on the nodes' own connections and
 * leaves on it what the caller reads (its replies' memory, its failure).
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/fd.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "redis/redis.h"
#include "redis/redis_int.h"
#include "net/net.h"
#include "base/base.h"

/* The pool's array is connection_close.c's (its timer reads it) */
static int	maxpool = 0;

#define pool rconn_pool
#define npool rconn_npool

/* ----------------------------------------------------------------
 * The pool
 * ----------------------------------------------------------------
 */

static void
node_key(const RedisUrl *node, RconnRole role, char *buf, size_t size)
{
	if (node->kind == NODE_CLUSTER)
		snprintf(buf, size, "C%d|%s|%d", (int) node->scheme, node->user,
				 (int) role);
	else if (node->kind == NODE_SENTINEL_MASTER)
		snprintf(buf, size, "M%d|%s|%s|%d|%d", (int) node->scheme,
				 node->master_name, node->user, node->db, (int) role);
	else
		snprintf(buf, size, "%c%d|%s|%d|%s|%d|%d|%d",
				 node->kind == NODE_SENTINEL ? 'S' : 'N', (int) node->scheme,
				 node->host, node->port, node->user, node->db, (int) role,
				 (int) node->origin);
}

/*
 * The connection of this process to node for role (created, not connected).
 * Nodes of different settings never share one (node_key has the origin):
 * a socket authenticated with rlock.redis_url's password does not serve a
 * Redlock master that names the same server without it.
 */
RedisConn *
rconn_get(const RedisUrl *node, RconnRole role)
{
	char		key[sizeof(((RedisConn *) NULL)->key)];
	RedisConn  *conn = NULL;

	rconn_pool_enter();
	node_key(node, role, key, sizeof(key));
	for (int i = 0; i < npool; i++)
	{
		if (strcmp(pool[i]->key, key) == 0)
		{
			conn = pool[i];
			break;
		}
	}
	if (conn == NULL)
	{
		if (npool >= maxpool)
		{
			int			newmax = Max(4, maxpool * 2);

			pool = pool ? repalloc(pool, newmax * sizeof(RedisConn *))
				: MemoryContextAlloc(TopMemoryContext,
									 newmax * sizeof(RedisConn *));
			maxpool = newmax;
		}
		conn = MemoryContextAllocZero(TopMemoryContext, sizeof(RedisConn));
		conn->role = role;
		conn->nreplicas = -1;
		strlcpy(conn->key, key, sizeof(conn->key));
		conn->replycxt = AllocSetContextCreate(TopMemoryContext,
											   "rlock Redis replies",
											   ALLOCSET_SMALL_SIZES);
		rconn_idle_register();
		pool[npool++] = conn;
	}
	/* the password, which is not part of the key, may have changed */
	if (node->kind == NODE_CLUSTER)
	{
		/* routed (the route layer): never connected; it names it */
		conn->node = *node;
		return conn;
	}
	if (node->kind == NODE_SENTINEL_MASTER)
	{
		/* where it was located stays until it is located again */
		char		host[sizeof(conn->node.host)];
		int			port = conn->node.port;

		strlcpy(host, conn->node.host, sizeof(host));
		conn->node = *node;
		strlcpy(conn->node.host, host, sizeof(conn->node.host));
		conn->node.port = port;
		if (host[0] == '\0')
		{
			snprintf(conn->addr, sizeof(conn->addr), "master \"%s\"",
					 node->master_name);
			return conn;
		}
	}
	else
		conn->node = *node;
	if (conn->node.scheme == URL_UNIX)
		strlcpy(conn->addr, node->host, sizeof(conn->addr));
	else
		rconn_set_address(conn);
	return conn;
}


/* conn->addr from conn->node's host and port. */
void
rconn_set_address(RedisConn *conn)
{
	snprintf(conn->addr, sizeof(conn->addr),
			 strchr(conn->node.host, ':') ? "[%s]:%d" : "%s:%d",
			 conn->node.host, conn->node.port);
}

const char *
rconn_address(RedisConn *conn)
{
	return conn->addr;
}

/* Close a connection whose round trip failed, keeping why for reporting. */
void
rconn_discard_failed(RedisConn *conn)
{
	RconnFailure f = conn->failure;
	char		detail[sizeof(conn->errdetail)];

	strlcpy(detail, conn->errdetail, sizeof(detail));
	rconn_discard(conn);
	rconn_set_failure(conn, f, detail);
}

/*
 * DEL key in front of conn's next round trip, without a round trip of its
 * own (the unlock latch of a release that was answered: nothing will
 * replay that release now).  If the connection is lost first, the key's
 * own TTL removes it.  With apart, each key gets a DEL of its own: a
 * Cluster's node refuses one DEL over keys of several slots (CROSSSLOT),
 * and the keys of different locks are in different slots.
 */
/*
 * gcc's -fanalyzer (test/run analyze) reports copy as leaked where it is
 * stored in conn->deferred_del: a false positive (it loses track of a store
 * through the realloc'd array; storing straight into the slot does not help).
 * The array's keys are freed when sent (connection_exchange.c) or when the
 * connection is closed (connection_close.c).
 */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 10
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wanalyzer-malloc-leak"
#endif
void
rconn_defer_del(RedisConn *conn, const char *key, bool apart)
{
	char	   *copy;

	Assert(conn->node.kind != NODE_CLUSTER);	/* routed: the route layer */
	if (conn->ndeferred >= conn->maxdeferred)
	{
		int			newmax = Max(8, conn->maxdeferred * 2);
		char	  **arr = realloc(conn->deferred_del, newmax * sizeof(char *));

		if (arr == NULL)
			return;
		conn->deferred_del = arr;
		conn->maxdeferred = newmax;
	}
	copy = strdup(key);
	if (copy != NULL)
		conn->deferred_del[conn->ndeferred++] = copy;	/* analyzer: see above */
	conn->deferred_apart |= apart;
}
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 10
#pragma GCC diagnostic pop
#endif

/* ----------------------------------------------------------------
 * What the route layer reads and sets of a connection
 * ----------------------------------------------------------------
 */

/* The node conn serves (for a Sentinel's master: where it was located). */
const RedisUrl *
rconn_node(RedisConn *conn)
{
	return &conn->node;
}

/* Name conn in messages (a routed connection: by the route layer). */
void
rconn_set_label(RedisConn *conn, const char *label)
{
	strlcpy(conn->addr, label, sizeof(conn->addr));
}

/* Has conn no socket now? */
bool
rconn_is_closed(RedisConn *conn)
{
	return conn->state == CS_CLOSED;
}

/*
 * Learn, on each of conn's sockets from now on, which server answers
 * there (INFO server, in front of the first commands on the socket).
 */
void
rconn_identify(RedisConn *conn)
{
	conn->identify = true;
}

/*
 * The run_id of the server that answers on conn's socket now: NULL when
 * not known (no socket, or INFO not answered on it yet), "" when the
 * server did not tell.
 */
const char *
rconn_run_id(RedisConn *conn)
{
	return conn->identity_known ? conn->run_id : NULL;
}

/*
 * Has conn's server been silent since a round trip of it timed out (no
 * reply since, on any socket)?  An optional op (a Redlock's master) is then
 * not waited for once the others are done.
 */
bool
rconn_silent(RedisConn *conn)
{
	return conn->silent;
}

/*
 * conn's server is silent from now until a reply comes (rconn_silent),
 * probed after a pause (connection_parallel.c): a round trip of it timed
 * out, or another process of this server found it so (a new backend need
 * not pay a command timeout to learn what its neighbours know).
 */
void
rconn_mark_silent(RedisConn *conn)
{
	if (conn->silent)
		return;
	conn->silent = true;
	conn->silent_pause_ms = 500;	/* (doubled at the first probe) */
	conn->silent_probe_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
														1000);
}

/* Replicas of conn's node when last asked (-1: unknown). */
int
rconn_replicas(RedisConn *conn)
{
	return conn->nreplicas;
}

/*
 * Replace conn (a Sentinel's master) at its next use, which asks the
 * sentinels again; with avoid_here, not taking the node it is on now from
 * the first sentinel that still names it.
 */
void
rconn_relocate(RedisConn *conn, bool avoid_here)
{
	conn->demoted = true;
	if (avoid_here)
		strlcpy(conn->failed_at, conn->addr, sizeof(conn->failed_at));
}

/* The memory conn's replies live in, until its next round trip. */
MemoryContext
rconn_reply_context(RedisConn *conn)
{
	return conn->replycxt;
}

/* The node connection a routed subscriber connection is subscribed on. */
RedisConn *
rconn_target(RedisConn *conn)
{
	return conn->target;
}

void
rconn_set_target(RedisConn *conn, RedisConn *target)
{
	conn->target = target;
}
