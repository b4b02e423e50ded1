/*-------------------------------------------------------------------------
 *
 * connection.c
 *	  Redis connections: every round trip rlock makes, and the one
 *	  interruptible wait primitive.
 *
 * This file owns all I/O with Redis, as postgres_fdw's connection.c owns its
 * connections.  hiredis is used only as a protocol encoder/decoder over a
 * non-blocking socket: we never call a blocking hiredis function.  Every
 * wait goes through rconn_wait(), which sleeps on the socket and the
 * process latch with a deadline, so cancel, statement_timeout, lock_timeout
 * and backend termination interrupt it, and rlock.connect_timeout /
 * rlock.command_timeout bound it.
 *
 * A backend has (at most) two connections, created on first use: one for
 * commands and scripts, and one that waiters subscribe on (a subscribed
 * RESP2 connection cannot run commands).  The watchdog worker creates its
 * own.  A connection left with a command in flight (an interrupt arrived
 * mid round trip) is "busy" and is discarded on its next use, because its
 * pending reply would be mistaken for the next one.  A failure on a
 * connection that had worked before (Redis restarted, idle connection
 * closed) is retried once on a fresh connection, as postgres_fdw does; all
 * rlock scripts are safe to replay (release carries a request id latch,
 * acquire reports the resulting hold count).
 *
 * Scripts run by EVALSHA; a NOSCRIPT reply makes us send the body with
 * EVAL, which also loads it into the server's script cache.
 *
 * Around it: connection_command.c builds commands, connection_pubsub.c
 * listens on the subscriber connection, connection_error.c words failures,
 * resolve.c resolves host names and url.c owns rlock.redis_url;
 * connection_int.h is the inside they share.  Round trips that cannot be interrupted (interrupts held at
 * COMMIT, ROLLBACK and in error clean-up, or the process exiting) are
 * capped at RLOCK_UNINTERRUPTIBLE_CAP_MS whatever the settings say.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "miscadmin.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "connection.h"
#include "connection_int.h"
#include "resolve.h"
#include "rlock.h"
#include "scripts.h"
#include "stats.h"


static RedisConn *backend_conn = NULL;
static RedisConn *backend_sub = NULL;

static bool rconn_connect(RedisConn *conn);
static bool rconn_exchange(RedisConn *conn, RedisCmd *cmds, int ncmds,
						   TimestampTz deadline);
static void drop_deferred(RedisConn *conn);

/* ----------------------------------------------------------------
 * Connection objects
 * ----------------------------------------------------------------
 */

RedisConn *
rconn_create(const char *label)
{
	RedisConn  *conn;

	conn = MemoryContextAllocZero(TopMemoryContext, sizeof(RedisConn));
	conn->label = label;
	return conn;
}

/* The backend's command connection (created on first use, not connected). */
RedisConn *
rconn_backend(void)
{
	if (backend_conn == NULL)
		backend_conn = rconn_create("rlock");
	return backend_conn;
}

/* The backend's subscriber connection, for waiting on release messages. */
RedisConn *
rconn_backend_subscriber(void)
{
	if (backend_sub == NULL)
		backend_sub = rconn_create("rlock subscriber");
	return backend_sub;
}

void
rconn_free_replies(RedisConn *conn)
{
	for (int i = 0; i < conn->nreplies; i++)
	{
		if (conn->replies[i])
			freeReplyObject(conn->replies[i]);
		conn->replies[i] = NULL;
	}
	conn->nreplies = 0;
}

/* Close the connection (if any); the next use reconnects. */
void
rconn_discard(RedisConn *conn)
{
	rconn_free_replies(conn);
	if (conn->wes)
	{
		FreeWaitEventSet(conn->wes);
		conn->wes = NULL;
	}
	if (conn->ctx)
	{
		redisFree(conn->ctx);
		conn->ctx = NULL;
		ReleaseExternalFD();
	}
	if (conn->url)
	{
		free(conn->url);
		conn->url = NULL;
	}
	drop_deferred(conn);
	conn->busy = false;
	conn->proven = false;
	conn->subscribed = false;
}

