/*-------------------------------------------------------------------------
 *
 * connection_discipline.c
 *	  A connection is in step or closed (SPEC 8): the closing of a
 *	  connection whose replies cannot be trusted to answer the commands
 *	  they follow, and the ERROR of the call that found out.
 *
 * A reply of a type or count its command never returns, a number out of
 * its range, bytes left over once a round trip's replies are all in (an
 * extra reply), or bytes that came while the connection was idle: each
 * means that the replies on that socket may answer other commands than
 * the ones they follow.  So does an error reply to a script that may have
 * run (rconn_error_may_have_applied, connection_error.c).  The connection
 * is then closed before its next use (rconn_distrust; the checks of
 * connection_exchange.c), and the call that saw it fails with an ERROR
 * (the layers above settle what it may have changed, as for an
 * interrupted call).
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <poll.h>

#include "redis/redis.h"
#include "redis/redis_int.h"
#include "base/base.h"

/* Is r, or an element nested in it, the reply at p? */
static bool
reply_holds(const RReply *r, const RReply *p, int depth)
{
	if (r == NULL)
		return false;
	if (r == p)
		return true;
	if (r->type != RREPLY_ARRAY || depth >= RCONN_REPLY_MAX_DEPTH)
		return false;
	for (size_t i = 0; i < r->elements; i++)
		if (reply_holds(r->element[i], p, depth + 1))
			return true;
	return false;
}

/*
 * The reply was not what its command returns (a type, a count or a number
 * it never returns): the connection it came over (its last round trip's)
 * is out of step, and is closed before its next use.  A reply found in no
 * connection's last round trip (a copy: a Cluster's routed round trip
 * hands out copies of its nodes' replies) marks every commands connection
 * of the process that is open: which one it came over is not known, and a
 * protocol broken is worth a few reconnections.  Never throws.
 */
void
rconn_distrust(const RReply *reply)
{
	if (reply == NULL)
		return;
	for (int c = 0; c < rconn_npool; c++)
	{
		RedisConn  *conn = rconn_pool[c];

		if (conn->replies == NULL || conn->node.kind == NODE_CLUSTER)
			continue;
		for (int i = 0; i < conn->maxreplies; i++)
			if (reply_holds(conn->replies[i], reply, 0))
			{
				conn->out_of_step = true;
				return;
			}
	}
	for (int c = 0; c < rconn_npool; c++)
		if (rconn_pool[c]->role == RCONN_COMMANDS &&
			rconn_pool[c]->node.kind != NODE_CLUSTER &&
			rconn_pool[c]->state != CS_CLOSED)
			rconn_pool[c]->out_of_step = true;
}

/*
 * A reply that breaks the protocol of its command (detail says how): its
 * connection is closed before its next use, and the call fails.
 */
void
rconn_protocol_error(const RReply *reply, const char *what,
					 const char *detail)
{
	rconn_distrust(reply);
	stats_count(RLOCK_STAT_REDIS_ERRORS);
	ereport(ERROR,
			(errcode(ERRCODE_PROTOCOL_VIOLATION),
			 what ? errmsg("unexpected reply from Redis for lock \"%s\"", what) :
			 errmsg("unexpected reply from Redis"),
			 errdetail_internal("%s", detail),
			 errhint("The connection was closed; what this session holds is checked with Redis again at its next call.")));
}

/*
 * A reply its command never returns: an error reply is reported as such;
 * any other is a protocol ERROR, its connection out of step (closed
 * before its next use).
 */
void
rconn_unexpected_reply(RReply *reply, const char *what)
{
	/* an error reply is a reply; anything else: out of step, closed */
	if (reply->type == RREPLY_ERROR)
		rconn_reply_error(reply, ERROR, what);
	if (reply->type == RREPLY_ARRAY)
		rconn_protocol_error(reply, what,
							 psprintf("Redis answered an array of %zu elements, which that command never returns.",
									  reply->elements));
	rconn_protocol_error(reply, what,
						 psprintf("Redis answered %s, which that command never returns.",
								  reply->type == RREPLY_STRING ? "a string" :
								  reply->type == RREPLY_INTEGER ? "an integer" :
								  reply->type == RREPLY_NIL ? "nil" :
								  reply->type == RREPLY_STATUS ? "a status" :
								  "a reply of an unknown type"));
}

/*
 * Did the server send anything while conn (a commands connection, idle,
 * owing no reply) was not asked?  1 when bytes wait in the parser, in the
 * transport's buffer, or on the socket now: what follows on it would
 * answer the wrong commands.  (Bytes the transport takes for itself, a
 * TLS session ticket, count only if they carry data.)  -1 when the server
 * closed it (or it broke) meanwhile; 0 when nothing came.
 */
int
rconn_unasked_reply(RedisConn *conn)
{
	struct pollfd pfd;
	TransportStatus st;

	if (conn->transport == NULL || conn->reader == NULL)
		return 0;
	if (conn->reader->pos < conn->reader->len ||
		transport_pending(conn->transport))
		return 1;
	pfd.fd = transport_socket(conn->transport);
	pfd.events = POLLIN;
	pfd.revents = 0;
	if (pfd.fd < 0 || poll(&pfd, 1, 0) <= 0)
		return 0;
	st = rconn_read_some(conn);
	if (conn->reader->pos < conn->reader->len)
		return 1;
	return st == TS_ERROR ? -1 : 0;
}
