/*-------------------------------------------------------------------------
 *
 * connection_error.c
 *	  How rlock words what went wrong with Redis: failed round trips
 *	  (refused, timed out, lost, rejected credentials) and error replies,
 *	  each with its SQLSTATE, the lock it concerns and a hint; and the one
 *	  reader of an error reply's words (its code, the word after it,
 *	  whether a script may have run before it), within its length.
 *
 * Error replies are mapped by their code, wherever Redis put it (Redis 6
 * wraps the errors of commands run by a script in "ERR Error running
 * script ..."):
 *
 *	WRONGTYPE			42809 wrong_object_type: a non-lock value uses the name
 *	NOAUTH				28000 invalid_authorization_specification
 *	WRONGPASS			28P01 invalid_password
 *	NOPERM				42501 insufficient_privilege, the hint naming the
 *						missing command, key or channel permission; so
 *						are the ACL refusals inside a script, which are
 *						plain ERRs ("The user executing the script can't
 *						...", "ACL failure in script: ...")
 *	OOM					53200 out_of_memory (Redis is at maxmemory)
 *	READONLY			25006 read_only_sql_transaction (a replica)
 *	LOADING, BUSY,
 *	MASTERDOWN			57P03 cannot_connect_now (Redis cannot serve yet)
 *	anything else		38000 external_routine_exception
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "mb/pg_wchar.h"

#include "redis/redis.h"
#include "redis/redis_int.h"
#include "base/base.h"

static void rconn_report_failure(RconnFailure failure, const RedisUrl *node,
								 const char *addr, const char *detail,
								 int elevel, const char *what);

/* ----------------------------------------------------------------
 * A connection's failure: kept, read, reported
 * ----------------------------------------------------------------
 */

void
rconn_set_failure(RedisConn *conn, RconnFailure f, const char *detail)
{
	conn->failure = f;
	/* (a server's words may be in it: safe to show) */
	rlock_printable_into(conn->errdetail, sizeof(conn->errdetail),
						 detail ? detail : "", detail ? strlen(detail) : 0);
}

/*
 * conn (a routed connection) failed as from (one of its nodes) did: the
 * failure, its detail and the node's address, for reporting.
 */
void
rconn_adopt_failure(RedisConn *conn, RedisConn *from)
{
	rconn_set_failure(conn, from->failure, from->errdetail);
	strlcpy(conn->addr, from->addr, sizeof(conn->addr));
}

/* Why conn's last round trip failed (RF_NONE: it did not). */
RconnFailure
rconn_failure(RedisConn *conn)
{
	return conn->failure;
}

/* ... and the detail of it ("" if none). */
const char *
rconn_failure_detail(RedisConn *conn)
{
	return conn->errdetail;
}

/*
 * Did conn's last round trip fail before its commands could reach the
 * server (connecting, resolving, the handshake)?  Then none of them ran.
 */
bool
rconn_failed_before_sending(RedisConn *conn)
{
	switch (conn->failure)
	{
		case RF_CONNECT:
		case RF_CONNECT_TIMEOUT:
		case RF_AUTH:
		case RF_SELECT:
		case RF_RESOLVE:
		case RF_TLS:
		case RF_NOFD:
		case RF_CONFIG:
		case RF_UNMASKED:
			return true;
		default:
			return false;
	}
}

/*
 * The failure last raised as an ERROR, and in which transaction: the abort
 * of that transaction, reconciling what the failed call left, meets the
 * same failure (Redis still away) and would say it again as a WARNING.
 * One message per failure: that repeat goes to the server log only.
 */
static struct
{
	RconnFailure failure;
	TimestampTz xact_start;
	char		addr[64];
	char		what[NAMEDATALEN * 2];
}			last_error;

static int
report_level(RconnFailure failure, const char *addr, const char *what,
			 int elevel)
{
	const char *a = addr ? addr : "";
	const char *w = what ? what : "";

	if (elevel >= ERROR)
	{
		last_error.failure = failure;
		last_error.xact_start = GetCurrentTransactionStartTimestamp();
		strlcpy(last_error.addr, a, sizeof(last_error.addr));
		strlcpy(last_error.what, w, sizeof(last_error.what));
	}
	else if (elevel == WARNING && failure != RF_NONE &&
			 last_error.failure == failure &&
			 last_error.xact_start == GetCurrentTransactionStartTimestamp() &&
			 strncmp(last_error.addr, a, sizeof(last_error.addr) - 1) == 0 &&
			 strncmp(last_error.what, w, sizeof(last_error.what) - 1) == 0)
		return LOG;
	return elevel;
}

