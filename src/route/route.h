/*-------------------------------------------------------------------------
 *
 * route.h
 *	  The door of src/route/: which node.  The configured Redis, whatever
 *	  the deployment (one node, a Sentinel's master, a Cluster's slots),
 *	  and the Redlock's independent masters.  The layers above run their
 *	  commands through route_run and its kin, which send each to the node
 *	  that serves it; the connection layer below serves one node.
 *
 *	  Its files, lowest first:
 *	  backend.c			the process's connections to rlock.redis_url
 *	  cluster_check.c	what servers say (addresses, slot maps, redirections)
 *						checked before it is believed
 *	  topology.c		Sentinel: which node is the master, through failovers
 *	  cluster_slot.c	Cluster hash slots, keys grouped per slot
 *	  cluster_map.c		the slot map, learned and kept current
 *	  cluster.c			questions about the map: a key's node, the masters
 *	  cluster_route.c	routed round trips: each command to its slot's master
 *	  redlock_conf.c	rlock.redlock_urls: the Redlock's masters, as named
 *	  redlock_silence.c	masters found silent, shared by this server's
 *						processes
 *	  route.c			the routed entry points (route_run, route_subscribe...)
 *	  master_confirm.c	the check before COMMIT asks whether the node is
 *						still master
 *	  redlock.c			the masters' connections; asked in parallel, a
 *						majority's answer
 *	  route_int.h		what the files of this folder share
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_ROUTE_H
#define RLOCK_ROUTE_H

#include "utils/guc.h"

#include "redis/redis.h"

/*
 * Set up the route layer (from _PG_init): sets the connection layer up
 * and registers with it what it must be told from here; and its shared
 * memory (the topology of a Sentinel deployment), when preloaded.
 */
extern void route_init(void);
extern void route_shmem_install(void);

/*
 * The configured Redis (rlock.redis_url), whatever the deployment: the
 * process's commands connection and its subscriber connection (backend.c).
 * For a Cluster these are routed connections: every call below sends their
 * commands to the nodes that serve them.
 */
extern RedisConn *route_backend(void);
extern RedisConn *route_backend_subscriber(void);

/*
 * Round trips on any connection, routed or not (route.c): as rconn_run,
 * rconn_ready and rconn_defer_del, for a Cluster on the nodes of the keys.
 * route_last_rounds: the round trips the last route_run took (1 outside a
 * Cluster).
 */
extern bool route_run(RedisConn *conn, RedisCmd *cmds, int ncmds,
					  RReply ***replies, int elevel, const char *what);
extern RReply *route_run1(RedisConn *conn, RedisCmd *cmd, const char *what);
extern void route_ready(RedisConn *conn, const char *what);
extern void route_ready_for(RedisConn *conn, const char *key,
							const char *what);
extern void route_defer_del(RedisConn *conn, const char *key);
extern int	route_acks_wanted(RedisConn *conn, const char *key);
extern int	route_last_rounds(void);

/*
 * Publish/subscribe, for waiters (route.c).  route_subscribe is false when
 * the server refused the subscription with an error reply (a WARNING said
 * so): the waiter then looks again a bounded while apart, without
 * messages.
 */
extern bool route_subscribe(RedisConn *sub, const char *channel,
							const char *what, TimestampTz retry_until);
extern int	route_wait_message(RedisConn *sub, TimestampTz deadline);
extern const char *route_last_message(RedisConn *sub);
extern void route_unsubscribe_nowait(RedisConn *sub);
extern void route_keep_subscription(RedisConn *sub);
extern bool route_skip_messages(RedisConn *sub);
extern bool route_sharded_publish(void);

/*
 * Where the master is (topology.c): whether it can move, where it is now,
 * the worker's watch over the sentinels.
 */
extern bool route_follows_failover(void);
extern bool route_node_can_move(RedisConn *conn);
extern char *route_master_address(void);
extern char *route_node_address(const char *key);
extern void route_watch_topology(void);

/*
 * The check before COMMIT (master_confirm.c): route_run that also confirms
 * a Sentinel's master with the sentinels (false, *why), and a Cluster's
 * slot owners with the other masters.
 */
extern bool route_run_confirmed(RedisConn *conn, RedisCmd *cmds, int ncmds,
								RReply ***replies, const char *what,
								char **why);
extern int	route_confirm_owners(const char *const *keys, int n, char **why);

/*
 * Redis Cluster (cluster_slot.c, cluster.c): whether the deployment is
 * one, keys grouped so that each group fits one script call, the masters
 * that own slots now.
 */
extern bool route_is_cluster(void);
extern int	route_slot_groups(const char *const *keys, int n, int maxper,
							  int *order, int *starts);
extern int	route_cluster_masters(RedisConn ***conns);

/* The most masters rlock.redlock_urls may name. */
#define REDLOCK_MAX_MASTERS		16

/* GUC hooks of rlock.redlock_urls. */
extern bool rlock_check_redlock_urls(char **newval, void **extra,
									 GucSource source);
extern void rlock_assign_redlock_urls(const char *newval, void *extra);
extern const char *rlock_show_redlock_urls(void);

extern int	redlock_num_masters(void);
extern uint64 redlock_conf_generation(void);
extern void redlock_require_configured(const char *name);
extern int	redlock_masters(RedisConn **conns, const char *name);
extern RedisConn *redlock_subscriber(int master);

/* How many masters make a majority of n. */
static inline int
redlock_quorum(int n)
{
	return n / 2 + 1;
}

/*
 * The same commands on every master at once: one op per master, each with
 * ok set and its replies (owned by its connection) when it answered.
 * Every master's answer counts once: the pool asks each new socket's
 * server for its run_id, in front of the first commands, and an answer
 * that may not count is set aside (ok false, late true, as a master not
 * waited for: its commands may have run there): one from a connection
 * that is not a master's of the setting any more, or whose server has not
 * answered INFO or did not tell its run_id (an ACL refusing INFO: it
 * cannot be told apart from the others), or from the same server as an
 * earlier master.
 */
extern RconnOp *redlock_run(RedisConn **conns, int n, RedisCmd *cmds,
							int ncmds, TimestampTz cap);

/*
 * The same, returning once a majority answered with replies that counts
 * counts (rconn_run_quorum): the others are late (op->late).  *dup_a <
 * *dup_b name the first two masters found to be one server, or both name
 * a master that did not tell which server it is (else both are -1; both
 * may be NULL): an acquisition gives back and fails closed, with
 * redlock_refuse_masters' ERROR.
 */
extern RconnOp *redlock_run_majority(RedisConn **conns, int n,
									 RedisCmd *cmds, int ncmds,
									 RconnCounts counts, void *arg,
									 int *dup_a, int *dup_b);
extern void redlock_refuse_masters(RedisConn **conns, int dup_a, int dup_b,
								   const char *name) pg_attribute_noreturn();

extern bool redlock_failed_silently(RedisConn *conn);

#endif							/* RLOCK_ROUTE_H */
