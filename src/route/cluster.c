/*-------------------------------------------------------------------------
 *
 * cluster.c
 *	  Redis Cluster (redis-cluster:// URLs): the slot map asked, which node
 *	  serves a key now, which masters own slots, whether the cluster has
 *	  sharded pub/sub.
 *
 * A Cluster deployment gives the layers above one connection, as any other
 * deployment does: a "routed" connection (node kind NODE_CLUSTER) that
 * never has a socket of its own.  A round trip on it (route_run) sends each
 * command to the master of its key's hash slot (cluster_slot.c), all nodes
 * at once: cluster_route.c.  The map itself is learned in cluster_map.c;
 * this file answers from it, reading it first when it is not known.
 *
 * Waiters subscribe on the subscriber connection of their channel's node
 * (SSUBSCRIBE when releases are published with SPUBLISH: rlock.publish_mode,
 * route.c).
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "route/route.h"
#include "route/route_int.h"
#include "redis/redis.h"
#include "base/base.h"

/*
 * The connection (commands or subscriber) to the master of key's slot;
 * NULL when the map cannot be read (conn, the routed one, says why).
 */
RedisConn *
cluster_conn_for(RedisConn *conn, const char *key, size_t len, RconnRole role)
{
	ClusterMap *m = cluster_map();
	int			slot = cluster_slot_of(key, len);

	if (!cluster_ensure(conn))
		return NULL;
	if (m->owner[slot] < 0 && !cluster_map_load(conn))
		return NULL;
	if (m->owner[slot] < 0)
	{
		rconn_set_failure(conn, RF_CLUSTER,
						  psprintf("No node serves hash slot %d (the cluster is down).", slot));
		return NULL;
	}
	return cluster_map_conn(m, m->owner[slot], role);
}

/* The masters that own slots now (indexes into the map), for rlock_nodes. */
int
cluster_masters(RedisConn *conn, RedisConn ***conns)
{
	ClusterMap *m = cluster_map();
	bool	   *seen;
	int			n = 0;

	if (!cluster_ensure(conn))
		rconn_report(conn, ERROR, NULL);
	seen = palloc0((m->nnodes + 1) * sizeof(bool));
	*conns = palloc((m->nnodes + 1) * sizeof(RedisConn *));
	for (int s = 0; s < CLUSTER_SLOTS; s++)
		if (m->owner[s] >= 0 && !seen[m->owner[s]])
		{
			seen[m->owner[s]] = true;
			(*conns)[n++] = cluster_map_conn(m, m->owner[s], RCONN_COMMANDS);
		}
	return n;
}

/* The node that owns slot (an index for cluster_node), -1 when none. */
int
cluster_owner(int slot)
{
	ClusterMap *m = cluster_map();

	return m->valid ? m->owner[slot] : -1;
}

int
cluster_nnodes(void)
{
	return cluster_map()->nnodes;
}

RedisConn *
cluster_node(int idx, RconnRole role)
{
	return cluster_map_conn(cluster_map(), idx, role);
}

/* The commands connection of key's node if the map names one (no I/O). */
RedisConn *
cluster_known_conn(const char *key)
{
	ClusterMap *m = cluster_map();
	int			slot = cluster_slot_of(key, strlen(key));

	if (!m->valid || m->owner[slot] < 0)
		return NULL;
	return cluster_map_conn(m, m->owner[slot], RCONN_COMMANDS);
}

/*
 * host:port of the master of key's slot (palloc'd), reading the map if it
 * is not known yet; NULL when it cannot be read.
 */
char *
cluster_node_address(RedisConn *conn, const char *key)
{
	ClusterMap *m = cluster_map();
	int			slot = cluster_slot_of(key, strlen(key));

	if (!cluster_ensure(conn) || m->owner[slot] < 0)
		return NULL;
	return pstrdup(rconn_address(cluster_map_conn(m, m->owner[slot],
												  RCONN_COMMANDS)));
}

/*
 * Are releases published with SPUBLISH (and waited for with SSUBSCRIBE)?
 * rlock.publish_mode; "auto" means: on a Cluster that has sharded pub/sub
 * (Redisson's default), read from the map (read now if need be).
 */
bool
route_sharded_publish(void)
{
	switch (rlock_publish_mode)
	{
		case RLOCK_PUBLISH_SHARDED:
			return true;
		case RLOCK_PUBLISH_PLAIN:
			return false;
		default:
			if (!route_is_cluster())
				return false;
			(void) cluster_ensure(route_backend());
			return cluster_sharded();
	}
}

/* The commands connections of the masters that own slots now. */
int
route_cluster_masters(RedisConn ***conns)
{
	return cluster_masters(route_backend(), conns);
}
