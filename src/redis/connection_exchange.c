/*-------------------------------------------------------------------------
 *
 * connection_exchange.c
 *	  One connection's round trip, step by step: its pipeline of commands
 *	  queued, the connection driven through connecting (socket, TLS,
 *	  handshake: connection_connect.c) and the exchange as far as it goes
 *	  without waiting (the bytes: connection_io.c), each reply taken where
 *	  it belongs, a failure retried once on a fresh connection where that
 *	  is safe.  connection_parallel.c drives any number of these at once
 *	  and waits between their steps.
 *
 * Scripts run by EVALSHA; a NOSCRIPT reply makes us send the body with
 * EVAL, which also loads it into the server's script cache.  A connection
 * left owing the replies of a round trip not waited for
 * (rconn_run_quorum) reads and drops them first.  Such a round trip is
 * left only where its server was seen running each of its scripts on this
 * socket (rconn_scripts_known), or is silent (connection_parallel.c); a
 * NOSCRIPT among the dropped replies
 * (the scripts flushed meanwhile) makes the connection forget them all.
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


/* ----------------------------------------------------------------
 * Commands the driving looks at
 * ----------------------------------------------------------------
 */

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
 * Driving round trips
 * ----------------------------------------------------------------
 */

void
rconn_op_failed(OpState *os)
{
	RedisConn  *conn = os->op->conn;

	/*
	 * No answer in time: silent until a reply comes (rconn_silent), probed
	 * after a pause (connection_parallel.c).
	 */
	if (conn->failure == RF_TIMEOUT)
		rconn_mark_silent(conn);
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
			 conn->nreplies == 0 && os->attempt == 0 &&
			 rcmd_all_resendable(os->op->cmds, os->op->ncmds))
	{
		/*
		 * A connection that worked before and broke before answering
		 * anything (Redis restarted, or closed an idle connection) is
		 * retried once on a fresh one, when its commands cannot apply
		 * twice (an acquire's caller settles a lost reply itself).
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
	int			owed = 0;

	/* the replies a late op still owes come first, to be dropped */
	if (conn->owed)
	{
		owed = conn->nslots - conn->nextslot;
		if (owed > 0)
			memmove(conn->slots, conn->slots + conn->nextslot,
					owed * sizeof(int));
		conn->owed = false;
	}
	rconn_reset_replies(conn);
	conn->nslots = owed;
	if (os->op->ncmds > 0)
		conn->replies = MemoryContextAllocZero(conn->replycxt,
											   os->op->ncmds * sizeof(RReply *));
	conn->maxreplies = os->op->ncmds;
	if (!rconn_queue_setname(conn))
		return false;
	/* who answers on this socket, in front of its first commands */
	if (conn->identify && !conn->identity_asked)
	{
		RedisCmd	info;

		rcmd_init(&info);
		rcmd_str(&info, "INFO");
		rcmd_str(&info, "server");
		if (!rconn_queue(conn, &info, false, SLOT_IDENTITY))
			return false;
		conn->identity_asked = true;
	}
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
		{
			rcmd_str(&del, conn->deferred_del[i]);
			if (conn->deferred_apart)
			{
				if (!rconn_queue(conn, &del, false, SLOT_DROP))
					return false;	/* (closing frees the keys) */
				rcmd_init(&del);
				rcmd_str(&del, "DEL");
			}
		}
		if (!conn->deferred_apart &&
			!rconn_queue(conn, &del, false, SLOT_DROP))
			return false;
		for (int i = 0; i < conn->ndeferred; i++)
			free(conn->deferred_del[i]);
		conn->ndeferred = 0;
	}
	if (!rconn_queue_pipeline(conn, os->op->cmds, os->op->ncmds, os->shared))
		return false;
	os->queued = true;
	os->op->sent = true;
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

/*
 * Remember that conn's server ran script (or, lost: that it knows none
 * for sure any more).
 */
static void
note_script(RedisConn *conn, const RlockScript *script, bool lost)
{
	if (lost)
	{
		conn->nscripts_run = 0;
		return;
	}
	for (int i = 0; i < conn->nscripts_run; i++)
		if (conn->scripts_run[i] == script)
			return;
	if (conn->nscripts_run < RCONN_SCRIPTS_KNOWN)
		conn->scripts_run[conn->nscripts_run++] = script;
}

/*
 * Has the server of op's connection run every script op sends, on this
 * socket?  Only then may op be left without its replies: a NOSCRIPT read
 * later could not run the script any more (unless the scripts were
 * flushed meanwhile: then that one command is lost on that server).
 */
bool
rconn_scripts_known(const RconnOp *op)
{
	RedisConn  *conn = op->conn;

	for (int i = 0; i < op->ncmds; i++)
	{
		bool		known = op->cmds[i].script == NULL;

		for (int k = 0; k < conn->nscripts_run && !known; k++)
			known = conn->scripts_run[k] == op->cmds[i].script;
		if (!known)
			return false;
	}
	return true;
}

/*
 * INFO server's answer: the run_id of the server on this socket ("" when it
 * does not tell, say an ACL refuses INFO).  Only 40 hex digits are taken.
 */
