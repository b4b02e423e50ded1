/*-------------------------------------------------------------------------
 *
 * connection_exchange.c
 *	  Round trips: commands encoded and pipelined, replies parsed, over one
 *	  connection or several at once; and the one interruptible wait.
 *
 * rconn_run_parallel() drives a set of connections, each with its own
 * pipeline of commands, through connecting (socket, TLS, handshake) and the
 * round trip, without ever blocking: each connection goes as far as it can,
 * then the wait primitive sleeps until one of their sockets is ready, the
 * process latch is set (interrupts are processed there: cancel,
 * statement_timeout, termination) or the earliest deadline passes.  A
 * single connection waits on its own wait event set; several share one
 * (connection_wait.c).
 * Every other round trip of rlock (rconn_run, rconn_ensure) is this with
 * one connection, so the Sentinel, Cluster and Redlock deployments ask
 * their nodes in parallel through the same code.
 *
 * Commands are encoded here (RESP is a few lines); hiredis' reader parses
 * the replies (bounded: connection_reply.c), which are copied into our own
 * reply type in a memory context the connection resets at its next round
 * trip; a server that never pauses still meets the deadline and the
 * interrupts between two reads (rconn_read_on).  Scripts run by
 * EVALSHA; a NOSCRIPT reply makes us send the body with EVAL, which also
 * loads it into the server's script cache.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "redis/redis.h"
#include "redis/redis_int.h"
#include "base/base.h"

/* Where one op of rconn_run_parallel is. */
typedef struct OpState
{
	RconnOp    *op;
	bool		done;
	bool		queued;			/* the op's commands are queued */
	bool		reloaded;		/* NOSCRIPT replays were queued */
	bool		was_proven;		/* the connection had worked when queued */
	int			attempt;
	TimestampTz deadline;
} OpState;

/* ----------------------------------------------------------------
 * Encoding and replies
 * ----------------------------------------------------------------
 */

static bool
out_append(RedisConn *conn, const char *s, size_t len)
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
	memcpy(conn->out + conn->outlen, s, len);
	conn->outlen += len;
	return true;
}

static bool
out_header(RedisConn *conn, char kind, size_t n)
{
	char		buf[32];
	int			len = snprintf(buf, sizeof(buf), "%c%zu\r\n", kind, n);

	return out_append(conn, buf, len);
}

/*
 * Queue cmd on conn (as EVAL with the script's body, if as_eval), its reply
 * to go to slot: a reply index, or a SLOT_* for replies no caller reads.
 */
bool
rconn_queue(RedisConn *conn, RedisCmd *cmd, bool as_eval, int slot)
{
	bool		ok;

	if (conn->outpos == conn->outlen)
		conn->outpos = conn->outlen = 0;
	ok = out_header(conn, '*', cmd->argc);
	for (int i = 0; ok && i < cmd->argc; i++)
	{
		const char *arg = cmd->argv[i];
		size_t		len = cmd->argvlen[i];

		if (as_eval && cmd->script != NULL && i < 2)
		{
			arg = (i == 0) ? "EVAL" : cmd->script->body;
			len = strlen(arg);
		}
		ok = out_header(conn, '$', len) && out_append(conn, arg, len) &&
			out_append(conn, "\r\n", 2);
	}
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

static RReply *
convert_reply(const redisReply *r, MemoryContext cxt)
{
	RReply	   *out = MemoryContextAllocZero(cxt, sizeof(RReply));

	switch (r->type)
	{
		case REDIS_REPLY_STRING:
		case REDIS_REPLY_STATUS:
		case REDIS_REPLY_ERROR:
			out->type = r->type == REDIS_REPLY_STRING ? RREPLY_STRING :
				r->type == REDIS_REPLY_STATUS ? RREPLY_STATUS : RREPLY_ERROR;
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
				out->element[i] = convert_reply(r->element[i], cxt);
			break;
		default:
			out->type = RREPLY_NIL;
			break;
	}
	return out;
}

static bool
is_verb(const RedisCmd *cmd, const char *verb)
{
	return cmd->argc >= 1 && cmd->argvlen[0] == strlen(verb) &&
		pg_strncasecmp(cmd->argv[0], verb, cmd->argvlen[0]) == 0;
}

static bool
is_asking(const RedisCmd *cmd)
{
	return is_verb(cmd, "ASKING");
}

static bool
is_wait(const RedisCmd *cmd)
{
	return is_verb(cmd, "WAIT");
}

static bool
is_noscript(const RReply *r)
{
	return r->type == RREPLY_ERROR && r->len >= 8 &&
		strncmp(r->str, "NOSCRIPT", 8) == 0;
}

/* ----------------------------------------------------------------
 * Moving bytes
 * ----------------------------------------------------------------
 */

static RconnFailure
failure_of(const TransportError *err)
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

static uint32
want_of(TransportStatus st)
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
		conn->want = want_of(st);
		return st;
	}
	if (st == TS_CLOSED)
		rconn_set_failure(conn, RF_LOST, "Redis closed the connection");
	else
		rconn_set_failure(conn, failure_of(err), err->detail);
	return TS_ERROR;
}

