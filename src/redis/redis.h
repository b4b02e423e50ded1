/*-------------------------------------------------------------------------
 *
 * redis.h
 *	  The door of src/redis/: one Redis node.  Connections (a backend-local
 *	  pool, one per node and use), round trips on them (pipelined, over one
 *	  connection or several at once), the one interruptible wait, pub/sub on
 *	  a subscriber connection, and failures as ERRORs with SQLSTATEs.
 *	  hiredis (its reply parser) stays in this folder; above it, replies
 *	  are RReply.  This layer knows nothing of Sentinel or Cluster: the
 *	  route layer above it registers the few hooks a connection needs
 *	  while it connects (RconnRouteHooks).
 *
 *	  Only the route layer may call the one-node forms of what it routes,
 *	  and what it uses to route (test/check-layers holds every other layer
 *	  to route.h's route_* instead): rconn_get, rconn_ensure, rconn_ready,
 *	  rconn_defer_del, rconn_run, rconn_subscribe_once, rconn_wait_message,
 *	  rconn_unsubscribe_nowait, rconn_keep_subscription,
 *	  rconn_resume_subscription, rconn_skip_messages, rconn_last_message,
 *	  rconn_target, rconn_set_target,
 *	  rconn_relocate, rconn_set_label, rconn_adopt_failure,
 *	  rconn_set_failure, rconn_inherit_bounds, rconn_set_route_hooks,
 *	  rconn_init.
 *
 *	  Its files, lowest first:
 *	  connection_command.c	building commands (RedisCmd)
 *	  connection_bounds.c	how long a round trip or a connect may wait
 *	  connection_error.c	failures and error replies, worded, with
 *							SQLSTATEs; an error reply's words read
 *	  connection_reply.c	the reply parser, bounded
 *	  connection_io.c		bytes in and out: encoding, writing, reading
 *	  connection_wait.c		the one interruptible wait (one socket or several)
 *	  connection_close.c	closing: failed, idle (a timer too) and stale ones
 *	  connection.c			the pool: find, check, name
 *	  connection_discipline.c	a connection in step or closed
 *	  connection_connect.c	connecting: resolve, socket, TLS, the handshake
 *	  connection_exchange.c	one connection's round trip, step by step
 *	  connection_parallel.c	round trips on one connection or several at
 *							once, or until a quorum answered
 *	  connection_retry.c	a blip ridden out (rlock.retry_timeout): the
 *							one-node round trip and connect, retried;
 *							only what cannot apply twice is resent
 *	  connection_pubsub.c	subscribing and waiting for release messages
 *	  redis_int.h			struct RedisConn and what the files share
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_REDIS_H
#define RLOCK_REDIS_H

#include "datatype/timestamp.h"
#include "utils/palloc.h"

#include "net/net.h"

/* A Lua script: sent as EVALSHA, as EVAL when the server lacks it. */
typedef struct RlockScript
{
	const char *name;
	const char *body;
	char		sha1[41];		/* hex digest, computed on first use */
	bool		once;			/* run twice it would apply twice: never
								 * resent after it may have run */
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
 * formatted into the command's own buffers, not terminated: an argument is
 * argv[i] and argvlen[i], never a C string.
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
	bool		request_id;		/* carries a request id: a replay answers as
								 * the first time, changing nothing, so it may
								 * be resent even if its script is "once" */
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
	RF_CLUSTER,					/* the cluster could not serve (detail) */
	RF_UNMASKED					/* a password in a URL, which rlock cannot
								 * hide when it is not preloaded */
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
	bool		late;			/* out: not waited for (rconn_run_quorum) */
	bool		awaited;		/* in: waited for, even once enough counted */
	bool		optional;		/* in: while its server is silent (it timed
								 * out, nothing heard since), not waited for
								 * once the others are done (a grace later) */
	bool		sent;			/* out: its commands were queued: they may
								 * have run even if it failed */
} RconnOp;

/*
 * Does op's answer count toward what rconn_run_quorum waits for?  Called
 * for each op that answered (op->ok), with the caller's arg.
 */
typedef bool (*RconnCounts) (const RconnOp *op, void *arg);

/* Building commands. */
extern void rcmd_init(RedisCmd *cmd);
extern void rcmd_str(RedisCmd *cmd, const char *s);
extern void rcmd_arg(RedisCmd *cmd, const char *s, size_t len);
extern void rcmd_int(RedisCmd *cmd, int64 v);
extern void rcmd_copy(RedisCmd *dst, const RedisCmd *src);
extern void rcmd_wait(RedisCmd *cmd, int replicas, int timeout_ms);

