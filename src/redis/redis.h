/*-------------------------------------------------------------------------
 *
 * redis/redis.h
 *	  DOOR-DESCRIPTION
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_REDIS_H
#define RLOCK_REDIS_H

#include "datatype/timestamp.h"

#include "net/net.h"

/* A Lua script: sent as EVALSHA, as EVAL when the server lacks it. */
typedef struct RlockScript
{
	const char *name;
	const char *body;
	char		sha1[41];		/* hex digest, computed on first use */
} RlockScript;

/*
 * A reply from Redis, as the layers above the connection see it (hiredis'
 * own reply type stays inside the connection layer).  Replies live in
 * memory owned by their connection, until its next round trip.
 */
typedef enum RReplyType
{
	RREPLY_STRING = 1,
	RREPLY_ARRAY,
	RREPLY_INTEGER,
	RREPLY_NIL,
	RREPLY_STATUS,
	RREPLY_ERROR
} RReplyType;

typedef struct RReply
{
	RReplyType	type;
	int64		integer;		/* RREPLY_INTEGER */
	size_t		len;			/* STRING, STATUS, ERROR: str's length */
	char	   *str;			/* ... NUL-terminated */
	size_t		elements;		/* RREPLY_ARRAY */
	struct RReply **element;
} RReply;

/*
 * One command, as an argument vector.  Arguments are not copied: they must
 * stay valid until the command has run.  Numbers added with rcmd_int are
 * formatted into the command's own buffers.
 */
#define RCMD_INLINE_ARGS	16
#define RCMD_NUMBUFS		6

typedef struct RedisCmd
{
	int			argc;
	int			maxargs;
	const char **argv;
	size_t	   *argvlen;
	/* set when argv is EVALSHA of this script (NOSCRIPT falls back) */
	const RlockScript *script;
	int			block_ms;		/* the server may hold the reply this long */
	int			nnum;
	const char *inline_argv[RCMD_INLINE_ARGS];
	size_t		inline_len[RCMD_INLINE_ARGS];
	char		numbuf[RCMD_NUMBUFS][24];
} RedisCmd;

/* Why a round trip failed. */
typedef enum RconnFailure
{
	RF_NONE = 0,
	RF_CONNECT,					/* could not establish the connection */
	RF_CONNECT_TIMEOUT,			/* connect or handshake exceeded its bound */
	RF_AUTH,					/* AUTH rejected */
	RF_SELECT,					/* SELECT rejected */
	RF_LOST,					/* connection broke during a round trip */
	RF_TIMEOUT,					/* round trip exceeded command_timeout */
	RF_PROTOCOL,				/* garbage from the server */
	RF_NOFD,					/* too many open files */
	RF_RESOLVE,					/* the host name could not be resolved */
	RF_TLS,						/* the TLS handshake failed (detail: why) */
	RF_CONFIG,					/* a setting rlock needs is unusable */
	RF_NO_MASTER,				/* the sentinels named no master (detail) */
	RF_NOT_MASTER,				/* the node located as master is not one */
	RF_CLUSTER					/* the cluster could not serve (detail) */
} RconnFailure;


typedef struct RedisConn RedisConn;

/* What a connection is for: a node has at most one of each per process. */
typedef enum RconnRole
{
	RCONN_COMMANDS,				/* commands and scripts */
	RCONN_SUBSCRIBER			/* waiting for release messages */
} RconnRole;

/*
 * One node's part of a parallel round trip (rconn_run_parallel): its
 * commands go out pipelined, every node's at once.
 */
typedef struct RconnOp
{
	RedisConn  *conn;
	RedisCmd   *cmds;
	int			ncmds;
	bool		ok;				/* out: replies are in replies[] */
	RReply	  **replies;		/* out: ncmds replies, owned by conn */
} RconnOp;

/* Building commands. */
extern void rcmd_init(RedisCmd *cmd);
extern void rcmd_str(RedisCmd *cmd, const char *s);
extern void rcmd_arg(RedisCmd *cmd, const char *s, size_t len);
extern void rcmd_int(RedisCmd *cmd, int64 v);
extern void rcmd_copy(RedisCmd *dst, const RedisCmd *src);
extern void rcmd_wait(RedisCmd *cmd, int replicas, int timeout_ms);

