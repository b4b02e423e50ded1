/*-------------------------------------------------------------------------
 *
 * route/route_int.h
 *	  What the files of the route layer share among themselves: the slot
 *	  map of a Cluster, the topology of a Sentinel deployment, the checks
 *	  of what servers say.  Nothing outside src/route/ sees it.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_ROUTE_INT_H
#define RLOCK_ROUTE_INT_H

#include "route/route.h"

#define CLUSTER_SLOTS		16384
#define MAX_CLUSTER_NODES	256

/* backend.c: the configured connections */
extern void route_label_cluster(RedisConn *conn);

/* redlock_conf.c and redlock.c: the setting, and its masters' connections */
extern const RedisUrl *redlock_master_url(int i);

/* redlock_silence.c: masters found silent, shared by this server's processes */
extern void redlock_silence_shmem_install(void);
extern void redlock_silence_apply(RedisConn **conns, const int *master, int n);
extern void redlock_silence_record(RedisConn **conns, const int *master,
								   const RconnOp *ops, int n);

/* cluster_check.c: a server's word, checked */
extern const char *route_bad_address(const char *host, size_t len,
									 size_t hostsize, long long port);
extern const char *cluster_bad_slot_range(const RReply *e);

/* a MOVED or ASK answer, read (cluster_check.c) */
typedef struct ClusterRedirect
{
	int			slot;
	const char *host;			/* points into the answer; not terminated */
	size_t		hostlen;
	int			port;
	bool		unknown;		/* no address given: read the map again */
} ClusterRedirect;

extern bool cluster_parse_redirect(const char *err, ClusterRedirect *out);

/* topology.c: a Sentinel deployment's master */
extern void topology_init(void);
extern void topology_shmem_install(void);
extern int	topology_replicas_seen(const char *addr, int now);

/* cluster_slot.c: hash slots */
extern int	cluster_slot_of(const char *key, size_t len);

/* cluster_map.c: the slot map, learned */
typedef struct ClusterNode
{
	RedisUrl	url;
	RedisConn  *conn;			/* commands connection, once asked for */
	RedisConn  *sub;			/* subscriber connection, once asked for */
} ClusterNode;

typedef struct ClusterMap
{
	uint64		generation;		/* net_settings_generation when read */
	bool		valid;
	bool		stale;			/* read it again before the next round trip */
	bool		sharded;		/* the cluster knows SPUBLISH */
	int			nnodes;
	int			maxnodes;
	ClusterNode *nodes;			/* grown as nodes are learned */
	int16		owner[CLUSTER_SLOTS];	/* index in nodes, -1 none */
} ClusterMap;

extern ClusterMap *cluster_map(void);
extern RedisConn *cluster_map_conn(ClusterMap *m, int i, RconnRole role);
extern bool cluster_map_load(RedisConn *conn);
extern bool cluster_ensure(RedisConn *conn);
extern void cluster_map_stale(void);
extern bool cluster_map_hopeless(void);
extern bool cluster_sharded(void);
extern void cluster_note_moved(const char *err);
extern bool cluster_redirect_target(const char *err, int *slot, int *node);
extern void cluster_refresh_if_stale(RedisConn *conn);
extern bool cluster_failover_explains(RconnFailure f);

/* cluster.c: the slot map, asked */
extern RedisConn *cluster_conn_for(RedisConn *conn, const char *key,
								   size_t len, RconnRole role);
extern RedisConn *cluster_known_conn(const char *key);
extern char *cluster_node_address(RedisConn *conn, const char *key);
extern int	cluster_masters(RedisConn *conn, RedisConn ***conns);
extern int	cluster_owner(int slot);
extern int	cluster_nnodes(void);
extern RedisConn *cluster_node(int idx, RconnRole role);

/* cluster_route.c: routed round trips */
extern bool cluster_run(RedisConn *conn, RedisCmd *cmds, int ncmds,
						RReply ***replies, int elevel, const char *what);
extern void cluster_ready_for(RedisConn *conn, const char *key,
							  const char *what);

#endif							/* RLOCK_ROUTE_INT_H */
