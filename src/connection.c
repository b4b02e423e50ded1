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
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>
#include <limits.h>
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
#include "rlock.h"
#include "scripts.h"
#include "stats.h"

/* Why a round trip failed. */
typedef enum RconnFailure
{
	RF_NONE = 0,
	RF_CONNECT,					/* could not establish the TCP connection */
	RF_CONNECT_TIMEOUT,			/* connect or handshake exceeded its bound */
	RF_AUTH,					/* AUTH rejected */
	RF_SELECT,					/* SELECT rejected */
	RF_LOST,					/* connection broke during a round trip */
	RF_TIMEOUT,					/* round trip exceeded command_timeout */
	RF_PROTOCOL,				/* garbage from the server */
	RF_NOFD						/* too many open files */
} RconnFailure;

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
};

static RedisConn *backend_conn = NULL;
static RedisConn *backend_sub = NULL;

static void rconn_free_replies(RedisConn *conn);
static bool rconn_connect(RedisConn *conn);
static bool rconn_exchange(RedisConn *conn, RedisCmd *cmds, int ncmds,
						   TimestampTz deadline);
static void rconn_report(RedisConn *conn, int elevel, const char *what);
static void set_failure(RedisConn *conn, RconnFailure f, const char *detail);

/* ----------------------------------------------------------------
 * URL parsing
 * ----------------------------------------------------------------
 */

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Copy [s, s+len) into dst, decoding %XX escapes. */
static bool
copy_decoded(char *dst, size_t dstsize, const char *s, size_t len)
{
	size_t		o = 0;

	for (size_t i = 0; i < len; i++)
	{
		char		c = s[i];

		if (c == '%')
		{
			int			h,
						l;

			if (i + 2 >= len)
				return false;
			h = hexval(s[i + 1]);
			l = hexval(s[i + 2]);
			if (h < 0 || l < 0)
				return false;
			c = (char) (h * 16 + l);
			i += 2;
		}
		if (o + 1 >= dstsize)
			return false;
		dst[o++] = c;
	}
	dst[o] = '\0';
	return true;
}

/*
 * Parse redis://[user[:password]@]host[:port][/db].  On failure sets
 * *errmsg to a palloc'd description (which never contains the password).
 */
bool
rconn_parse_url(const char *url, RedisUrl *out, char **errmsg)
{
	const char *p;
	const char *at;
	const char *hostend;
	const char *slash;

	memset(out, 0, sizeof(*out));
	out->port = 6379;
	out->db = 0;

	if (url == NULL || strncmp(url, "redis://", 8) != 0)
	{
		*errmsg = pstrdup("the URL must start with \"redis://\"");
		return false;
	}
	p = url + 8;
	slash = strchr(p, '/');
	at = strrchr(p, '@');
	if (at != NULL && slash != NULL && at > slash)
		at = NULL;
	if (at != NULL)
	{
		const char *colon = memchr(p, ':', at - p);

		if (colon != NULL)
		{
			if (!copy_decoded(out->user, sizeof(out->user), p, colon - p) ||
				!copy_decoded(out->password, sizeof(out->password),
							  colon + 1, at - colon - 1))
			{
				*errmsg = pstrdup("the user or password in the URL is invalid");
				return false;
			}
		}
		else if (!copy_decoded(out->user, sizeof(out->user), p, at - p))
		{
			*errmsg = pstrdup("the user in the URL is invalid");
			return false;
		}
		p = at + 1;
	}

	/* host: name, IPv4 address, or [IPv6 address] */
	if (*p == '[')
	{
		const char *close = strchr(p, ']');

		if (close == NULL || close - p - 1 <= 0 ||
			close - p - 1 >= (int) sizeof(out->host))
		{
			*errmsg = pstrdup("the IPv6 address in the URL is invalid");
			return false;
		}
		memcpy(out->host, p + 1, close - p - 1);
		out->host[close - p - 1] = '\0';
		hostend = close + 1;
	}
	else
	{
		hostend = p;
		while (*hostend && *hostend != ':' && *hostend != '/')
			hostend++;
		if (hostend == p || hostend - p >= (int) sizeof(out->host))
		{
			*errmsg = pstrdup("the URL has no valid host");
			return false;
		}
		memcpy(out->host, p, hostend - p);
		out->host[hostend - p] = '\0';
	}
	p = hostend;

	if (*p == ':')
	{
		char	   *end;
		long		port;

		errno = 0;
		port = strtol(p + 1, &end, 10);
		if (end == p + 1 || errno != 0 || port < 1 || port > 65535 ||
			(*end != '\0' && *end != '/'))
		{
			*errmsg = pstrdup("the port in the URL is invalid");
			return false;
		}
		out->port = (int) port;
		p = end;
	}
	if (*p == '/')
	{
		char	   *end;
		long		db;

		p++;
		if (*p != '\0')
		{
			errno = 0;
			db = strtol(p, &end, 10);
			if (end == p || *end != '\0' || errno != 0 || db < 0 ||
				db > INT_MAX)
			{
				*errmsg = pstrdup("the database number in the URL is invalid");
				return false;
			}
			out->db = (int) db;
		}
	}
	else if (*p != '\0')
	{
		*errmsg = pstrdup("the URL has trailing characters after the host");
		return false;
	}
	return true;
}

