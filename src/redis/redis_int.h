/*-------------------------------------------------------------------------
 *
 * redis/redis_int.h
 *	  The inside of a Redis connection, for the files of the connection
 *	  layer only (connection*.c): nothing above it sees hiredis, the
 *	  transport or the wait primitive; the route layer sees a connection
 *	  through redis.h's functions only.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_CONNECTION_INT_H
#define RLOCK_CONNECTION_INT_H

#include <signal.h>

#include <hiredis/hiredis.h>

#include "lib/stringinfo.h"
#include "storage/latch.h"

#include "redis/redis.h"
#include "net/net.h"

/* Where a connection is in its life. */
typedef enum ConnState
{
	CS_CLOSED,					/* no socket */
	CS_CONNECTING,				/* socket connecting, TLS handshaking */
	CS_HANDSHAKE,				/* AUTH, SELECT, CLIENT SETNAME in flight */
	CS_READY,					/* connected, idle */
	CS_EXCHANGE					/* a round trip is in flight */
} ConnState;

/* Reply slots below 0: where a reply goes that no caller reads. */
#define SLOT_DROP		(-1)	/* a deferred DEL's reply */
#define SLOT_AUTH		(-2)	/* the handshake's replies */
#define SLOT_SELECT		(-3)
#define SLOT_NAME		(-4)
#define SLOT_ROLE		(-5)	/* ROLE: is it the master, how many replicas */
#define SLOT_OWED		(-6)	/* a reply of a round trip not waited for */
#define SLOT_IDENTITY	(-7)	/* INFO server: the server's run_id */

/* Scripts a connection remembers its server running (rconn_scripts_known) */
#define RCONN_SCRIPTS_KNOWN	32

/*
 * Bounds on one reply (on a commands connection: on the replies of one
 * round trip together), far above what rlock's own commands get back (the
 * renewal of 10 000 locks: 20 000 elements; CLUSTER SLOTS of a cluster with
 * every slot in a range of its own: some 200 000), so that a broken or
 * hostile server costs an ERROR, never the backend's memory: the bytes of
 * its strings plus what is buffered of its unfinished part, its arrays'
 * elements (nested ones included), and how deeply its arrays nest (hiredis
 * 0.14 allows no more).
 */
#define RCONN_REPLY_MAX_BYTES		(64 * 1024 * 1024)
#define RCONN_REPLY_MAX_ELEMENTS	(1024 * 1024)
/*
 * ... where each element counts this much too, toward the bytes: what
 * parsing it and copying it out cost besides its string (hiredis' object
 * and ours, the pointers to them), so that a reply of a million short
 * strings, within both bounds, cannot cost hundreds of MB either.
 */
#define RCONN_REPLY_ELEMENT_COST	128
#define RCONN_REPLY_MAX_DEPTH		8
/* ... and a line of it (a header, a status, an error) ends within this */
#define RCONN_REPLY_MAX_LINE		(1024 * 1024)

/* A server's run_id (INFO server): 40 hex digits. */
#define RCONN_RUN_ID_LEN		40

/* How often a connection re-learns its node's role and replica count. */
#define RCONN_ROLE_REFRESH_MS	1000

struct RedisConn
{
	RconnRole	role;
	char		key[600];		/* the node (and role) it serves, in the pool */
	RedisUrl	node;			/* that node, as last asked for */
	uint64		generation;		/* net_settings_generation when connected */
	char		addr[300];		/* host:port or socket path, for messages */

	ConnState	state;
	Transport  *transport;		/* NULL when closed */
	WaitEventSet *wes;			/* latch, postmaster death and the socket */
	uint64		incarnation;	/* which socket: a new number at each connect */
	int			sockpos;		/* position of the socket in wes */
	uint32		sockevents;		/* events the socket entry waits for now */
	uint32		want;			/* what the socket must become to go on */
	bool		busy;			/* a round trip was left unfinished */
	bool		owed;			/* ready, but replies of a round trip not
								 * waited for are to come (SLOT_OWED) */
	const RlockScript *scripts_run[RCONN_SCRIPTS_KNOWN];	/* on this socket */
	int			nscripts_run;
	bool		proven;			/* completed a round trip since connecting */
	bool		out_of_step;	/* a reply broke its command's protocol:
								 * closed before its next use */
	bool		silent;			/* a round trip timed out and no reply came
								 * since, on any socket (kept across them) */
	TimestampTz silent_probe_at;	/* a silent server: when its grace is a
									 * probe's next */
	int			silent_pause_ms;	/* ... and the pause after that */
	int64		op_us;			/* what its last optional op took (0: none) */
	bool		subscribed;		/* may be subscribed to some channel */
	bool		connected_before;	/* a connection was established once */
	TimestampTz last_used;		/* end of its last round trip */