/* Close a connection whose round trip failed, keeping why for reporting. */
void
rconn_discard_failed(RedisConn *conn)
{
	RconnFailure f = conn->failure;
	char		detail[sizeof(conn->errdetail)];

	strlcpy(detail, conn->errdetail, sizeof(detail));
	rconn_discard(conn);
	rconn_set_failure(conn, f, detail);
}

/* ----------------------------------------------------------------
 * The wait primitive
 * ----------------------------------------------------------------
 */

/*
 * Wait until the connection's socket is ready for "events"
 * (WL_SOCKET_READABLE or WL_SOCKET_WRITEABLE) or the deadline passes.
 * Interrupts are processed on every latch wake-up (an ERROR may escape from
 * here); with latch_woken, a latch wake-up also ends the wait (setting
 * *latch_woken).  Returns true when the socket is ready, false on timeout,
 * on such a wake-up, or when the postmaster died during process exit.
 */
bool
rconn_wait(RedisConn *conn, uint32 events, TimestampTz deadline,
		   bool *latch_woken)
{
	if (conn->sockevents != events)
	{
		ModifyWaitEvent(conn->wes, conn->sockpos, events, NULL);
		conn->sockevents = events;
	}

	for (;;)
	{
		WaitEvent	ev;
		long		timeout;
		int			n;

		if (deadline == DT_NOEND)
			timeout = -1;
		else
		{
			TimestampTz now = GetCurrentTimestamp();

			if (now >= deadline)
				return false;
			timeout = (long) ((deadline - now + 999) / 1000);
		}

		n = WaitEventSetWait(conn->wes, timeout, &ev, 1, RLOCK_WAIT_EVENT);
		if (n == 0)
			continue;			/* timeout: re-check the deadline */
		if (ev.events & WL_POSTMASTER_DEATH)
		{
			if (proc_exit_inprogress)
				return false;
			proc_exit(1);
		}
		if (ev.events & WL_LATCH_SET)
		{
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
			if (latch_woken != NULL)
			{
				*latch_woken = true;
				return false;
			}
			continue;
		}
		if (ev.events & events)
			return true;
	}
}

/* ----------------------------------------------------------------
 * Connecting
 * ----------------------------------------------------------------
 */

void
rconn_set_failure(RedisConn *conn, RconnFailure f, const char *detail)
{
	conn->failure = f;
	strlcpy(conn->errdetail, detail ? detail : "", sizeof(conn->errdetail));
}

/*
 * Open a non-blocking TCP connection and run the handshake (AUTH, SELECT),
 * all within rlock.connect_timeout.  On failure the connection is left
 * discarded and conn->failure says why.
 */