/* ----------------------------------------------------------------
 * Commands
 * ----------------------------------------------------------------
 */

void
rcmd_init(RedisCmd *cmd)
{
	cmd->argc = 0;
	cmd->maxargs = RCMD_INLINE_ARGS;
	cmd->argv = cmd->inline_argv;
	cmd->argvlen = cmd->inline_len;
	cmd->script = NULL;
	cmd->nnum = 0;
}

void
rcmd_arg(RedisCmd *cmd, const char *s, size_t len)
{
	if (cmd->argc >= cmd->maxargs)
	{
		int			newmax = cmd->maxargs * 2;
		const char **argv = palloc(newmax * sizeof(char *));
		size_t	   *lens = palloc(newmax * sizeof(size_t));

		memcpy(argv, cmd->argv, cmd->argc * sizeof(char *));
		memcpy(lens, cmd->argvlen, cmd->argc * sizeof(size_t));
		if (cmd->argv != cmd->inline_argv)
		{
			pfree(cmd->argv);
			pfree(cmd->argvlen);
		}
		cmd->argv = argv;
		cmd->argvlen = lens;
		cmd->maxargs = newmax;
	}
	cmd->argv[cmd->argc] = s;
	cmd->argvlen[cmd->argc] = len;
	cmd->argc++;
}

void
rcmd_str(RedisCmd *cmd, const char *s)
{
	rcmd_arg(cmd, s, strlen(s));
}

void
rcmd_int(RedisCmd *cmd, int64 v)
{
	char	   *buf;
	int			len;

	if (cmd->nnum < RCMD_NUMBUFS)
		buf = cmd->numbuf[cmd->nnum++];
	else
		buf = palloc(24);
	len = snprintf(buf, 24, INT64_FORMAT, v);
	rcmd_arg(cmd, buf, len);
}

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

static void
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
	conn->busy = false;
	conn->proven = false;
	conn->subscribed = false;
}