	/*
	 * Set by the idle timer's signal handler (connection.c) when it shut
	 * this connection's socket down; the next use of the pool closes it.
	 */
	volatile sig_atomic_t shut_by_timer;

	/* bytes to send (malloc'd) */
	char	   *out;
	size_t		outlen;
	size_t		outpos;
	size_t		outcap;

	/* hiredis parses replies, nothing more (bounded: rconn_reader_create) */
	redisReader *reader;
	size_t		reply_bytes;	/* of the replies counted: their strings */
	size_t		reply_elements; /* their arrays' elements, nested included */
	char		reply_refusal[160]; /* why the parser refused it */

	/* replies of the last round trip, in replycxt */
	MemoryContext replycxt;
	RReply	  **replies;
	int			nreplies;		/* replies received so far */
	int			maxreplies;

	/* where each expected reply goes: a reply index or a SLOT_* */
	int		   *slots;
	int			nslots;
	int			nextslot;
	int			maxslots;

	/* failure details of the last failed round trip */
	RconnFailure failure;
	char		errdetail[300];

	/*
	 * With progress deadlines, each reply of a pipeline gets its own
	 * command_timeout, so that a long pipeline that keeps answering is not
	 * cut off (the watchdog's renewals).
	 */
	bool		progress_deadlines;
	TimestampTz deadline_cap;	/* no round trip waits past this (0: none) */

	/*
	 * Who answers on this socket (rconn_identify): the server's run_id,
	 * asked with INFO server in front of the first commands on each socket.
	 */
	bool		identify;		/* asked for each socket */
	bool		identity_asked; /* INFO went out on this socket */
	bool		identity_known; /* and was answered (run_id: "" if not told) */
	char		run_id[RCONN_RUN_ID_LEN + 1];

	/* CLIENT SETNAME rlock:<pid>, sent in front of the first commands */
	bool		name_pending;
	char		name[64];
	RedisCmd	setname;

	/*
	 * The node's role, learned with ROLE in the handshake and again, in
	 * front of the commands of a round trip, once RCONN_ROLE_REFRESH_MS old:
	 * replicas (-1: unknown) says whether acquisitions wait for replica
	 * acknowledgements.  A master located through the sentinels that turns
	 * out not to be one (ROLE, or a READONLY reply) is "demoted": the
	 * connection is replaced at its next use, which asks the sentinels
	 * again.
	 */
	bool		check_role;		/* send ROLE with the handshake */
	int			nreplicas;
	TimestampTz role_at;
	bool		demoted;
	uint64		topology_epoch; /* the route layer's topology epoch when
								 * located (connection_connect.c) */
	char		failed_at[300]; /* host:port of a master that just failed */

	/*
	 * Pub/sub: whether this subscriber connection's channel was taken with
	 * SSUBSCRIBE (sharded); for a Cluster's routed subscriber connection,
	 * the node connection subscribed now.  rconn_discard forgets what the
	 * socket was subscribed to (a closed connection, the idle timer's
	 * included, subscribes afresh on its next use).
	 */
	bool		sub_sharded;
	RedisConn  *target;

	/*
	 * The channel this subscriber connection is subscribed to, confirmed by
	 * Redis (TopMemoryContext; NULL when none or not known), and since when
	 * the subscription is kept past the wait that made it (0: not kept), so
	 * that the next wait on the same channel needs no round trip
	 * (rconn_resume_subscription).  A kept subscription is dropped with its
	 * connection at a transaction end RCONN_KEEP_SUBSCRIPTION_MS after it.
	 */
	char	   *sub_channel;
	TimestampTz kept_since;
	/* the text of the last message received (truncated), NUL-terminated */
	char		last_message[RCONN_MESSAGE_MAX + 1];