static void
take_identity(RedisConn *conn, const redisReply *r)
{
	const char *p;

	conn->identity_known = true;
	conn->run_id[0] = '\0';
	if (r->type != REDIS_REPLY_STRING || r->str == NULL ||
		(p = strstr(r->str, "run_id:")) == NULL)
		return;
	p += 7;
	if (strspn(p, "0123456789abcdefABCDEF") != RCONN_RUN_ID_LEN)
		return;
	memcpy(conn->run_id, p, RCONN_RUN_ID_LEN);
	conn->run_id[RCONN_RUN_ID_LEN] = '\0';
}

/* A reply arrived for slot. */
static bool
take_reply(OpState *os, int slot, redisReply *r)
{
	RedisConn  *conn = os->op->conn;

	conn->silent = false;		/* its server answers again */
	if (slot == SLOT_IDENTITY)
	{
		/* a server that wants a password the URL did not give: say so */
		bool		noauth = r->type == REDIS_REPLY_ERROR && r->str != NULL &&
			strncmp(r->str, "NOAUTH", 6) == 0;

		if (noauth)
			rconn_set_failure(conn, RF_AUTH, r->str);
		else
			take_identity(conn, r);
		freeReplyObject(r);
		return !noauth;
	}
	if (slot == SLOT_ROLE)
	{
		bool		ok = rconn_take_role(conn, r);

		freeReplyObject(r);
		return ok;
	}
	if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "READONLY", 8) == 0)
		conn->demoted = true;	/* a replica now: replace the connection */
	/*
	 * A script the server lost, in a reply no op reads: it knows none for
	 * sure now, so its next round trips are awaited (and their NOSCRIPT
	 * replies answered with the bodies).
	 */
	if (slot == SLOT_OWED && r->type == REDIS_REPLY_ERROR &&
		strncmp(r->str, "NOSCRIPT", 8) == 0)
		note_script(conn, NULL, true);
	if (slot >= 0 && os->op->cmds[slot].script != NULL)
		note_script(conn, os->op->cmds[slot].script,
					r->type == REDIS_REPLY_ERROR &&
					strncmp(r->str, "NOSCRIPT", 8) == 0);
	if (slot >= 0)
	{
		conn->replies[slot] = rconn_convert_reply(r, conn->replycxt);
		conn->nreplies++;
		/* an error after a script may have run: the socket is not reused */
		if (os->op->cmds[slot].script != NULL &&
			rconn_error_may_have_applied(conn->replies[slot]))
			conn->out_of_step = true;
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
void
rconn_step(OpState *os)
{
	RedisConn  *conn = os->op->conn;
	int			nread = 0;

	for (;;)
	{
		TransportError terr;
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
				terr.kind = TE_NONE;
				terr.detail[0] = '\0';
				st = transport_connect_step(conn->transport, &terr);
				if (st == TS_DONE)
				{
					conn->state = CS_HANDSHAKE;
					continue;
				}
				if (st == TS_WANT_READ || st == TS_WANT_WRITE)
				{
					conn->want = rconn_want_of(st);
					return;
				}
				rconn_set_failure(conn, rconn_failure_of(&terr), terr.detail);
				goto failed;

			case CS_READY:
				if (os->op->ncmds == 0 && !os->queued)
				{
					os->done = true;
					os->op->ok = true;
					return;
				}
				if (!os->queued && conn->role == RCONN_COMMANDS)
				{
					int			unasked;

					/* a reply broke its protocol: never used again */
					if (conn->out_of_step)
					{
						rconn_discard(conn);
						continue;
					}
					/*
					 * Anything the server sent while nothing was asked
					 * would answer our commands: the connection is out of
					 * step, and what came before may have answered the
					 * wrong commands too.  (One the server closed is
					 * replaced, as a retry would.)
					 */
					unasked = conn->owed ? 0 : rconn_unasked_reply(conn);
					if (unasked < 0)
					{
						rconn_discard(conn);
						continue;
					}
					if (unasked > 0)
					{
						rconn_set_failure(conn, RF_PROTOCOL,
										  "Redis sent a reply that no command asked for while the connection was idle; the connection was closed.");
						goto failed;
					}
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

			/* (nothing buffered to parse: the answer is yet to come) */
			if (sent && conn->outpos == conn->outlen &&
				conn->reader->pos >= conn->reader->len &&
				!transport_pending(conn->transport))
			{
				conn->want = WL_SOCKET_READABLE;
				return;
			}
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

		/*
		 * Everything expected has arrived.  Anything more is a reply no
		 * command asked for: the replies taken may answer other commands
		 * than theirs.
		 */
		if (conn->role == RCONN_COMMANDS &&
			(conn->reader->pos < conn->reader->len ||
			 transport_pending(conn->transport)))
		{
			rconn_set_failure(conn, RF_PROTOCOL,
							  "Redis sent more replies than the commands asked for; the connection was closed.");
			goto failed;
		}
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
		if (os->started != 0)	/* (an optional op: its time, for its grace) */
			conn->op_us = Max(conn->last_used - os->started, 1);
		os->op->replies = conn->replies;
		os->op->ok = true;
		os->done = true;
		return;

failed:
		rconn_op_failed(os);
		if (os->done)
			return;
		/* retrying on a fresh connection */
	}
}