/* Close a connection whose round trip failed, keeping why for reporting. */
static void
rconn_discard_failed(RedisConn *conn)
{
	RconnFailure f = conn->failure;
	char		detail[sizeof(conn->errdetail)];

	strlcpy(detail, conn->errdetail, sizeof(detail));
	rconn_discard(conn);
	set_failure(conn, f, detail);
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
static bool
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

static void
set_failure(RedisConn *conn, RconnFailure f, const char *detail)
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
	RedisUrl	url;
	char	   *err = NULL;
	TimestampTz deadline;
	redisContext *ctx;
	RedisCmd	hs[2];
	int			nhs = 0;
	int			soerr = 0;
	socklen_t	solen = sizeof(soerr);

	rconn_discard(conn);
	if (!rconn_parse_url(rlock_redis_url, &url, &err))
	{
		snprintf(conn->addr, sizeof(conn->addr), "(invalid rlock.redis_url)");
		set_failure(conn, RF_CONNECT, err);
		return false;
	}
	snprintf(conn->addr, sizeof(conn->addr),
			 strchr(url.host, ':') ? "[%s]:%d" : "%s:%d", url.host, url.port);

	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
										   rlock_connect_timeout_ms);

	if (!AcquireExternalFD())
	{
		set_failure(conn, RF_NOFD, NULL);
		return false;
	}
	ctx = redisConnectNonBlock(url.host, url.port);
	if (ctx == NULL || ctx->err)
	{
		set_failure(conn, RF_CONNECT, ctx ? ctx->errstr : "out of memory");
		if (ctx)
			redisFree(ctx);
		ReleaseExternalFD();
		return false;
	}
	conn->ctx = ctx;
	conn->url = strdup(rlock_redis_url);
	if (conn->url == NULL)
	{
		rconn_discard(conn);
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	}

	conn->wes = CreateWaitEventSet(TopMemoryContext, 3);
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
		set_failure(conn, RF_CONNECT_TIMEOUT, NULL);
		return false;
	}
	if (getsockopt(ctx->fd, SOL_SOCKET, SO_ERROR, &soerr, &solen) < 0)
		soerr = errno;
	if (soerr != 0)
	{
		rconn_discard(conn);
		set_failure(conn, RF_CONNECT, strerror(soerr));
		return false;
	}

	/* Handshake: AUTH and SELECT, pipelined. */
	if (url.password[0] != '\0' || url.user[0] != '\0')
	{
		rcmd_init(&hs[nhs]);
		rcmd_str(&hs[nhs], "AUTH");
		if (url.user[0] != '\0')
			rcmd_str(&hs[nhs], url.user);
		rcmd_str(&hs[nhs], url.password);
		nhs++;
	}
	if (url.db != 0)
	{
		rcmd_init(&hs[nhs]);
		rcmd_str(&hs[nhs], "SELECT");
		rcmd_int(&hs[nhs], url.db);
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
				set_failure(conn, is_auth ? RF_AUTH : RF_SELECT, detail);
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

static bool
append_command(RedisConn *conn, RedisCmd *cmd, bool as_eval)
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
static bool
flush_output(RedisConn *conn, TimestampTz deadline)
{
	int			done = 0;

	stats_count(RLOCK_STAT_ROUND_TRIPS);

	for (;;)
	{
		if (redisBufferWrite(conn->ctx, &done) == REDIS_ERR)
		{
			set_failure(conn, RF_LOST, conn->ctx->errstr);
			return false;
		}
		if (done)
			return true;
		if (!rconn_wait(conn, WL_SOCKET_WRITEABLE, deadline, NULL))
		{
			set_failure(conn, RF_TIMEOUT, NULL);
			return false;
		}
	}
}

/* Read one reply, waiting for the socket as needed. */
static bool
read_reply(RedisConn *conn, TimestampTz deadline, redisReply **reply)
{
	for (;;)
	{
		void	   *r = NULL;

		if (redisGetReplyFromReader(conn->ctx, &r) == REDIS_ERR)
		{
			set_failure(conn, RF_PROTOCOL, conn->ctx->errstr);
			return false;
		}
		if (r != NULL)
		{
			*reply = (redisReply *) r;
			return true;
		}
		if (!rconn_wait(conn, WL_SOCKET_READABLE, deadline, NULL))
		{
			set_failure(conn, RF_TIMEOUT, NULL);
			return false;
		}
		if (redisBufferRead(conn->ctx) == REDIS_ERR)
		{
			set_failure(conn, RF_LOST, conn->ctx->errstr);
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

	rconn_free_replies(conn);
	ensure_reply_slots(conn, ncmds);
	conn->busy = true;

	for (int i = 0; i < ncmds; i++)
	{
		if (!append_command(conn, &cmds[i], false))
		{
			set_failure(conn, RF_LOST, "out of memory");
			return false;
		}
	}
	if (!flush_output(conn, deadline))
		return false;
	for (int i = 0; i < ncmds; i++)
	{
		if (!read_reply(conn, deadline, &conn->replies[i]))
			return false;
		conn->nreplies = i + 1;
		if (cmds[i].script != NULL && is_noscript(conn->replies[i]))
			nmissing++;
	}

	/* Load scripts the server did not know, by running them with EVAL. */
	if (nmissing > 0)
	{
		for (int i = 0; i < ncmds; i++)
		{
			if (cmds[i].script != NULL && is_noscript(conn->replies[i]) &&
				!append_command(conn, &cmds[i], true))
			{
				set_failure(conn, RF_LOST, "out of memory");
				return false;
			}
		}
		if (!flush_output(conn, deadline))
			return false;
		for (int i = 0; i < ncmds; i++)
		{
			redisReply *r;

			if (cmds[i].script == NULL || !is_noscript(conn->replies[i]))
				continue;
			if (!read_reply(conn, deadline, &r))
				return false;
			freeReplyObject(conn->replies[i]);
			conn->replies[i] = r;
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
static bool
rconn_ensure(RedisConn *conn)
{
	if (conn->ctx != NULL &&
		(conn->busy || conn->ctx->err ||
		 strcmp(conn->url, rlock_redis_url) != 0))
		rconn_discard(conn);
	if (conn->ctx == NULL)
		return rconn_connect(conn);
	return true;
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
						   TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   rlock_command_timeout_ms)))
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

/* ----------------------------------------------------------------
 * Error reporting
 * ----------------------------------------------------------------
 */

static const char *
for_lock(const char *what)
{
	return what ? psprintf(" for lock \"%s\"", what) : "";
}

static void
rconn_report(RedisConn *conn, int elevel, const char *what)
{
	const char *detail = conn->errdetail;

	stats_count(RLOCK_STAT_REDIS_ERRORS);
	switch (conn->failure)
	{
		case RF_CONNECT:
			ereport(elevel,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("could not connect to Redis at %s%s",
							conn->addr, for_lock(what)),
					 detail[0] ? errdetail_internal("%s", detail) : 0,
					 errhint("Check that Redis is running and that rlock.redis_url points at it.")));
			break;
		case RF_CONNECT_TIMEOUT:
			ereport(elevel,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("timed out connecting to Redis at %s%s",
							conn->addr, for_lock(what)),
					 errdetail("No connection was established within rlock.connect_timeout (%d ms).",
							   rlock_connect_timeout_ms),
					 errhint("Check that Redis is running and that rlock.redis_url points at it.")));
			break;
		case RF_AUTH:
			ereport(elevel,
					(errcode(ERRCODE_INVALID_PASSWORD),
					 errmsg("Redis at %s rejected the credentials of rlock.redis_url%s",
							conn->addr, for_lock(what)),
					 errdetail_internal("%s", detail),
					 errhint("Check the user and password in rlock.redis_url.")));
			break;
		case RF_SELECT:
			ereport(elevel,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("Redis at %s rejected the database number of rlock.redis_url%s",
							conn->addr, for_lock(what)),
					 errdetail_internal("%s", detail),
					 errhint("Check the database number at the end of rlock.redis_url.")));
			break;
		case RF_LOST:
			ereport(elevel,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("lost connection to Redis at %s%s",
							conn->addr, for_lock(what)),
					 detail[0] ? errdetail_internal("%s", detail) : 0,
					 errhint("Check that Redis is running and that rlock.redis_url points at it.")));
			break;
		case RF_TIMEOUT:
			ereport(elevel,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("Redis at %s did not answer in time%s",
							conn->addr, for_lock(what)),
					 errdetail("No reply arrived within rlock.command_timeout (%d ms).",
							   rlock_command_timeout_ms)));
			break;
		case RF_PROTOCOL:
			ereport(elevel,
					(errcode(ERRCODE_PROTOCOL_VIOLATION),
					 errmsg("invalid reply from Redis at %s%s",
							conn->addr, for_lock(what)),
					 errdetail_internal("%s", detail)));
			break;
		case RF_NOFD:
			ereport(elevel,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("could not connect to Redis%s", for_lock(what)),
					 errdetail("There are too many open files on the local server."),
					 errhint("Raise the server's max_files_per_process and/or \"ulimit -n\" limits.")));
			break;
		case RF_NONE:
			elog(elevel, "unexpected Redis failure%s", for_lock(what));
			break;
	}
}