	/* a routed round trip does not wait for nodes that cannot serve now */
	bool		impatient;

	/* keys to DEL in front of the next round trip (malloc'd) */
	char	  **deferred_del;
	int			ndeferred;
	int			maxdeferred;
	bool		deferred_apart; /* one DEL per key (a Cluster's node) */
};

/* connection.c (the pool) */
/* connection_close.c: closing connections, counting open ones */
extern RedisConn **rconn_pool;	/* every connection made (never freed) */
extern int	rconn_npool;
extern void rconn_pool_enter(void);
extern void rconn_idle_register(void);
extern void rconn_socket_opened(RedisConn *conn);
extern void rconn_discard_failed(RedisConn *conn);
extern bool rconn_is_stale(RedisConn *conn);
extern bool rconn_idle_expired(RedisConn *conn);
extern void rconn_set_address(RedisConn *conn);

/* connection_discipline.c */
extern int	rconn_unasked_reply(RedisConn *conn);

/* connection_connect.c (connecting, the handshake, the route hooks) */
extern uint64 rconn_incarnations;
extern bool rconn_begin_connect(RedisConn *conn, TimestampTz deadline);
extern void rconn_handshake_done(RedisConn *conn);
extern bool rconn_queue_setname(RedisConn *conn);
extern bool rconn_queue_role(RedisConn *conn);
extern bool rconn_take_role(RedisConn *conn, redisReply *r);
extern bool rconn_topology_moved(RedisConn *conn);

/* connection_io.c (bytes in and out) */
extern bool rconn_queue(RedisConn *conn, RedisCmd *cmd, bool as_eval,
						int slot);
extern bool rconn_queue_pipeline(RedisConn *conn, RedisCmd *cmds, int ncmds,
								 StringInfo shared);
extern void rconn_reset_replies(RedisConn *conn);
extern void rconn_free_io(RedisConn *conn);
extern RReply *rconn_convert_reply(const redisReply *r, MemoryContext cxt);
extern RconnFailure rconn_failure_of(const TransportError *err);
extern uint32 rconn_want_of(TransportStatus st);
extern TransportStatus rconn_write_some(RedisConn *conn);
extern TransportStatus rconn_read_some(RedisConn *conn);
extern bool rconn_read_on(TimestampTz deadline);

/* connection_wait.c: the wait; one connection of a wait over several. */
typedef struct RconnWaiter
{
	RedisConn  *conn;
	bool		done;			/* not waited for */
	TimestampTz deadline;
	bool		ready;			/* out: its socket is ready for conn->want */
} RconnWaiter;

extern void rconn_wait_many(RconnWaiter *w, int n);
extern bool rconn_wait(RedisConn *conn, uint32 events, TimestampTz deadline,
					   bool *latch_woken);

/* connection_reply.c (the bounded reply parser) */
extern redisReader *rconn_reader_create(RedisConn *conn);
extern bool rconn_get_reply(RedisConn *conn, void **reply);

/* connection_exchange.c: one op of a round trip (connection_parallel.c) */
typedef struct OpState
{
	RconnOp    *op;
	bool		done;
	bool		queued;			/* the op's commands are queued */
	bool		reloaded;		/* NOSCRIPT replays were queued */
	bool		was_proven;		/* the connection had worked when queued */
	bool		tallied;		/* done, and looked at by rconn_run_quorum */
	int			attempt;
	TimestampTz deadline;
	StringInfo	shared;			/* the bytes of commands other ops send too */
	TimestampTz started;		/* an optional op: when the round trip began */
	bool		may_skip;		/* ... left after a grace while silent */
	bool		probe;			/* ... a longer grace (a probe's) */
} OpState;

extern void rconn_step(OpState *os);
extern bool rconn_scripts_known(const RconnOp *op);
extern void rconn_op_failed(OpState *os);

/* Of the pool and the bounds, used inside this folder only. */
extern void rconn_discard(RedisConn *conn);
extern int	rconn_connect_timeout_ms(void);

#endif							/* RLOCK_CONNECTION_INT_H */
