/*-------------------------------------------------------------------------
 *
 * route.c
 *	  The routed entry points: what the layers above call to run commands,
 *	  connect, defer a DEL and wait for messages on the configured Redis,
 *	  whatever the deployment; each goes to a Cluster's routing or straight
 *	  to the one node's connection.
 *
 * Routing sits above the single-node connection: the connection layer
 * (src/redis) serves one node and never asks a router.  A Cluster's
 * connection is a handle (NODE_CLUSTER) that layer never connects; every
 * call that may be given one comes through here, which sends it to
 * cluster_route.c, cluster.c (the node of a key) or the node connection's
 * own function.  On every other connection the cost is one test.
 *
 * Pub/sub is routed here too: a waiter in a Cluster subscribes on the
 * subscriber connection of its channel's node (every channel of a lock
 * shares the lock's slot), leaving the one it used before, and follows a
 * MOVED answer to where the slot went; a sharded subscription the server
 * drops (the slot moved away) makes us read the map again.  Where the
 * master can move (Sentinel, Cluster), a subscription that breaks is
 * retried until the waiter's deadline, so a waiter rides out a failover and
 * listens on the new master.
 *
 * route_init, from _PG_init, sets the connection layer up (rconn_init)
 * and registers the topology's hooks with it (topology.c says which and
 * why); route_shmem_install asks for the layer's shared memory.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/timestamp.h"

#include "route/route.h"
#include "route/route_int.h"
#include "redis/redis.h"
#include "base/base.h"

/* Longest pause between two attempts to re-subscribe during a failover. */
#define RESUBSCRIBE_PAUSE_MS	100
/* MOVED answers one subscription follows before it is an ERROR. */
#define MAX_SUBSCRIBE_MOVES		5

/* Set the connection layer up; register what it must be told from here. */
void
route_init(void)
{
	rconn_init();
	topology_init();
}

/*
 * Ask for the shared memory of this layer (when preloaded): a Sentinel
 * deployment's topology, the Redlock masters found silent.
 */
void
route_shmem_install(void)
{
	topology_shmem_install();
	redlock_silence_shmem_install();
}

/* Is conn a Cluster's routed connection (no socket of its own)? */
static inline bool
routed(RedisConn *conn)
{
	return rconn_node(conn)->kind == NODE_CLUSTER;
}

/* ----------------------------------------------------------------
 * Round trips
 * ----------------------------------------------------------------
 */

/*
 * Run ncmds commands pipelined on conn (for a Cluster: each on its key's
 * node, cluster_route.c); on success *replies points at ncmds replies
 * owned by the connection (valid until its next use).  On failure reports
 * at elevel (returning false when elevel < ERROR).
 */
bool
route_run(RedisConn *conn, RedisCmd *cmds, int ncmds, RReply ***replies,
		  int elevel, const char *what)
{
	if (routed(conn))
		return cluster_run(conn, cmds, ncmds, replies, elevel, what);
	return rconn_run(conn, cmds, ncmds, replies, elevel, what);
}

/*
 * Run one command; ERROR on failure.  The reply belongs to the connection
 * (to the routed one, for a Cluster).
 */
RReply *
route_run1(RedisConn *conn, RedisCmd *cmd, const char *what)
{
	RReply	  **replies = NULL;

	route_run(conn, cmd, 1, &replies, ERROR, what);
	return replies[0];
}

/*
 * Connect now if not connected (ERROR on failure), so that a caller can tell
 * "Redis never saw the command" apart from "the command may have run"; for
 * a Cluster, make sure the slot map is known.
 */
void
route_ready(RedisConn *conn, const char *what)
{
	if (routed(conn))
	{
		if (!cluster_ensure(conn))
			rconn_report(conn, ERROR, what);
		return;
	}
	rconn_ready(conn, what);
}

/* route_ready, for a Cluster on the node that serves key. */
void
route_ready_for(RedisConn *conn, const char *key, const char *what)
{
	if (!routed(conn))
	{
		rconn_ready(conn, what);
		return;
	}
	cluster_ready_for(conn, key, what);
}

/*
 * DEL key in front of conn's next round trip, without a round trip of its
 * own; for a Cluster on the node of the key's slot, if the map names it (no
 * I/O).
 */
void
route_defer_del(RedisConn *conn, const char *key)
{
	if (routed(conn))
	{
		conn = cluster_known_conn(key);
		if (conn != NULL)
			rconn_defer_del(conn, key, true);
		return;
	}
	rconn_defer_del(conn, key, false);
}

/*
 * Replicas that must acknowledge an acquisition of key on conn (0: do not
 * wait).  In a Cluster: those of the master of key's slot, which is
 * connected now if it never was (its ROLE tells).
 */
int
route_acks_wanted(RedisConn *conn, const char *key)
{
	if (rlock_replica_acks <= 0)
		return 0;
	if (routed(conn))
	{
		conn = cluster_conn_for(conn, key, strlen(key), RCONN_COMMANDS);
		if (conn == NULL)
			return 0;			/* the acquisition fails the same way */
		if (rconn_is_closed(conn) && rconn_replicas(conn) < 0)
			(void) rconn_ensure(conn);
	}
	/* a master that lost its replicas is still waited on: they must answer */
	if (rconn_replicas(conn) <= 0 &&
		topology_replicas_seen(rconn_address(conn), -1) <= 0)
		return 0;
	return rlock_replica_acks;
}