/*
 * Report a Redis error reply.  WRONGTYPE means a non-lock key already uses
 * the lock's name.
 */
void
rconn_reply_error(redisReply *reply, int elevel, const char *what)
{
	stats_count(RLOCK_STAT_REDIS_ERRORS);
	if (reply->len >= 9 && strncmp(reply->str, "WRONGTYPE", 9) == 0)
		ereport(elevel,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("Redis key of lock \"%s\" is not a lock",
						what ? what : "?"),
				 errdetail("Another kind of Redis value already uses that key."),
				 errhint("Choose another lock name, or set rlock.key_prefix.")));
	else if (reply->len >= 6 && strncmp(reply->str, "NOAUTH", 6) == 0)
		ereport(elevel,
				(errcode(ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
				 errmsg("Redis requires authentication%s", for_lock(what)),
				 errdetail_internal("%.*s", (int) Min(reply->len, 500),
									reply->str),
				 errhint("Give the password in rlock.redis_url: redis://[user]:password@host:port/db.")));
	else if (reply->len >= 6 && strncmp(reply->str, "NOPERM", 6) == 0)
		ereport(elevel,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("the Redis user of rlock.redis_url lacks a permission%s",
						for_lock(what)),
				 errdetail_internal("%.*s", (int) Min(reply->len, 500),
									reply->str),
				 errhint("Grant the user the commands EVAL, EVALSHA, PUBLISH, SUBSCRIBE, EXISTS, HEXISTS, HGET, PTTL and PING on the lock keys and channels.")));
	else
		ereport(elevel,
				(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
				 errmsg("Redis returned an error%s", for_lock(what)),
				 errdetail_internal("%.*s", (int) Min(reply->len, 500),
									reply->str)));
}