/* Connections. */
extern RedisConn *rconn_get(const RedisUrl *node, RconnRole role);
extern RedisConn *rconn_backend(void);
extern RedisConn *rconn_backend_subscriber(void);
extern void rconn_discard(RedisConn *conn);
extern bool rconn_ensure(RedisConn *conn);
extern void rconn_ready(RedisConn *conn, const char *what);
extern void rconn_ready_for(RedisConn *conn, const char *key, const char *what);
extern void rconn_close_idle(bool all);
extern void rconn_set_progress_deadlines(RedisConn *conn, bool on);
extern void rconn_set_deadline_cap(RedisConn *conn, TimestampTz cap);
extern void rconn_set_impatient(RedisConn *conn, bool on);
extern void rconn_defer_del(RedisConn *conn, const char *key);
extern const char *rconn_address(RedisConn *conn);
extern int	rconn_acks_wanted(RedisConn *conn, const char *key);
extern int	rconn_replicas(RedisConn *conn);
extern bool rconn_follows_failover(void);
extern bool rconn_node_can_move(RedisConn *conn);
extern char *rconn_master_address(void);
extern char *rconn_node_address(const char *key);
extern void rconn_watch_topology(void);
extern void rconn_topology_shmem_install(void);
extern int	rconn_command_timeout_ms(void);
extern int	rconn_connect_timeout_ms(void);

/*
 * Run ncmds commands pipelined; on success *replies points at ncmds replies
 * owned by the connection (valid until its next use).  On failure reports
 * at elevel (returning false when elevel < ERROR).
 */
extern bool rconn_run(RedisConn *conn, RedisCmd *cmds, int ncmds,
					  RReply ***replies, int elevel, const char *what);
extern RReply *rconn_run1(RedisConn *conn, RedisCmd *cmd, const char *what);

/*
 * rconn_run (ERROR on failure) that also confirms, for a master located
 * through the sentinels, that the node is still master (false, *why).
 */
extern bool rconn_run_confirmed(RedisConn *conn, RedisCmd *cmds, int ncmds,
								RReply ***replies, const char *what,
								char **why);
extern int	rconn_confirm_owners(const char *const *keys, int n, char **why);

/*
 * Run each op's commands on its connection, all connections at once
 * (connecting those that need it); waits until every op has its replies or
 * has failed (op->ok; op->conn's failure then says why, for rconn_report).
 */
extern void rconn_run_parallel(RconnOp *ops, int nops);

/* Report why conn's last round trip failed, at elevel. */
extern void rconn_report(RedisConn *conn, int elevel, const char *what);
extern bool rconn_failed_before_sending(RedisConn *conn);

/*
 * Redis Cluster (cluster.c): which slot a key hashes to (-1 outside a
 * Cluster), keys grouped so that each group fits one script call, and the
 * round trips the last rconn_run took (1 outside a Cluster).
 */
extern bool rconn_is_cluster(void);
extern int	rconn_key_slot(const char *key);
extern int	rconn_slot_groups(const char *const *keys, int n, int maxper,
							  int *order, int *starts);
extern int	rconn_last_rounds(void);
extern bool rconn_sharded_publish(void);
extern int	rconn_cluster_masters(RedisConn ***conns);

/* Replies and failures (connection_error.c). */
extern void rconn_reply_error(RReply *reply, int elevel, const char *what);
extern void rconn_unexpected_reply(RReply *reply, const char *what);
extern bool rconn_reply_is(const RReply *reply, const char *code);
extern void rconn_report_failure(RconnFailure failure, const char *addr,
								 const char *detail, int elevel,
								 const char *what);

/* Publish/subscribe, for waiters. */
extern void rconn_subscribe(RedisConn *sub, const char *channel,
							const char *what, TimestampTz retry_until);
extern int	rconn_wait_message(RedisConn *sub, TimestampTz deadline);
extern void rconn_unsubscribe_nowait(RedisConn *sub);

#endif							/* RLOCK_REDIS_H */