/* Report why conn's last round trip failed. */
void
rconn_report(RedisConn *conn, int elevel, const char *what)
{
	elevel = report_level(conn->failure, conn->addr, what, elevel);
	rconn_report_failure(conn->failure, &conn->node, conn->addr,
						 conn->errdetail, elevel, what);
}

/* ----------------------------------------------------------------
 * Wording
 * ----------------------------------------------------------------
 */

static const char *
for_lock(const char *what)
{
	return what ? psprintf(" for lock \"%s\"", what) : "";
}

/*
 * The setting whose URL led to node, as messages name it: a master of
 * rlock.redlock_urls by its number, else (NULL included) rlock.redis_url.
 */
static const char *
setting_of(const RedisUrl *node)
{
	if (node != NULL && node->origin == URL_OF_REDLOCK)
		return psprintf("master %d of rlock.redlock_urls", node->master + 1);
	return "rlock.redis_url";
}

/* Where node's password may be given, for a hint. */
static const char *
password_hint(const RedisUrl *node)
{
	if (node != NULL && node->origin == URL_OF_REDLOCK)
		return psprintf("Give the user and password of master %d in its own URL in rlock.redlock_urls: a Redlock master is sent only the credentials of its own URL.",
						node->master + 1);
	return "Check the user and password in rlock.redis_url (or rlock.redis_password_file).";
}

static void
rconn_report_failure(RconnFailure failure, const RedisUrl *node,
					 const char *addr, const char *detail, int elevel,
					 const char *what)
{
	const char *setting = setting_of(node);

	stats_count(RLOCK_STAT_REDIS_ERRORS);
	switch (failure)
	{
		case RF_CONNECT:
			ereport(elevel,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("could not connect to Redis at %s%s",
							addr, for_lock(what)),
					 detail[0] ? errdetail_internal("%s", detail) : 0,
					 errhint("Check that Redis is running and that %s points at it.",
							 setting)));
			break;
		case RF_RESOLVE:
			ereport(elevel,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("could not resolve the Redis host %s%s",
							addr, for_lock(what)),
					 detail[0] ? errdetail_internal("%s", detail) : 0,
					 errhint("Check the host name in %s.", setting)));
			break;
		case RF_CONNECT_TIMEOUT:
			ereport(elevel,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("timed out connecting to Redis at %s%s",
							addr, for_lock(what)),
					 errdetail("No connection was established within rlock.connect_timeout (%d ms).",
							   rconn_connect_timeout_ms()),
					 errhint("Check that Redis is running and that %s points at it.",
							 setting)));
			break;
		case RF_AUTH:
			/* (NOAUTH: no password was given, as from an error reply) */
			ereport(elevel,
					(errcode(strncmp(detail, "NOAUTH", 6) == 0 ?
							 ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION :
							 ERRCODE_INVALID_PASSWORD),
					 errmsg("Redis at %s rejected the credentials of %s%s",
							addr, setting, for_lock(what)),
					 errdetail_internal("%s", detail),
					 errhint("%s", password_hint(node))));
			break;
		case RF_SELECT:
			ereport(elevel,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("Redis at %s rejected the database number of %s%s",
							addr, setting, for_lock(what)),
					 errdetail_internal("%s", detail),
					 errhint("Check the database number at the end of %s.",
							 setting)));
			break;
		case RF_UNMASKED:
			ereport(elevel,
					(errcode(ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
					 errmsg("could not connect to Redis%s: rlock refuses the password in %s, because rlock is not preloaded",
							for_lock(what), setting),
					 errdetail("Without shared_preload_libraries rlock cannot hide a password in a URL: the server log shows the setting on reload, and SHOW shows it to every role in a session that has not called rlock yet."),
					 (node != NULL && node->origin == URL_OF_REDLOCK) ?
					 errhint("Add rlock to shared_preload_libraries in postgresql.conf and restart the server: then the passwords of rlock.redlock_urls are hidden.") :
					 errhint("Give the password in rlock.redis_password_file (a file only the server's OS user can read) instead of rlock.redis_url, or add rlock to shared_preload_libraries and restart the server.")));
			break;
		case RF_LOST:
			ereport(elevel,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("lost connection to Redis at %s%s",
							addr, for_lock(what)),
					 detail[0] ? errdetail_internal("%s", detail) : 0,
					 errhint("Check that Redis is running and that %s points at it.",
							 setting)));
			break;
		case RF_TIMEOUT:
			ereport(elevel,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("Redis at %s did not answer in time%s",
							addr, for_lock(what)),
					 errdetail("No reply arrived within rlock.command_timeout (%d ms).",
							   rconn_command_timeout_ms())));
			break;
		case RF_PROTOCOL:
			ereport(elevel,
					(errcode(ERRCODE_PROTOCOL_VIOLATION),
					 errmsg("invalid reply from Redis at %s%s",
							addr, for_lock(what)),
					 errdetail_internal("%s", detail)));
			break;
		case RF_NOFD:
			ereport(elevel,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("could not connect to Redis%s", for_lock(what)),
					 errdetail("There are too many open files on the local server."),
					 errhint("Raise the server's max_files_per_process and/or \"ulimit -n\" limits.")));
			break;
		case RF_TLS:
			ereport(elevel,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("TLS handshake with Redis at %s failed%s",
							addr, for_lock(what)),
					 errdetail_internal("%s", detail),
					 errhint("Check rlock.tls_ca_file, rlock.tls_cert_file, rlock.tls_key_file, rlock.tls_verify and rlock.tls_server_name against the server's TLS setup.")));
			break;
		case RF_CONFIG:
			ereport(elevel,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("could not connect to Redis at %s%s: %s",
							addr, for_lock(what), detail),
					 errhint("Fix the rlock setting named in the message.")));
			break;
		case RF_NO_MASTER:
			ereport(elevel,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("could not locate the Redis %s%s",
							addr, for_lock(what)),
					 errdetail_internal("%s", detail),
					 errhint("Check the sentinels and the #mastername in rlock.redis_url (and rlock.sentinel_password_file).")));
			break;
		case RF_NOT_MASTER:
			ereport(elevel,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("Redis at %s is not the master%s",
							addr, for_lock(what)),
					 errdetail_internal("%s", detail),
					 errhint("A failover may be under way; the next call asks the sentinels again.")));
			break;
		case RF_CLUSTER:
			ereport(elevel,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("Redis Cluster at %s could not serve the command%s",
							addr, for_lock(what)),
					 errdetail_internal("%s", detail),
					 errhint("Check that rlock.redis_url names nodes of a Redis Cluster that serves every slot (CLUSTER INFO); a failover or a resharding may be under way.")));
			break;
		case RF_NONE:
			elog(elevel, "unexpected Redis failure%s", for_lock(what));
			break;
	}
}

