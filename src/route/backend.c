/*-------------------------------------------------------------------------
 *
 * backend.c
 *	  The process's connections to the configured Redis (rlock.redis_url):
 *	  one for commands, one for waiting on release messages.
 *
 * Whatever the deployment (one node, a Sentinel's master, a Cluster), the
 * layers above see one commands connection and one subscriber connection,
 * asked for here and taken from the connection layer's pool anew at each
 * change of settings.  A Cluster's connection is a handle the connection
 * layer never connects: this layer names it by the URL's seeds and runs its
 * round trips (cluster_route.c).  The lowest file of the route layer: the
 * others ask it for the configured connections.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"

#include "route/route.h"
#include "route/route_int.h"
#include "redis/redis.h"
#include "net/net.h"

/* route_backend()'s answers, valid for one settings generation */
static RedisConn *backend_conn = NULL;
static RedisConn *backend_sub = NULL;
static uint64 backend_generation = 0;

/* The pool's connection to node for role, a Cluster's named. */
static RedisConn *
routed_get(const RedisUrl *node, RconnRole role)
{
	RedisConn  *conn = rconn_get(node, role);

	if (node->kind == NODE_CLUSTER)
		route_label_cluster(conn);
	return conn;
}

static RedisConn *
configured(RconnRole role)
{
	static RedisUrl none;

	if (backend_generation != net_settings_generation)
	{
		const RedisUrl *url = rlock_redis_conf ? &rlock_redis_conf->url : &none;

		backend_conn = routed_get(url, RCONN_COMMANDS);
		backend_sub = routed_get(url, RCONN_SUBSCRIBER);
		backend_generation = net_settings_generation;
	}
	return role == RCONN_COMMANDS ? backend_conn : backend_sub;
}

/* The process's command connection to the configured Redis. */
RedisConn *
route_backend(void)
{
	return configured(RCONN_COMMANDS);
}

/* The process's subscriber connection, for waiting on release messages. */
RedisConn *
route_backend_subscriber(void)
{
	return configured(RCONN_SUBSCRIBER);
}

/* A Cluster's routed connection's name in messages: the URL's seeds. */
void
route_label_cluster(RedisConn *conn)
{
	const RedisUrlConf *conf = rlock_redis_conf;
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "cluster ");
	for (int i = 0; conf != NULL && i < conf->nhosts; i++)
		appendStringInfo(&buf, strchr(conf->hosts[i].host, ':') ? "%s[%s]:%d" : "%s%s:%d",
						 i > 0 ? "," : "", conf->hosts[i].host, conf->hosts[i].port);
	rconn_set_label(conn, buf.data);
	pfree(buf.data);
}