/*
 * Connections: one process's pool of them, per node and role.  These serve
 * single nodes; a Cluster's connection (NODE_CLUSTER, from rconn_get) is a
 * handle the route layer runs round trips for, never connected here.
 */
extern void rconn_init(void);	/* at library load (route_init) */
extern RedisConn *rconn_get(const RedisUrl *node, RconnRole role);
extern bool rconn_ensure(RedisConn *conn);
extern void rconn_ready(RedisConn *conn, const char *what);
extern void rconn_close_idle(bool all);
extern void rconn_defer_del(RedisConn *conn, const char *key, bool apart);
extern const char *rconn_address(RedisConn *conn);
extern int	rconn_replicas(RedisConn *conn);

/* What a connection is (for the route layer's routing and messages). */
extern const RedisUrl *rconn_node(RedisConn *conn);
extern void rconn_set_label(RedisConn *conn, const char *label);
extern bool rconn_is_closed(RedisConn *conn);
extern void rconn_identify(RedisConn *conn);
extern const char *rconn_run_id(RedisConn *conn);
extern bool rconn_silent(RedisConn *conn);
extern void rconn_mark_silent(RedisConn *conn);
extern void rconn_relocate(RedisConn *conn, bool avoid_here);
extern MemoryContext rconn_reply_context(RedisConn *conn);
extern RedisConn *rconn_target(RedisConn *conn);
extern void rconn_set_target(RedisConn *conn, RedisConn *target);

/* Bounds (connection_bounds.c). */
extern bool rconn_uninterruptible(void);
extern int	rconn_command_timeout_ms(void);
extern void rconn_set_progress_deadlines(RedisConn *conn, bool on);
extern void rconn_set_deadline_cap(RedisConn *conn, TimestampTz cap);
extern void rconn_set_impatient(RedisConn *conn, bool on);
extern bool rconn_is_impatient(RedisConn *conn);
extern void rconn_inherit_bounds(RedisConn *node, RedisConn *conn);
extern TimestampTz rconn_round_trip_deadline(RedisConn *conn, int timeout_ms);

/*
 * Run ncmds commands pipelined on one node's connection; on success
 * *replies points at ncmds replies owned by the connection (valid until its
 * next use).  On failure reports at elevel (returning false when elevel <
 * ERROR).  (Routed round trips: route_run.)
 */
extern bool rconn_run(RedisConn *conn, RedisCmd *cmds, int ncmds,
					  RReply ***replies, int elevel, const char *what);

/*
 * Suspend (true) or allow again (false) the ride-through of
 * rlock.retry_timeout; returns the previous setting.  A wait suspends it
 * while it waits: it rides an outage out on its own budget
 * (locks/wait_outage.c), and says so once.
 */
extern bool rconn_retry_suspend(bool suspend);

/*
 * Run each op's commands on its connection, all connections at once
 * (connecting those that need it); waits until every op has its replies or
 * has failed (op->ok; op->conn's failure then says why, for rconn_report).
 */
extern void rconn_run_parallel(RconnOp *ops, int nops);

/*
 * The same, returning as soon as "need" ops answered with replies that
 * "counts" counts (a Redlock's majority): the others are left late
 * (op->late, not ok), their commands sent; their replies are read and
 * dropped at their connection's next use, which waits for them first.
 */
extern void rconn_run_quorum(RconnOp *ops, int nops, int need,
							 RconnCounts counts, void *arg);

/*
 * May a command be sent again after it may have run (connection_command.c)?
 * Not an EVALSHA of a script marked once (RlockScript.once), unless the
 * command carries a request id (RedisCmd.request_id).
 */
extern bool rcmd_resendable(const RedisCmd *cmd);
extern bool rcmd_all_resendable(const RedisCmd *cmds, int ncmds);

/* Will conn's next round trip go over the socket it has now? */
extern bool rconn_reusable(RedisConn *conn);

/* Why a round trip failed, and reporting it (connection_error.c). */
extern void rconn_set_failure(RedisConn *conn, RconnFailure f,
							  const char *detail);
extern void rconn_adopt_failure(RedisConn *conn, RedisConn *from);
extern RconnFailure rconn_failure(RedisConn *conn);
extern const char *rconn_failure_detail(RedisConn *conn);
extern void rconn_report(RedisConn *conn, int elevel, const char *what);
extern bool rconn_failed_before_sending(RedisConn *conn);

