/*-------------------------------------------------------------------------
 *
 * connection_discipline.c
 *	  A connection is in step or closed (SPEC 8): the one reading of an
 *	  error reply's words, what an error reply to a script says about
 *	  whether it ran, and the closing of a connection whose replies cannot
 *	  be trusted to answer the commands they follow.
 *
 * A reply of a type or count its command never returns, a number out of
 * its range, bytes left over once a round trip's replies are all in (an
 * extra reply), or bytes that came while the connection was idle: each
 * means that the replies on that socket may answer other commands than
 * the ones they follow.  The connection is then closed before its next
 * use (rconn_distrust, connection_exchange.c's checks), and the call that
 * saw it fails with an ERROR (the layers above settle what it may have
 * changed, as for an interrupted call).
 *
 * Error replies are read here once, within their length: the word after a
 * code ("RLOCKKIND lock") is found by rconn_error_word, and nobody else
 * looks past a code.  (Their text is made printable and cut at
 * RLOCK_PRINTABLE_MAX bytes when it arrives: connection_io.c.)
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

/*
 * Where code starts in the error reply (at its start, or after a space or
 * a '-': Redis 6 wraps a script's errors), within reply->len; NULL if it
 * does not carry it.
 */
static const char *
find_code(const RReply *reply, const char *code)
{
	size_t		clen = strlen(code);
	const char *s;
	size_t		len;

	if (reply == NULL || reply->type != RREPLY_ERROR || reply->str == NULL ||
		clen == 0)
		return NULL;
	s = reply->str;
	len = reply->len;
	for (size_t i = 0; i + clen <= len; i++)
	{
		if (memcmp(s + i, code, clen) != 0)
			continue;
		if (i > 0 && s[i - 1] != ' ' && s[i - 1] != '-')
			continue;
		if (i + clen < len && s[i + clen] != ' ')
			continue;
		return s + i;
	}
	return NULL;
}

/*
 * Does the error reply carry this error code, at its start or (Redis 6
 * wraps script errors) after a space or a '-'?  Reads within its length.
 */
bool
rconn_reply_is(const RReply *reply, const char *code)
{
	return find_code(reply, code) != NULL;
}

/*
 * The word after code in an error reply ("RLOCKKIND lock": "lock"),
 * palloc'd: "" when the code ends the reply or no word follows it (spaces
 * alone), NULL when the reply is not an error carrying that code.  The word
 * ends at a space or the reply's end, and is cut at RCONN_ERROR_WORD_MAX
 * bytes; nothing past reply->len is read.
 */
char *
rconn_error_word(const RReply *reply, const char *code)
{
	const char *p = find_code(reply, code);
	const char *end;
	size_t		n = 0;

	if (p == NULL)
		return NULL;
	end = reply->str + reply->len;
	p += strlen(code);
	while (p < end && *p == ' ')
		p++;
	while (p + n < end && p[n] != ' ' && p[n] != '\0' &&
		   n < RCONN_ERROR_WORD_MAX)
		n++;
	return pnstrdup(p, n);
}

/*
 * An error reply to a script: may the script have run, and changed
 * something, before the error?  Not when the error says the script never
 * started, or is one of the refusals rlock's own scripts return before they
 * write anything; any other error (a script that failed half-way, a server
 * that ran it and answered an error anyway) may follow writes.
 */
bool
rconn_error_may_have_applied(const RReply *reply)
{
	static const char *const not_run[] = {
		"NOSCRIPT", "RLOCKKIND", "RLOCKRANGE", "WRONGTYPE", "NOAUTH",
		"WRONGPASS", "NOPERM", "READONLY", "LOADING", "BUSY", "MASTERDOWN",
		"MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN", "CROSSSLOT", "OOM"
	};

	if (reply == NULL || reply->type != RREPLY_ERROR)
		return false;
	/* an ACL refusal inside a script: rlock's scripts look before writing */
	if (strstr(reply->str, "The user executing the script can't") != NULL ||
		strstr(reply->str, "ACL failure in script") != NULL)
		return false;
	for (int i = 0; i < lengthof(not_run); i++)
		if (rconn_reply_is(reply, not_run[i]))
			return false;
	return true;
}

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
 * is out of step, and is closed before its next use.  A reply of no
 * connection (a copy) marks none.  Never throws.
 */
void
rconn_distrust(const RReply *reply)
{
	if (reply == NULL)
		return;
	for (int c = 0; c < rconn_npool; c++)
	{
		RedisConn  *conn = rconn_pool[c];

		if (conn->replies == NULL)
			continue;
		for (int i = 0; i < conn->maxreplies; i++)
			if (reply_holds(conn->replies[i], reply, 0))
			{
				conn->out_of_step = true;
				return;
			}
	}
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
 * An integer reply (or element) within [min, max]: its value; anything
 * else is a protocol error (rconn_protocol_error) naming what it counts.
 */
int64
rconn_reply_int(const RReply *reply, int64 min, int64 max,
				const char *counts, const char *what)
{
	if (reply == NULL || reply->type != RREPLY_INTEGER)
		rconn_protocol_error(reply, what,
							 psprintf("Redis answered %s where %s was expected.",
									  reply == NULL ? "nothing" :
									  reply->type == RREPLY_ARRAY ? "an array" :
									  reply->type == RREPLY_STRING ? "a string" :
									  reply->type == RREPLY_NIL ? "nil" :
									  reply->type == RREPLY_STATUS ? "a status" :
									  reply->type == RREPLY_ERROR ? "an error" :
									  "a reply of an unknown type", counts));
	if (reply->integer < min || reply->integer > max)
		rconn_protocol_error(reply, what,
							 psprintf("Redis answered %lld as %s, outside %lld .. %lld.",
									  (long long) reply->integer, counts,
									  (long long) min, (long long) max));
	return reply->integer;
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