/* host:port of the node key lives on (palloc'd), or NULL when not known. */
char *
route_node_address(const char *key)
{
	if (route_is_cluster())
		return cluster_node_address(route_backend(), key);
	return route_master_address();
}

/* ----------------------------------------------------------------
 * Publish/subscribe
 * ----------------------------------------------------------------
 */

/*
 * The node connection a subscriber connection listens on: itself, or for
 * a Cluster's routed one the node it is subscribed on now (NULL: none).
 */
static RedisConn *
subscribed_node(RedisConn *sub)
{
	return routed(sub) ? rconn_target(sub) : sub;
}

/*
 * Subscribe the subscriber connection to channel (and to nothing else).
 * Reconnects as needed; ERROR on failure.  Messages of channels we were
 * subscribed to before are skipped.  Where the master can move (Sentinel,
 * Cluster), a connection failure is retried until retry_until, a pause
 * apart, so that a waiter rides out a failover (DT_NOEND: as long as it
 * waits).  A subscription to channel kept from the last wait
 * (route_keep_subscription) is resumed without a round trip, what arrived
 * meanwhile skipped.  False when the server refused it with an error reply
 * (RSUB_REFUSED, a WARNING said so): the caller does without messages.
 */
bool
route_subscribe(RedisConn *sub, const char *channel, const char *what,
				TimestampTz retry_until)
{
	int			moves = 0;
	RedisConn  *kept = subscribed_node(sub);

	/* a subscription kept from the last wait on channel: no round trip */
	if (kept != NULL &&
		rconn_resume_subscription(kept, channel, route_sharded_publish()))
		return true;

	for (;;)
	{
		TimestampTz now;
		RedisConn  *node = sub;
		RconnSubResult res = RSUB_FAILED;
		char	   *moved = NULL;

		if (routed(sub))
		{
			RedisConn  *target = rconn_target(sub);

			node = cluster_conn_for(sub, channel, strlen(channel),
									RCONN_SUBSCRIBER);
			if (target != NULL && target != node)
				rconn_unsubscribe_nowait(target);
			rconn_set_target(sub, node);
		}
		if (node != NULL)
			res = rconn_subscribe_once(node, channel, what,
									   route_sharded_publish(), &moved);
		if (res == RSUB_OK)
			return true;
		if (res == RSUB_REFUSED)
			return false;
		if (res == RSUB_MOVED)
		{
			/* a Cluster's slot that moved: subscribe where it went */
			cluster_note_moved(moved);
			pfree(moved);
			if (++moves <= MAX_SUBSCRIBE_MOVES)
				continue;
		}
		if (routed(sub))
			cluster_map_stale();	/* the node may have failed over */
		if (res == RSUB_MOVED)
			rconn_set_failure(node, RF_CLUSTER,
							  psprintf("The subscription to channel \"%s\" was redirected more than %d times.",
									   channel, MAX_SUBSCRIBE_MOVES));
		now = GetCurrentTimestamp();
		if (!route_follows_failover() || now >= retry_until)
			rconn_report(node != NULL ? node : sub, ERROR, what);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 RESUBSCRIBE_PAUSE_MS, RLOCK_WAIT_EVENT);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * Wait for a message on the subscribed channel until deadline.
 * Returns 1 when a message arrived, 2 when the process latch was set
 * (another waiter of this server passed the turn on, waitqueue.c), 0 on
 * timeout, -1 when the connection failed (it is then discarded; the caller
 * resubscribes).
 */
int
route_wait_message(RedisConn *sub, TimestampTz deadline)
{
	int			rc;

	sub = subscribed_node(sub);
	if (sub == NULL)
		return -1;
	rc = rconn_wait_message(sub, deadline);
	if (rc == RCONN_MSG_DROPPED)
	{
		/* the slot moved away: subscribe again where it went */
		cluster_map_stale();
		return -1;
	}
	return rc;
}

/*
 * The text of the message route_wait_message last returned 1 for ("" when
 * none, or when the connection has changed since).
 */
const char *
route_last_message(RedisConn *sub)
{
	sub = subscribed_node(sub);
	if (sub == NULL)
		return "";
	return rconn_last_message(sub);
}

/*
 * Keep the subscription past the wait that made it: the next
 * route_subscribe to the same channel resumes it without a round trip.
 * Never throws.
 */
void
route_keep_subscription(RedisConn *sub)
{
	sub = subscribed_node(sub);
	if (sub == NULL)
		return;
	rconn_keep_subscription(sub);
}

/*
 * Skip the messages that arrived while the waiter did not listen: false
 * when the subscription is gone (the caller subscribes again).
 */
bool
route_skip_messages(RedisConn *sub)
{
	sub = subscribed_node(sub);
	if (sub == NULL)
		return false;
	return rconn_skip_messages(sub);
}

/*
 * Ask to leave the channel without waiting for the answer; the next
 * subscription skips whatever arrives meanwhile.  Never throws.
 */
void
route_unsubscribe_nowait(RedisConn *sub)
{
	sub = subscribed_node(sub);
	if (sub == NULL)
		return;
	rconn_unsubscribe_nowait(sub);
}