static bool
rconn_connect(RedisConn *conn)
{
	const RedisUrl *url;
	TimestampTz deadline;
	redisContext *ctx;
	RedisCmd	hs[2];
	int			nhs = 0;
	int			soerr = 0;
	socklen_t	solen = sizeof(soerr);
	char		ip[NI_MAXHOST];
	bool		timed_out = false;
	char	   *err = NULL;

	rconn_discard(conn);
	if (rlock_redis_conf == NULL)
	{
		snprintf(conn->addr, sizeof(conn->addr), "(no rlock.redis_url)");
		rconn_set_failure(conn, RF_CONNECT, NULL);
		return false;
	}
	url = &rlock_redis_conf->url;
	snprintf(conn->addr, sizeof(conn->addr),
			 strchr(url->host, ':') ? "[%s]:%d" : "%s:%d", url->host, url->port);

	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
										   rconn_connect_timeout_ms());

	/* name resolution, bounded by the same deadline and interruptible */
	if (!resolve_host(url->host, deadline, ip, sizeof(ip), &timed_out, &err))
	{
		rconn_set_failure(conn, timed_out ? RF_CONNECT_TIMEOUT : RF_RESOLVE, err);
		return false;
	}

	if (!AcquireExternalFD())
	{
		rconn_set_failure(conn, RF_NOFD, NULL);
		return false;
	}
	ctx = redisConnectNonBlock(ip, url->port);
	if (ctx == NULL || ctx->err)
	{
		rconn_set_failure(conn, RF_CONNECT, ctx ? ctx->errstr : "out of memory");
		if (ctx)
			redisFree(ctx);
		ReleaseExternalFD();
		return false;
	}
	conn->ctx = ctx;
	conn->url = strdup(rlock_redis_conf->full);
	if (conn->url == NULL)
	{
		rconn_discard(conn);
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	}

	conn->wes = RLOCK_CREATE_WAIT_EVENT_SET(3);
	AddWaitEventToSet(conn->wes, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch,
					  NULL);
	AddWaitEventToSet(conn->wes, WL_POSTMASTER_DEATH, PGINVALID_SOCKET,
					  NULL, NULL);
	conn->sockpos = AddWaitEventToSet(conn->wes, WL_SOCKET_WRITEABLE,
									  ctx->fd, NULL, NULL);
	conn->sockevents = WL_SOCKET_WRITEABLE;

	/* Wait for the TCP connection to be established. */
	conn->busy = true;
	if (!rconn_wait(conn, WL_SOCKET_WRITEABLE, deadline, NULL))
	{
		rconn_discard(conn);
		rconn_set_failure(conn, RF_CONNECT_TIMEOUT, NULL);
		return false;
	}
	if (getsockopt(ctx->fd, SOL_SOCKET, SO_ERROR, &soerr, &solen) < 0)
		soerr = errno;
	if (soerr != 0)
	{
		rconn_discard(conn);
		rconn_set_failure(conn, RF_CONNECT, strerror(soerr));
		return false;
	}

	/* Handshake: AUTH and SELECT, pipelined. */
	if (url->password[0] != '\0' || url->user[0] != '\0')
	{
		rcmd_init(&hs[nhs]);
		rcmd_str(&hs[nhs], "AUTH");
		if (url->user[0] != '\0')
			rcmd_str(&hs[nhs], url->user);
		rcmd_str(&hs[nhs], url->password);
		nhs++;
	}
	if (url->db != 0)
	{
		rcmd_init(&hs[nhs]);
		rcmd_str(&hs[nhs], "SELECT");
		rcmd_int(&hs[nhs], url->db);
		nhs++;
	}
	if (nhs > 0)
	{
		if (!rconn_exchange(conn, hs, nhs, deadline))
		{
			RconnFailure f = conn->failure;

			rconn_discard(conn);
			conn->failure = (f == RF_TIMEOUT) ? RF_CONNECT_TIMEOUT : f;
			return false;
		}
		for (int i = 0; i < nhs; i++)
		{
			redisReply *r = conn->replies[i];

			if (r->type == REDIS_REPLY_ERROR)
			{
				bool		is_auth = (strcmp(hs[i].argv[0], "AUTH") == 0);
				char		detail[256];

				strlcpy(detail, r->str, sizeof(detail));
				rconn_discard(conn);
				rconn_set_failure(conn, is_auth ? RF_AUTH : RF_SELECT, detail);
				return false;
			}
		}
		rconn_free_replies(conn);
	}
	conn->busy = false;
	if (conn->connected_before)
		stats_count(RLOCK_STAT_RECONNECTS);
	conn->connected_before = true;
	return true;
}

/* ----------------------------------------------------------------
 * Round trips
 * ----------------------------------------------------------------
 */