void
rconn_unexpected_reply(redisReply *reply, const char *what)
{
	if (reply->type == REDIS_REPLY_ERROR)
		rconn_reply_error(reply, ERROR, what);
	stats_count(RLOCK_STAT_REDIS_ERRORS);
	ereport(ERROR,
			(errcode(ERRCODE_PROTOCOL_VIOLATION),
			 errmsg("unexpected reply from Redis%s", for_lock(what)),
			 errdetail_internal("Reply type %d.", reply->type)));
}

/* ----------------------------------------------------------------
 * Publish/subscribe
 * ----------------------------------------------------------------
 */

static bool
is_push(redisReply *r, const char *kind, const char *channel)
{
	if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
		r->element[0]->type != REDIS_REPLY_STRING ||
		strcmp(r->element[0]->str, kind) != 0)
		return false;
	if (channel == NULL)
		return true;
	return r->element[1]->type == REDIS_REPLY_STRING &&
		strcmp(r->element[1]->str, channel) == 0;
}

/*
 * Subscribe the subscriber connection to channel (and to nothing else).
 * Reconnects as needed; ERROR on failure.  Messages of channels we were
 * subscribed to before are skipped.
 */
void
rconn_subscribe(RedisConn *sub, const char *channel, const char *what)
{
	RedisCmd	cmds[2];
	int			n = 0;
	TimestampTz deadline;

	for (int attempt = 0;; attempt++)
	{
		bool		ok;

		if (!rconn_ensure(sub))
		{
			rconn_report(sub, ERROR, what);
		}
		n = 0;
		if (sub->subscribed)
		{
			rcmd_init(&cmds[n]);
			rcmd_str(&cmds[n], "UNSUBSCRIBE");
			n++;
		}
		rcmd_init(&cmds[n]);
		rcmd_str(&cmds[n], "SUBSCRIBE");
		rcmd_str(&cmds[n], channel);
		n++;

		deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
											   rlock_command_timeout_ms);
		rconn_free_replies(sub);
		sub->busy = true;
		sub->subscribed = true;
		ok = true;
		for (int i = 0; i < n && ok; i++)
			ok = append_command(sub, &cmds[i], false);
		if (!ok)
			set_failure(sub, RF_LOST, "out of memory");
		ok = ok && flush_output(sub, deadline);
		while (ok)
		{
			redisReply *r;

			ok = read_reply(sub, deadline, &r);
			if (!ok)
				break;
			if (is_push(r, "subscribe", channel))
			{
				freeReplyObject(r);
				sub->busy = false;
				sub->proven = true;
				return;
			}
			if (r->type == REDIS_REPLY_ERROR)
			{
				set_failure(sub, RF_PROTOCOL, r->str);
				freeReplyObject(r);
				ok = false;
				break;
			}
			freeReplyObject(r);
		}
		if (sub->failure == RF_LOST && sub->proven && attempt == 0)
		{
			rconn_discard(sub);
			continue;
		}
		rconn_discard_failed(sub);
		rconn_report(sub, ERROR, what);
	}
}

/*
 * Wait for a message on the subscribed channel until deadline.
 * Returns 1 when a message arrived, 2 when the process latch was set
 * (another waiter of this server passed the turn on, waitqueue.c), 0 on
 * timeout, -1 when the connection failed (it is then discarded; the caller
 * resubscribes).
 */
int
rconn_wait_message(RedisConn *sub, TimestampTz deadline)
{
	bool		latch_woken = false;

	if (sub->ctx == NULL)
		return -1;
	for (;;)
	{
		void	   *r = NULL;

		if (redisGetReplyFromReader(sub->ctx, &r) == REDIS_ERR)
		{
			rconn_discard(sub);
			return -1;
		}
		if (r != NULL)
		{
			bool		msg = is_push((redisReply *) r, "message", NULL);

			freeReplyObject(r);
			if (msg)
				return 1;
			continue;
		}
		if (!rconn_wait(sub, WL_SOCKET_READABLE, deadline, &latch_woken))
			return latch_woken ? 2 : 0;
		if (redisBufferRead(sub->ctx) == REDIS_ERR)
		{
			rconn_discard(sub);
			return -1;
		}
	}
}

/*
 * Ask to leave the channel without waiting for the answer; the next
 * subscription skips whatever arrives meanwhile.  Never throws.
 */
void
rconn_unsubscribe_nowait(RedisConn *sub)
{
	int			done = 0;
	const char *argv[1] = {"UNSUBSCRIBE"};
	size_t		len[1] = {11};

	if (sub->ctx == NULL || sub->busy || sub->ctx->err)
		return;
	if (redisAppendCommandArgv(sub->ctx, 1, argv, len) != REDIS_OK ||
		redisBufferWrite(sub->ctx, &done) == REDIS_ERR)
		rconn_discard(sub);
}