/* ----------------------------------------------------------------
 * Reading error replies: the one reader of their words, within their
 * length ("RLOCKKIND lock": the word after the code).  (Their text is
 * made printable and cut at RLOCK_PRINTABLE_MAX bytes when it arrives:
 * connection_io.c.)
 * ----------------------------------------------------------------
 */

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
		"NOSCRIPT", "RLOCKKIND", "RLOCKRANGE", "RLOCKNOTLOCK", "WRONGTYPE",
		"NOAUTH", "WRONGPASS", "NOPERM", "READONLY", "LOADING", "BUSY",
		"MASTERDOWN", "MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN", "CROSSSLOT",
		"OOM"
	};

	if (reply == NULL || reply->type != RREPLY_ERROR)
		return false;
	/*
	 * An ACL refusal inside a script (rlock's scripts look before they
	 * write), or a server that does not know the command at all.
	 */
	if (strstr(reply->str, "The user executing the script can't") != NULL ||
		strstr(reply->str, "ACL failure in script") != NULL ||
		(rconn_reply_is(reply, "ERR") &&
		 strstr(reply->str, "unknown command") != NULL))
		return false;
	for (int i = 0; i < lengthof(not_run); i++)
		if (rconn_reply_is(reply, not_run[i]))
			return false;
	return true;
}

/*
 * The quoted name Redis gives right before what (" command", " key", "
 * channel") in msg, palloc'd, or NULL.
 */
static char *
noperm_quoted(const char *msg, const char *what)
{
	char	   *pattern = psprintf("'%s", what);
	const char *close = strstr(msg, pattern);
	const char *open = NULL;

	pfree(pattern);
	if (close == NULL)
		return NULL;
	for (const char *p = msg; p < close; p++)
		if (*p == '\'')
			open = p;
	return open ? pnstrdup(open + 1, close - open - 1) : NULL;
}

/*
 * The hint for a NOPERM reply (or an ACL refusal inside a script): which
 * permission is missing.  Redis says "... run the 'publish' command ...",
 * "... access the '<key>' key ..." or "... the '<channel>' channel ..."
 * (7.2 on), or without a name "... access one of the keys ..." or "...
 * publish to the channel ..." (6.x, 7.0); rlock may have put two replies
 * in one message.
 */