bool
rconn_append_command(RedisConn *conn, RedisCmd *cmd, bool as_eval)
{
	const char *argv0[2];
	size_t		len0[2];
	int			rc;

	if (cmd->script == NULL)
		rc = redisAppendCommandArgv(conn->ctx, cmd->argc, cmd->argv,
									cmd->argvlen);
	else
	{
		/* argv[0..1] are EVALSHA <sha>; swap for EVAL <body> if asked */
		argv0[0] = cmd->argv[0];
		argv0[1] = cmd->argv[1];
		len0[0] = cmd->argvlen[0];
		len0[1] = cmd->argvlen[1];
		if (as_eval)
		{
			cmd->argv[0] = "EVAL";
			cmd->argvlen[0] = 4;
			cmd->argv[1] = cmd->script->body;
			cmd->argvlen[1] = strlen(cmd->script->body);
		}
		rc = redisAppendCommandArgv(conn->ctx, cmd->argc, cmd->argv,
									cmd->argvlen);
		cmd->argv[0] = argv0[0];
		cmd->argv[1] = argv0[1];
		cmd->argvlen[0] = len0[0];
		cmd->argvlen[1] = len0[1];
	}
	return rc == REDIS_OK;
}

/*
 * Write everything buffered, waiting for the socket as needed.  Every call
 * starts one round trip (its replies are read next).
 */
bool
rconn_flush_output(RedisConn *conn, TimestampTz deadline)
{
	int			done = 0;

	stats_count(RLOCK_STAT_ROUND_TRIPS);

	for (;;)
	{
		if (redisBufferWrite(conn->ctx, &done) == REDIS_ERR)
		{
			rconn_set_failure(conn, RF_LOST, conn->ctx->errstr);
			return false;
		}
		if (done)
			return true;
		if (!rconn_wait(conn, WL_SOCKET_WRITEABLE, deadline, NULL))
		{
			rconn_set_failure(conn, RF_TIMEOUT, NULL);
			return false;
		}
	}
}

/* Read one reply, waiting for the socket as needed. */
bool
rconn_read_reply(RedisConn *conn, TimestampTz deadline, redisReply **reply)
{
	for (;;)
	{
		void	   *r = NULL;

		if (redisGetReplyFromReader(conn->ctx, &r) == REDIS_ERR)
		{
			rconn_set_failure(conn, RF_PROTOCOL, conn->ctx->errstr);
			return false;
		}
		if (r != NULL)
		{
			*reply = (redisReply *) r;
			return true;
		}
		if (!rconn_wait(conn, WL_SOCKET_READABLE, deadline, NULL))
		{
			rconn_set_failure(conn, RF_TIMEOUT, NULL);
			return false;
		}
		if (redisBufferRead(conn->ctx) == REDIS_ERR)
		{
			rconn_set_failure(conn, RF_LOST, conn->ctx->errstr);
			return false;
		}
	}
}

static void
ensure_reply_slots(RedisConn *conn, int n)
{
	if (n > conn->maxreplies)
	{
		int			newmax = Max(n, Max(8, conn->maxreplies * 2));

		conn->replies = conn->replies
			? repalloc(conn->replies, newmax * sizeof(redisReply *))
			: MemoryContextAllocZero(TopMemoryContext,
									 newmax * sizeof(redisReply *));
		for (int i = conn->maxreplies; i < newmax; i++)
			conn->replies[i] = NULL;
		conn->maxreplies = newmax;
	}
}

static bool
is_noscript(redisReply *r)
{
	return r->type == REDIS_REPLY_ERROR && r->len >= 8 &&
		strncmp(r->str, "NOSCRIPT", 8) == 0;
}

/*
 * Send ncmds commands and read their replies into conn->replies.  Scripts
 * answered with NOSCRIPT are sent again with their body.  The connection
 * stays busy if we return by longjmp; on a false return conn->failure says
 * why and the caller discards the connection.
 */
