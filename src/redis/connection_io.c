/*-------------------------------------------------------------------------
 *
 * connection_io.c
 *	  Bytes in and out of one connection: commands encoded into its output
 *	  buffer with the slot each reply goes to, written as far as the socket
 *	  takes them, and what the socket has read fed to the reply parser.
 *
 * This is the bottom of a round trip, below both the connecting
 * (connection_connect.c queues the handshake here) and the driving of
 * round trips (connection_exchange.c, connection_pubsub.c): it never
 * waits and never decides what to do next, it only moves what it is given
 * and says, through the transport's status, what the socket must become to
 * go on (conn->want) or why the connection failed (conn->failure).
 *
 * Commands are encoded here (RESP is a few lines); hiredis' reader parses
 * the replies (bounded: connection_reply.c), which are copied into our own
 * reply type in a memory context the connection resets at its next round
 * trip; a server that never pauses still meets the deadline and the
 * interrupts between two reads (rconn_read_on).
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "redis/redis.h"
#include "redis/redis_int.h"
#include "base/base.h"

/* ----------------------------------------------------------------
 * Encoding and replies
 * ----------------------------------------------------------------
 */

/* Room in conn's output buffer for len more bytes. */
static bool
out_reserve(RedisConn *conn, size_t len)
{
	if (conn->outlen + len > conn->outcap)
	{
		size_t		newcap = Max(conn->outcap * 2, conn->outlen + len + 1024);
		char	   *out = realloc(conn->out, newcap);

		if (out == NULL)
			return false;
		conn->out = out;
		conn->outcap = newcap;
	}
	return true;
}

/*
 * "<kind><n>\r\n", the header of an array or a bulk string, at p (room for
 * RESP_HEADER_MAX bytes); returns where it ends.  Written by hand: snprintf
 * was a fifth of a backend's instructions per try+release.
 */
#define RESP_HEADER_MAX		24
static char *
put_header(char *p, char kind, size_t n)
{
	char		buf[RESP_HEADER_MAX];
	char	   *d = buf + sizeof(buf);
	size_t		len;

	do
	{
		*--d = '0' + (char) (n % 10);
		n /= 10;
	} while (n > 0);
	*p++ = kind;
	len = buf + sizeof(buf) - d;
	memcpy(p, d, len);
	p += len;
	*p++ = '\r';
	*p++ = '\n';
	return p;
}

/*
 * Queue cmd on conn (as EVAL with the script's body, if as_eval), its reply
 * to go to slot: a reply index, or a SLOT_* for replies no caller reads.
 * The buffer is grown once for the whole command, then filled.
 */
bool
rconn_queue(RedisConn *conn, RedisCmd *cmd, bool as_eval, int slot)
{
	bool		ok;
	size_t		need = RESP_HEADER_MAX;

	if (conn->outpos == conn->outlen)
		conn->outpos = conn->outlen = 0;
	for (int i = 0; i < cmd->argc; i++)
	{
		size_t		len = cmd->argvlen[i];

		if (as_eval && cmd->script != NULL && i < 2)
			len = (i == 0) ? 4 : strlen(cmd->script->body);
		need += RESP_HEADER_MAX + len + 2;
	}
	/* room for its reply's slot before any byte: none goes without one */
	ok = out_reserve(conn, need);
	if (ok && conn->nslots >= conn->maxslots)
	{
		int			newmax = Max(16, conn->maxslots * 2);
		int		   *slots = realloc(conn->slots, newmax * sizeof(int));

		if (slots == NULL)
			ok = false;
		else
		{
			conn->slots = slots;
			conn->maxslots = newmax;
		}
	}
	if (ok)
	{
		char	   *p = conn->out + conn->outlen;

		p = put_header(p, '*', cmd->argc);
		for (int i = 0; i < cmd->argc; i++)
		{
			const char *arg = cmd->argv[i];
			size_t		len = cmd->argvlen[i];

			if (as_eval && cmd->script != NULL && i < 2)
			{
				arg = (i == 0) ? "EVAL" : cmd->script->body;
				len = strlen(arg);
			}
			p = put_header(p, '$', len);
			memcpy(p, arg, len);
			p += len;
			*p++ = '\r';
			*p++ = '\n';
		}
		conn->outlen = p - conn->out;
	}
	if (!ok)
	{
		rconn_set_failure(conn, RF_LOST, "out of memory");
		return false;
	}
	conn->slots[conn->nslots++] = slot;
	return true;
}