static char *
noperm_hint(const char *msg, const char *setting)
{
	char	   *cmd = noperm_quoted(msg, " command");
	bool		channel,
				key;

	if (cmd != NULL)
		return psprintf("Grant the Redis user of %s the command %s, e.g. ACL SETUSER <user> +%s.",
						setting, cmd, cmd);
	channel = noperm_quoted(msg, " channel") != NULL;
	key = !channel && noperm_quoted(msg, " key") != NULL;
	if (!channel && !key)
	{
		channel = strstr(msg, "channel") != NULL;
		key = !channel && strstr(msg, "key") != NULL;
	}
	if (channel)
		return psprintf("Grant the Redis user of %s the locks' channels, e.g. ACL SETUSER <user> '&redisson_*' (rlock publishes and subscribes on redisson_lock__channel:{<name>}, redisson_rwlock:{<name>} and the fair lock's per-waiter channels).",
						setting);
	if (key)
		return psprintf("Grant the Redis user of %s the locks' keys: the names (with rlock.key_prefix) and the keys derived from them, e.g. ACL SETUSER <user> '~<prefix>*' '~redisson_*' '~{*'.",
						setting);
	return pstrdup("rlock needs the commands EVAL, EVALSHA, GET, DEL, HMGET, PUBLISH, SUBSCRIBE, UNSUBSCRIBE and PING on the locks' keys and channels.");
}

/*
 * Report a Redis error reply at elevel, with the SQLSTATE of its code (see
 * the file header).
 */
void
rconn_reply_error(RReply *reply, int elevel, const char *what)
{
	rconn_reply_error_of(NULL, reply, elevel, what);
}

/*
 * The same, for a reply from node (NULL: of rlock.redis_url), whose
 * setting the messages name.
 */
void
rconn_reply_error_of(const RedisUrl *node, RReply *reply, int elevel,
					 const char *what)
{
	int			sqlstate = ERRCODE_EXTERNAL_ROUTINE_EXCEPTION;
	const char *msg = "Redis returned an error%s";
	char	   *hint = NULL;
	const char *setting = setting_of(node);

	stats_count(RLOCK_STAT_REDIS_ERRORS);
	/* (callers pass an error reply; none at all is worded, not followed) */
	if (reply == NULL || reply->str == NULL)
	{
		ereport(elevel,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg_internal("Redis returned an error without text%s",
								 for_lock(what))));
		return;
	}
	if (rconn_reply_is(reply, "WRONGTYPE"))
	{
		ereport(elevel,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("Redis key of lock \"%s\" is not a lock",
						what ? what : "?"),
				 errdetail("Another kind of Redis value already uses that key."),
				 errhint("Choose another lock name, or set rlock.key_prefix.")));
		return;
	}
	if (rconn_reply_is(reply, "NOAUTH"))
	{
		sqlstate = ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION;
		msg = "Redis requires authentication%s";
		hint = (node != NULL && node->origin == URL_OF_REDLOCK) ?
			pstrdup(password_hint(node)) :
			pstrdup("Give the password in rlock.redis_url (redis://[user]:password@host:port/db) or in rlock.redis_password_file.");
	}
	else if (rconn_reply_is(reply, "WRONGPASS"))
	{
		sqlstate = ERRCODE_INVALID_PASSWORD;
		msg = psprintf("Redis rejected the credentials of %s%%s", setting);
	}
	else if (rconn_reply_is(reply, "NOPERM") ||
			 /* an ACL refusal inside a script: 6.x, 7.0; 7.2 on */
			 strstr(reply->str, "The user executing the script can't") != NULL ||
			 strstr(reply->str, "ACL failure in script") != NULL)
	{
		sqlstate = ERRCODE_INSUFFICIENT_PRIVILEGE;
		msg = psprintf("the Redis user of %s lacks a permission%%s", setting);
		hint = noperm_hint(reply->str, setting);
	}
	else if (rconn_reply_is(reply, "OOM"))
	{
		sqlstate = ERRCODE_OUT_OF_MEMORY;
		msg = "Redis is out of memory%s";
		hint = pstrdup("Redis refuses writes at its maxmemory limit: raise maxmemory, or free memory.");
	}
	else if (rconn_reply_is(reply, "READONLY"))
	{
		sqlstate = ERRCODE_READ_ONLY_SQL_TRANSACTION;
		msg = "Redis is a read-only replica%s";
		hint = psprintf("Point %s at the master.", setting);
	}
	else if (rconn_reply_is(reply, "LOADING") || rconn_reply_is(reply, "BUSY") ||
			 rconn_reply_is(reply, "MASTERDOWN"))
	{
		sqlstate = ERRCODE_CANNOT_CONNECT_NOW;
		msg = "Redis cannot serve requests now%s";
	}
	ereport(elevel,
			(errcode(sqlstate),
			 errmsg_internal(msg, for_lock(what)),
			 errdetail_internal("%.*s",
								pg_mbcliplen(reply->str, (int) reply->len,
											 (int) Min(reply->len, 500)),
								reply->str),
			 hint ? errhint("%s", hint) : 0));
}