static bool
rconn_exchange(RedisConn *conn, RedisCmd *cmds, int ncmds,
			   TimestampTz deadline)
{
	int			nmissing = 0;
	bool		deferred = false;

	rconn_free_replies(conn);
	ensure_reply_slots(conn, ncmds);
	conn->busy = true;

	/* latches of answered releases go first, their replies unread by callers */
	if (conn->ndeferred > 0)
	{
		RedisCmd	del;

		rcmd_init(&del);
		rcmd_str(&del, "DEL");
		for (int i = 0; i < conn->ndeferred; i++)
			rcmd_str(&del, conn->deferred_del[i]);
		deferred = rconn_append_command(conn, &del, false);
		if (del.argv != del.inline_argv)
		{
			pfree(del.argv);
			pfree(del.argvlen);
		}
		drop_deferred(conn);
	}
	for (int i = 0; i < ncmds; i++)
	{
		if (!rconn_append_command(conn, &cmds[i], false))
		{
			rconn_set_failure(conn, RF_LOST, "out of memory");
			return false;
		}
	}
	if (!rconn_flush_output(conn, deadline))
		return false;
	if (deferred)
	{
		redisReply *r;

		if (!rconn_read_reply(conn, deadline, &r))
			return false;
		freeReplyObject(r);		/* a failed DEL only leaves a latch to expire */
	}
	for (int i = 0; i < ncmds; i++)
	{
		if (!rconn_read_reply(conn, deadline, &conn->replies[i]))
			return false;
		conn->nreplies = i + 1;
		if (cmds[i].script != NULL && is_noscript(conn->replies[i]))
			nmissing++;
		if (conn->progress_deadlines)
			deadline = rconn_round_trip_deadline(conn, rconn_command_timeout_ms());
	}

	/* Load scripts the server did not know, by running them with EVAL. */
	if (nmissing > 0)
	{
		for (int i = 0; i < ncmds; i++)
		{
			if (cmds[i].script != NULL && is_noscript(conn->replies[i]) &&
				!rconn_append_command(conn, &cmds[i], true))
			{
				rconn_set_failure(conn, RF_LOST, "out of memory");
				return false;
			}
		}
		if (!rconn_flush_output(conn, deadline))
			return false;
		for (int i = 0; i < ncmds; i++)
		{
			redisReply *r;

			if (cmds[i].script == NULL || !is_noscript(conn->replies[i]))
				continue;
			if (!rconn_read_reply(conn, deadline, &r))
				return false;
			freeReplyObject(conn->replies[i]);
			conn->replies[i] = r;
			if (conn->progress_deadlines)
				deadline = rconn_round_trip_deadline(conn, rconn_command_timeout_ms());
		}
	}

	conn->busy = false;
	conn->proven = true;
	conn->failure = RF_NONE;
	return true;
}

/*
 * Make sure conn is connected to the current rlock.redis_url and idle.
 */
bool
rconn_ensure(RedisConn *conn)
{
	if (conn->ctx != NULL &&
		(conn->busy || conn->ctx->err || rlock_redis_conf == NULL ||
		 strcmp(conn->url, rlock_redis_conf->full) != 0))
		rconn_discard(conn);
	if (conn->ctx == NULL)
		return rconn_connect(conn);
	return true;
}

/*
 * The bounds of one round trip and of establishing a connection.  Where a
 * round trip cannot be interrupted (interrupts are held at COMMIT,
 * ROLLBACK and in error clean-up; the process is exiting), the settings,
 * which any user may raise to a minute, are capped: nothing a user sets may
 * make COMMIT, pg_terminate_backend or a shutdown wait.
 */
static bool
uninterruptible(void)
{
	return InterruptHoldoffCount > 0 || CritSectionCount > 0 ||
		proc_exit_inprogress;
}

int
rconn_command_timeout_ms(void)
{
	if (uninterruptible())
		return Min(rlock_command_timeout_ms, RLOCK_UNINTERRUPTIBLE_CAP_MS);
	return rlock_command_timeout_ms;
}