/* Forget the last round trip's replies (and expected replies). */
void
rconn_reset_replies(RedisConn *conn)
{
	if (conn->replycxt)
		MemoryContextReset(conn->replycxt);
	conn->replies = NULL;
	conn->nreplies = 0;
	conn->maxreplies = 0;
	conn->nslots = 0;
	conn->nextslot = 0;
	conn->reply_bytes = 0;
	conn->reply_elements = 0;
}

/* Free the buffers and the reader of a closed connection. */
void
rconn_free_io(RedisConn *conn)
{
	if (conn->reader)
	{
		redisReaderFree(conn->reader);
		conn->reader = NULL;
	}
	conn->outpos = conn->outlen = 0;
	if (conn->outcap > 65536)
	{
		free(conn->out);
		conn->out = NULL;
		conn->outcap = 0;
	}
}

/* hiredis' reply r, copied into our own reply type in cxt. */
RReply *
rconn_convert_reply(const redisReply *r, MemoryContext cxt)
{
	RReply	   *out = MemoryContextAllocZero(cxt, sizeof(RReply));

	switch (r->type)
	{
		case REDIS_REPLY_STATUS:
		case REDIS_REPLY_ERROR:
			{
				/* text that reaches messages: safe to show (base.h) */
				MemoryContext old = MemoryContextSwitchTo(cxt);

				out->type = r->type == REDIS_REPLY_STATUS ? RREPLY_STATUS :
					RREPLY_ERROR;
				out->str = rlock_printable(r->str, r->len);
				out->len = strlen(out->str);
				MemoryContextSwitchTo(old);
			}
			break;
		case REDIS_REPLY_STRING:
			out->type = RREPLY_STRING;
			out->len = r->len;
			out->str = MemoryContextAlloc(cxt, r->len + 1);
			memcpy(out->str, r->str, r->len);
			out->str[r->len] = '\0';
			break;
		case REDIS_REPLY_INTEGER:
			out->type = RREPLY_INTEGER;
			out->integer = r->integer;
			break;
		case REDIS_REPLY_ARRAY:
			out->type = RREPLY_ARRAY;
			out->elements = r->elements;
			if (r->elements > 0)
				out->element = MemoryContextAllocHuge(cxt,
													  r->elements * sizeof(RReply *));
			for (size_t i = 0; i < r->elements; i++)
				out->element[i] = rconn_convert_reply(r->element[i], cxt);
			break;
		default:
			out->type = RREPLY_NIL;
			break;
	}
	return out;
}

/*
 * Queue the pipeline cmds[0..ncmds-1] on conn, reply i to slot i.  The
 * connections of a round trip over several nodes that all send the same
 * pipeline (a Redlock's masters) need its bytes made only once: given
 * shared, the first to queue it encodes it and keeps a copy there, the
 * others copy those bytes.
 */
bool
rconn_queue_pipeline(RedisConn *conn, RedisCmd *cmds, int ncmds,
					 StringInfo shared)
{
	size_t		start;

	if (conn->outpos == conn->outlen)
		conn->outpos = conn->outlen = 0;
	start = conn->outlen;
	if (shared == NULL || shared->len == 0)
	{
		for (int i = 0; i < ncmds; i++)
			if (!rconn_queue(conn, &cmds[i], false, i))
				return false;
		if (shared != NULL)
			appendBinaryStringInfo(shared, conn->out + start,
								   conn->outlen - start);
		return true;
	}
	if (conn->outlen + shared->len > conn->outcap)
	{
		size_t		newcap = Max(conn->outcap * 2,
								 conn->outlen + shared->len + 1024);
		char	   *out = realloc(conn->out, newcap);

		if (out == NULL)
			goto oom;
		conn->out = out;
		conn->outcap = newcap;
	}
	if (conn->nslots + ncmds > conn->maxslots)
	{
		int			newmax = Max(16, conn->maxslots * 2);
		int		   *slots;

		while (newmax < conn->nslots + ncmds)
			newmax *= 2;
		slots = realloc(conn->slots, newmax * sizeof(int));
		if (slots == NULL)
			goto oom;
		conn->slots = slots;
		conn->maxslots = newmax;
	}
	memcpy(conn->out + conn->outlen, shared->data, shared->len);
	conn->outlen += shared->len;
	for (int i = 0; i < ncmds; i++)
		conn->slots[conn->nslots++] = i;
	return true;

oom:
	rconn_set_failure(conn, RF_LOST, "out of memory");
	return false;
}