/* Write what is queued, as far as the socket takes it now. */
TransportStatus
rconn_write_some(RedisConn *conn)
{
	while (conn->outpos < conn->outlen)
	{
		TransportError err = {0};
		size_t		n;
		TransportStatus st = transport_write(conn->transport,
											 conn->out + conn->outpos,
											 conn->outlen - conn->outpos,
											 &n, &err);

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
	TransportError err = {0};
	TransportStatus st = transport_read(conn->transport, buf, sizeof(buf),
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

/* ----------------------------------------------------------------
 * Driving round trips
 * ----------------------------------------------------------------
 */

static void
op_failed(OpState *os)
{
	RedisConn  *conn = os->op->conn;

	/* a located master that failed is not the sentinels' first answer */
	if (conn->node.kind == NODE_SENTINEL_MASTER && conn->node.host[0] != '\0' &&
		conn->failure != RF_NOT_MASTER && conn->failure != RF_NO_MASTER)
		strlcpy(conn->failed_at, conn->addr, sizeof(conn->failed_at));
	if (conn->state == CS_CONNECTING || conn->state == CS_HANDSHAKE)
	{
		if (conn->failure == RF_TIMEOUT && conn->state == CS_CONNECTING &&
			conn->transport != NULL &&
			transport_tls_unanswered(conn->transport))
			rconn_set_failure(conn, RF_TLS,
							  psprintf("the server does not speak TLS, or is stalled: it did not answer the TLS handshake within rlock.connect_timeout (%d ms)",
									   rconn_connect_timeout_ms()));
		else if (conn->failure == RF_TIMEOUT)
			conn->failure = RF_CONNECT_TIMEOUT;
	}
	else if (conn->failure == RF_LOST && os->was_proven &&
			 conn->nreplies == 0 && os->attempt == 0)
	{
		/*
		 * A connection that worked before and broke before answering
		 * anything (Redis restarted, or closed an idle connection) is
		 * retried once on a fresh one.
		 */
		rconn_discard(conn);
		os->attempt++;
		os->queued = false;
		os->reloaded = false;
		return;
	}
	rconn_discard_failed(conn);
	os->done = true;
	os->op->ok = false;
}

/* Queue the op's commands (after latches to DEL) on a ready connection. */
static bool
queue_op(OpState *os)
{
	RedisConn  *conn = os->op->conn;
	int			block_ms = 0;

	rconn_reset_replies(conn);
	if (os->op->ncmds > 0)
		conn->replies = MemoryContextAllocZero(conn->replycxt,
											   os->op->ncmds * sizeof(RReply *));
	conn->maxreplies = os->op->ncmds;
	if (!rconn_queue_setname(conn))
		return false;
	/* re-learn the role and replica count now and then, in passing */
	if (conn->role == RCONN_COMMANDS && conn->node.kind != NODE_SENTINEL &&
		(rlock_replica_acks > 0 || conn->node.kind == NODE_SENTINEL_MASTER) &&
		TimestampDifferenceExceeds(conn->role_at, GetCurrentTimestamp(),
								   RCONN_ROLE_REFRESH_MS) &&
		!rconn_queue_role(conn))
		return false;
	if (conn->ndeferred > 0)
	{
		RedisCmd	del;

		rcmd_init(&del);
		rcmd_str(&del, "DEL");
		for (int i = 0; i < conn->ndeferred; i++)
			rcmd_str(&del, conn->deferred_del[i]);
		(void) rconn_queue(conn, &del, false, SLOT_DROP);
		for (int i = 0; i < conn->ndeferred; i++)
			free(conn->deferred_del[i]);
		conn->ndeferred = 0;
	}
	for (int i = 0; i < os->op->ncmds; i++)
		if (!rconn_queue(conn, &os->op->cmds[i], false, i))
			return false;
	os->queued = true;
	os->was_proven = conn->proven;
	for (int i = 0; i < os->op->ncmds; i++)
		block_ms += os->op->cmds[i].block_ms;	/* e.g. WAIT's timeout */
	os->deadline = rconn_round_trip_deadline(conn,
											 rconn_command_timeout_ms() + block_ms);
	conn->state = CS_EXCHANGE;
	conn->busy = true;
	stats_count(RLOCK_STAT_ROUND_TRIPS);
	return true;
}

/* A reply arrived for slot. */
static bool
take_reply(OpState *os, int slot, redisReply *r)
{
	RedisConn  *conn = os->op->conn;

	if (slot == SLOT_ROLE)
	{
		bool		ok = rconn_take_role(conn, r);

		freeReplyObject(r);
		return ok;
	}
	if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "READONLY", 8) == 0)
		conn->demoted = true;	/* a replica now: replace the connection */
	if (slot >= 0)
	{
		conn->replies[slot] = convert_reply(r, conn->replycxt);
		conn->nreplies++;
		if (conn->progress_deadlines)
			os->deadline = rconn_round_trip_deadline(conn, rconn_command_timeout_ms());
	}
	else if ((slot == SLOT_AUTH || slot == SLOT_SELECT) &&
			 r->type == REDIS_REPLY_ERROR)
	{
		rconn_set_failure(conn, slot == SLOT_AUTH ? RF_AUTH : RF_SELECT, r->str);
		freeReplyObject(r);
		return false;
	}
	freeReplyObject(r);
	return true;
}

/*
 * Take os as far as it goes without waiting.  Returns when it is done (ok
 * or failed) or must wait for its socket (conn->want).
 */
static void
step(OpState *os)
{
	RedisConn  *conn = os->op->conn;
	int			nread = 0;

	for (;;)
	{
		TransportError terr = {0};
		TransportStatus st;
		bool		sent;

		switch (conn->state)
		{
			case CS_CLOSED:
				os->deadline = rconn_round_trip_deadline(conn,
														 rconn_connect_timeout_ms());
				if (!rconn_begin_connect(conn, os->deadline))
					goto failed;
				/* asking the sentinels does not eat into the connect bound */
				if (conn->node.kind == NODE_SENTINEL_MASTER)
					os->deadline = rconn_round_trip_deadline(conn,
															 rconn_connect_timeout_ms());
				conn->busy = true;
				continue;

			case CS_CONNECTING:
				st = transport_connect_step(conn->transport, &terr);
				if (st == TS_DONE)
				{
					conn->state = CS_HANDSHAKE;
					continue;
				}
				if (st == TS_WANT_READ || st == TS_WANT_WRITE)
				{
					conn->want = want_of(st);
					return;
				}
				rconn_set_failure(conn, failure_of(&terr), terr.detail);
				goto failed;

			case CS_READY:
				if (os->op->ncmds == 0 && !os->queued)
				{
					os->done = true;
					os->op->ok = true;
					return;
				}
				if (!queue_op(os))
					goto failed;
				continue;

			case CS_HANDSHAKE:
			case CS_EXCHANGE:
				break;
		}

		/*
		 * Send what is queued, read and parse what came.  Right after
		 * sending, the answer cannot be there yet unless the transport
		 * holds it already: wait for the socket rather than read in vain.
		 */
		sent = conn->outpos < conn->outlen;
		if (rconn_write_some(conn) == TS_ERROR)
			goto failed;
		while (conn->nextslot < conn->nslots)
		{
			void	   *r = NULL;

			if (!rconn_get_reply(conn, &r))
				goto failed;
			if (r != NULL)
			{
				if (!take_reply(os, conn->slots[conn->nextslot++], r))
					goto failed;
				continue;
			}
			if (sent && conn->outpos == conn->outlen &&
				!transport_pending(conn->transport))
			{
				sent = false;
				conn->want = WL_SOCKET_READABLE;
				return;
			}
			/* a read right after another: no wait checked the deadline */
			if (nread++ > 0 && !rconn_read_on(os->deadline))
			{
				rconn_set_failure(conn, RF_TIMEOUT, NULL);
				goto failed;
			}
			st = rconn_read_some(conn);
			if (st == TS_ERROR)
				goto failed;
			if (st != TS_DONE)
				break;
		}
		if (conn->nextslot < conn->nslots || conn->outpos < conn->outlen)
		{
			if (conn->outpos < conn->outlen)
				conn->want = WL_SOCKET_WRITEABLE | WL_SOCKET_READABLE;
			return;
		}

		/* everything expected has arrived */
		if (conn->state == CS_HANDSHAKE)
		{
			rconn_handshake_done(conn);
			continue;
		}
		if (!os->reloaded)
		{
			int			nmissing = 0;

			os->reloaded = true;
			for (int i = 0; i < os->op->ncmds; i++)
			{
				RedisCmd   *cmds = os->op->cmds;

				if (cmds[i].script == NULL || !is_noscript(conn->replies[i]))
					continue;
				/*
				 * Send the body.  A script asked of a Cluster node with
				 * ASKING needs ASKING again in front of it; the WAIT that
				 * followed it counted nothing of it and goes again behind
				 * it.
				 */
				if (i > 0 && is_asking(&cmds[i - 1]) &&
					!rconn_queue(conn, &cmds[i - 1], false, SLOT_DROP))
					goto failed;
				if (!rconn_queue(conn, &cmds[i], true, i))
					goto failed;
				conn->nreplies--;
				nmissing++;
				while (i + 1 < os->op->ncmds && is_wait(&cmds[i + 1]))
				{
					i++;
					if (!rconn_queue(conn, &cmds[i], false, i))
						goto failed;
					conn->nreplies--;
				}
			}
			if (nmissing > 0)
			{
				stats_count(RLOCK_STAT_ROUND_TRIPS);
				continue;
			}
		}
		conn->state = CS_READY;
		conn->busy = false;
		conn->proven = true;
		conn->failure = RF_NONE;
		conn->last_used = GetCurrentTimestamp();
		os->op->replies = conn->replies;
		os->op->ok = true;
		os->done = true;
		return;

failed:
		op_failed(os);
		if (os->done)
			return;
		/* retrying on a fresh connection */
	}
}

void
rconn_run_parallel(RconnOp *ops, int nops)
{
	/* (room for a Redlock's usual masters without a palloc) */
#define INLINE_OPS	8
	OpState		inline_os[INLINE_OPS];
	bool		inline_ready[INLINE_OPS];
	RconnWaiter inline_waiters[INLINE_OPS];
	OpState    *os = nops <= INLINE_OPS ? inline_os :
		palloc(nops * sizeof(OpState));
	bool	   *ready = nops <= INLINE_OPS ? inline_ready :
		palloc(nops * sizeof(bool));
	RconnWaiter *waiters = nops <= INLINE_OPS ? inline_waiters :
		palloc(nops * sizeof(RconnWaiter));

	for (int i = 0; i < nops; i++)
	{
		RedisConn  *conn = ops[i].conn;

		Assert(conn->node.kind != NODE_CLUSTER);	/* routed: cluster.c */
		memset(&os[i], 0, sizeof(OpState));
		os[i].op = &ops[i];
		ops[i].ok = false;
		ops[i].replies = NULL;
		ready[i] = true;		/* every op takes its first step */
		/* left mid-way (an interrupt), stale, broken or idle: start afresh */
		if (conn->state != CS_CLOSED &&
			(conn->state != CS_READY || conn->busy || rconn_is_stale(conn) ||
			 rconn_idle_expired(conn) || conn->demoted ||
			 rconn_topology_moved(conn)))
			rconn_discard(conn);
	}

	for (;;)
	{
		int			active = 0;
		TimestampTz now;

		/* only the ops whose socket is ready: the others would read in vain */
		for (int i = 0; i < nops; i++)
		{
			if (!os[i].done && ready[i])
				step(&os[i]);
			if (!os[i].done)
				active++;
		}
		if (active == 0)
			break;

		if (active == 1)
		{
			for (int i = 0; i < nops; i++)
			{
				RedisConn  *conn = os[i].op->conn;

				if (os[i].done)
					continue;
				ready[i] = true;
				if (!rconn_wait(conn, conn->want, os[i].deadline, NULL))
				{
					rconn_set_failure(conn, RF_TIMEOUT, NULL);
					op_failed(&os[i]);
				}
			}
			continue;
		}
		for (int i = 0; i < nops; i++)
		{
			waiters[i].conn = os[i].op->conn;
			waiters[i].done = os[i].done;
			waiters[i].deadline = os[i].deadline;
		}
		rconn_wait_many(waiters, nops);
		for (int i = 0; i < nops; i++)
			ready[i] = waiters[i].ready;
		now = GetCurrentTimestamp();
		for (int i = 0; i < nops; i++)
		{
			if (!os[i].done && now >= os[i].deadline)
			{
				rconn_set_failure(os[i].op->conn, RF_TIMEOUT, NULL);
				op_failed(&os[i]);
				ready[i] = true;	/* (retried on a fresh connection) */
			}
		}
	}
	if (os != inline_os)
	{
		pfree(os);
		pfree(ready);
		pfree(waiters);
	}
}