/* Replies and failures (connection_error.c). */
extern void rconn_reply_error(RReply *reply, int elevel, const char *what);
extern void rconn_reply_error_of(const RedisUrl *node, RReply *reply,
								 int elevel, const char *what);
extern void rconn_unexpected_reply(RReply *reply, const char *what);

/*
 * The one reader of an error reply's words (connection_error.c): its code,
 * the word after it ("" when none, NULL without the code; at most
 * RCONN_ERROR_WORD_MAX bytes, never read past the reply's length), and
 * whether an error reply to a script may follow its writes.  A connection
 * in step or closed (connection_discipline.c): the connection a reply of
 * the wrong type, count or range came over is closed before its next use
 * (rconn_distrust), and the call fails (rconn_protocol_error,
 * rconn_unexpected_reply).
 */
#define RCONN_ERROR_WORD_MAX	64
extern bool rconn_reply_is(const RReply *reply, const char *code);
extern char *rconn_error_word(const RReply *reply, const char *code);
extern bool rconn_error_may_have_applied(const RReply *reply);
extern void rconn_distrust(const RReply *reply);
extern void rconn_protocol_error(const RReply *reply, const char *what,
								 const char *detail) pg_attribute_noreturn();

/* Publish/subscribe on one node (connection_pubsub.c). */
typedef enum RconnSubResult
{
	RSUB_OK,
	RSUB_FAILED,				/* the connection failed (its failure: why) */
	RSUB_MOVED,					/* MOVED: the slot lives elsewhere */
	RSUB_REFUSED				/* an error reply (e.g. NOPERM for the
								 * channel; its failure's detail: the text) */
} RconnSubResult;

/* rconn_wait_message: the server dropped the (sharded) subscription */
#define RCONN_MSG_DROPPED	(-2)

extern RconnSubResult rconn_subscribe_once(RedisConn *sub,
										   const char *channel,
										   const char *what, bool sharded,
										   char **moved);
extern int	rconn_wait_message(RedisConn *sub, TimestampTz deadline);

/*
 * The text of the last message rconn_wait_message returned 1 for (at most
 * RCONN_MESSAGE_MAX bytes of it: the messages of the lock protocol are
 * short integers).
 */
#define RCONN_MESSAGE_MAX	31
extern const char *rconn_last_message(RedisConn *sub);
extern void rconn_unsubscribe_nowait(RedisConn *sub);

/*
 * A subscription kept past its wait (rconn_keep_subscription), for the
 * next wait on the same channel (rconn_resume_subscription: true when sub
 * is still subscribed to channel, what arrived meanwhile skipped, without
 * a round trip).  Kept at most RCONN_KEEP_SUBSCRIPTION_MS: the connection
 * is closed at a transaction end after that.
 */
#define RCONN_KEEP_SUBSCRIPTION_MS	5000
extern void rconn_keep_subscription(RedisConn *sub);
extern bool rconn_resume_subscription(RedisConn *sub, const char *channel,
									  bool sharded);
extern bool rconn_skip_messages(RedisConn *sub);

/*
 * What the route layer registers at init (route_init, from _PG_init): the
 * moments in a connection's own life, inside a round trip, when it must
 * learn from above what it cannot know itself.  Only a Sentinel's master
 * (NODE_SENTINEL_MASTER) needs them, and a master's replica count:
 *
 *	locate_master		where the master is now, asked before each connect
 *						(avoid: host:port that just failed, not taken from
 *						the first sentinel that still names it); false with
 *						*failure and *detail when none is named.
 *	topology_epoch		the epoch of this server's master now (0: unknown);
 *						a located connection made at another epoch is
 *						replaced at its next use.
 *	master_confirmed	the node at addr answered ROLE master in its
 *						handshake: record it; returns the epoch now.
 *	replicas_reported	the master at addr reported n > 0 replicas.
 *
 * None may throw: they run mid-handshake.
 */
typedef struct RconnRouteHooks
{
	bool		(*locate_master) (const char *avoid, char *host,
								  size_t hostsize, int *port,
								  RconnFailure *failure, char **detail);
	uint64		(*topology_epoch) (void);
	uint64		(*master_confirmed) (const char *master_name,
									 const char *addr);
	void		(*replicas_reported) (const char *addr, int n);
} RconnRouteHooks;

extern void rconn_set_route_hooks(const RconnRouteHooks *hooks);

#endif							/* RLOCK_REDIS_H */
