/*-------------------------------------------------------------------------
 *
 * connection_int.h
 *	  The inside of a Redis connection, for the files of the connection
 *	  layer only (connection.c, connection_pubsub.c): nothing above it sees
 *	  hiredis state or the wait primitive.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_CONNECTION_INT_H
#define RLOCK_CONNECTION_INT_H

#include "storage/latch.h"

#include "connection.h"

struct RedisConn
{
	const char *label;			/* for messages: "rlock", "rlock watchdog" */
	redisContext *ctx;			/* NULL when not connected */
	WaitEventSet *wes;			/* latch, postmaster death and the socket */
	int			sockpos;		/* position of the socket in wes */
	uint32		sockevents;		/* events the socket entry waits for now */
	bool		busy;			/* a round trip is in progress */
	bool		proven;			/* completed a round trip since connecting */
	bool		subscribed;		/* may be subscribed to some channel */
	bool		connected_before;	/* a connection was established once */
	char	   *url;			/* rlock.redis_url this connection was made
								 * for (malloc'd) */
	char		addr[300];		/* host:port, for messages */

	/* replies of the last round trip, owned by the connection */
	redisReply **replies;
	int			nreplies;
	int			maxreplies;

	/* failure details of the last failed round trip */
	RconnFailure failure;
	char		errdetail[256];

	/*
	 * With progress deadlines, each reply of a pipeline gets its own
	 * command_timeout, so that a long pipeline that keeps answering is not
	 * cut off (the watchdog's renewals).
	 */
	bool		progress_deadlines;
	TimestampTz deadline_cap;	/* no round trip waits past this (0: none) */

	/* keys to DEL in front of the next round trip (malloc'd) */
	char	  **deferred_del;
	int			ndeferred;
	int			maxdeferred;
};

/* connection.c */
extern void rconn_free_replies(RedisConn *conn);
extern void rconn_discard_failed(RedisConn *conn);
extern bool rconn_wait(RedisConn *conn, uint32 events, TimestampTz deadline,
					   bool *latch_woken);
extern void rconn_set_failure(RedisConn *conn, RconnFailure f,
							  const char *detail);
extern bool rconn_append_command(RedisConn *conn, RedisCmd *cmd, bool as_eval);
extern bool rconn_flush_output(RedisConn *conn, TimestampTz deadline);
extern bool rconn_read_reply(RedisConn *conn, TimestampTz deadline,
							 redisReply **reply);
extern bool rconn_ensure(RedisConn *conn);
extern void rconn_report(RedisConn *conn, int elevel, const char *what);
extern TimestampTz rconn_round_trip_deadline(RedisConn *conn, int timeout_ms);

#endif							/* RLOCK_CONNECTION_INT_H */