/* ----------------------------------------------------------------
 * Moving bytes
 * ----------------------------------------------------------------
 */

/* The failure a transport error stands for. */
RconnFailure
rconn_failure_of(const TransportError *err)
{
	switch (err->kind)
	{
		case TE_TLS:
			return RF_TLS;
		case TE_CONFIG:
			return RF_CONFIG;
		case TE_CONNECT:
			return RF_CONNECT;
		default:
			return RF_LOST;
	}
}

/* What the socket must become for the transport to go on. */
uint32
rconn_want_of(TransportStatus st)
{
	return st == TS_WANT_WRITE ? WL_SOCKET_WRITEABLE : WL_SOCKET_READABLE;
}

/*
 * A transport call that did not finish: note what the socket must become,
 * or why the connection failed (TS_ERROR).
 */
static TransportStatus
not_done(RedisConn *conn, TransportStatus st, const TransportError *err)
{
	if (st == TS_WANT_READ || st == TS_WANT_WRITE)
	{
		conn->want = rconn_want_of(st);
		return st;
	}
	if (st == TS_CLOSED)
		rconn_set_failure(conn, RF_LOST, "Redis closed the connection");
	else
		rconn_set_failure(conn, rconn_failure_of(err), err->detail);
	return TS_ERROR;
}

/* Write what is queued, as far as the socket takes it now. */
TransportStatus
rconn_write_some(RedisConn *conn)
{
	while (conn->outpos < conn->outlen)
	{
		TransportError err;
		size_t		n;
		TransportStatus st;

		/* (not zeroed whole: its 300 bytes of detail, for every write) */
		err.kind = TE_NONE;
		err.detail[0] = '\0';
		st = transport_write(conn->transport, conn->out + conn->outpos,
							 conn->outlen - conn->outpos, &n, &err);
		conn->outpos += n;
		if (st != TS_DONE)
			return not_done(conn, st, &err);
	}
	conn->outpos = conn->outlen = 0;
	return TS_DONE;
}

/* Read what the socket has now into the reply parser. */
TransportStatus
rconn_read_some(RedisConn *conn)
{
	char		buf[16384];
	size_t		n;
	TransportError err;
	TransportStatus st;

	/* (not zeroed whole: its 300 bytes of detail, for every read) */
	err.kind = TE_NONE;
	err.detail[0] = '\0';
	st = transport_read(conn->transport, buf, sizeof(buf),
										&n, &err);

	if (st == TS_DONE)
	{
		redisReader *reader = conn->reader;

		if (redisReaderFeed(reader, buf, n) != REDIS_OK)
		{
			rconn_set_failure(conn, RF_PROTOCOL, reader->errstr);
			return TS_ERROR;
		}
		/* what is buffered is the unfinished part of one reply */
		if (reader->len - reader->pos > RCONN_REPLY_MAX_BYTES - conn->reply_bytes)
		{
			rconn_set_failure(conn, RF_PROTOCOL,
							  psprintf("a reply exceeded %d MB (a string or a line that does not end)",
									   RCONN_REPLY_MAX_BYTES / (1024 * 1024)));
			return TS_ERROR;
		}
		/* and so does a line (hiredis 0.14 scans it anew at each read) */
		if (reader->len - reader->pos > RCONN_REPLY_MAX_LINE &&
			memchr(reader->buf + reader->pos, '\n', RCONN_REPLY_MAX_LINE) == NULL)
		{
			rconn_set_failure(conn, RF_PROTOCOL,
							  psprintf("a line of a reply ran past %d kB without ending",
									   RCONN_REPLY_MAX_LINE / 1024));
			return TS_ERROR;
		}
		return TS_DONE;
	}
	return not_done(conn, st, &err);
}

/*
 * Between two reads from a server that keeps sending: may reading go on?
 * Not past the deadline; and interrupts (cancel, statement_timeout,
 * termination) are processed here as in a wait (an ERROR may escape), so
 * that a stream that never pauses cannot keep them out.
 */
bool
rconn_read_on(TimestampTz deadline)
{
	CHECK_FOR_INTERRUPTS();
	return GetCurrentTimestamp() < deadline;
}