int
rconn_connect_timeout_ms(void)
{
	if (uninterruptible())
		return Min(rlock_connect_timeout_ms, RLOCK_UNINTERRUPTIBLE_CAP_MS);
	return rlock_connect_timeout_ms;
}

/*
 * Give each reply of a pipeline on conn its own command_timeout (the
 * watchdog: a large renewal pipeline that keeps answering must not time
 * out as a whole and be sent again).
 */
void
rconn_set_progress_deadlines(RedisConn *conn, bool on)
{
	conn->progress_deadlines = on;
}

/*
 * No round trip on conn waits past cap (DT_NOEND: no cap): the watchdog
 * stops waiting for renewals that would come too late to count.
 */
void
rconn_set_deadline_cap(RedisConn *conn, TimestampTz cap)
{
	conn->deadline_cap = (cap == DT_NOEND) ? 0 : cap;
}

/* A round trip's deadline: timeout_ms from now, within the cap. */
TimestampTz
rconn_round_trip_deadline(RedisConn *conn, int timeout_ms)
{
	TimestampTz d = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												timeout_ms);

	if (conn->deadline_cap != 0 && conn->deadline_cap < d)
		d = conn->deadline_cap;
	return d;
}

/*
 * DEL key in front of conn's next round trip, without a round trip of its
 * own (the unlock latch of a release that was answered: nothing will
 * replay that release now).  If the connection is lost first, the key's
 * own TTL removes it.
 */
void
rconn_defer_del(RedisConn *conn, const char *key)
{
	char	   *copy;

	if (conn->ndeferred >= conn->maxdeferred)
	{
		int			newmax = Max(8, conn->maxdeferred * 2);
		char	  **arr = realloc(conn->deferred_del, newmax * sizeof(char *));

		if (arr == NULL)
			return;
		conn->deferred_del = arr;
		conn->maxdeferred = newmax;
	}
	copy = strdup(key);
	if (copy != NULL)
		conn->deferred_del[conn->ndeferred++] = copy;
}

static void
drop_deferred(RedisConn *conn)
{
	for (int i = 0; i < conn->ndeferred; i++)
		free(conn->deferred_del[i]);
	conn->ndeferred = 0;
}

/*
 * Connect now if not connected (ERROR on failure), so that a caller can tell
 * "Redis never saw the command" apart from "the command may have run".
 */
void
rconn_ready(RedisConn *conn, const char *what)
{
	if (!rconn_ensure(conn))
		rconn_report(conn, ERROR, what);
}

bool
rconn_run(RedisConn *conn, RedisCmd *cmds, int ncmds,
		  redisReply ***replies, int elevel, const char *what)
{
	for (int attempt = 0;; attempt++)
	{
		bool		was_proven;
		bool		retry;

		if (!rconn_ensure(conn))
			break;
		was_proven = conn->proven;
		if (rconn_exchange(conn, cmds, ncmds,
						   rconn_round_trip_deadline(conn, rconn_command_timeout_ms())))
		{
			*replies = conn->replies;
			return true;
		}

		/*
		 * A connection that worked before and broke before answering
		 * anything (Redis restarted, or closed an idle connection) is
		 * retried once on a fresh one.
		 */
		retry = (conn->failure == RF_LOST && was_proven &&
				 conn->nreplies == 0 && attempt == 0);
		rconn_discard_failed(conn);
		if (!retry)
			break;
	}
	rconn_report(conn, elevel, what);
	return false;
}

/* Run one command; ERROR on failure.  The reply belongs to the connection. */
redisReply *
rconn_run1(RedisConn *conn, RedisCmd *cmd, const char *what)
{
	redisReply **replies;

	rconn_run(conn, cmd, 1, &replies, ERROR, what);
	return replies[0];
}

/* Report why conn's last round trip failed (connection_error.c words it). */
void
rconn_report(RedisConn *conn, int elevel, const char *what)
{
	rconn_report_failure(conn->failure, conn->addr, conn->errdetail, elevel,
						 what);
}

