/*-------------------------------------------------------------------------
 *
 * connection.c
 *	  Redis connections: a backend-local pool of them, keyed by node and
 *	  use, each connected on first use, checked before every round trip and
 *	  closed when idle.
 *
 * This file and the connection_*.c beside it own all I/O with Redis, as
 * postgres_fdw's connection.c owns its connections.  A connection sits on
 * a transport of our own (transport.c: a non-blocking TCP or Unix socket,
 * TLS in transport_tls.c); hiredis only parses replies.  Every wait goes
 * through the one wait primitive (connection_exchange.c), which sleeps on
 * the sockets and the process latch with a deadline, so cancel,
 * statement_timeout, lock_timeout and backend termination interrupt it, and
 * rlock.connect_timeout / rlock.command_timeout bound it.
 *
 * A process has, per Redis node, at most one connection for commands and
 * scripts and one that waiters subscribe on (a subscribed RESP2 connection
 * cannot run commands).  Connections are made on first use, remember the
 * settings generation they were made with (a reload that changes how to
 * reach Redis makes them reconnect), and are closed at a transaction end
 * once unused for rlock.connection_idle_timeout, or when their node is no
 * longer the configured one.  A connection left with a command in flight
 * (an interrupt arrived mid round trip) is "busy" and is discarded on its
 * next use, because its pending reply would be mistaken for the next one.
 * A failure on a connection that had worked before (Redis restarted, idle
 * connection closed) is retried once on a fresh connection, as postgres_fdw
 * does; all rlock scripts are safe to replay (release carries a request id
 * latch, acquire reports the resulting hold count).
 *
 * Connecting: the host name is resolved within the deadline (resolve.c),
 * the socket connects and TLS shakes hands without blocking, then AUTH (the
 * password of the URL, else of rlock.redis_password_file) and SELECT go out
 * pipelined, all within rlock.connect_timeout; CLIENT SETNAME rlock:<pid>
 * goes in front of the first commands (over TLS: with AUTH and SELECT).  Round trips that cannot be interrupted (interrupts
 * held at COMMIT, ROLLBACK and in error clean-up, or the process exiting)
 * are capped at RLOCK_UNINTERRUPTIBLE_CAP_MS whatever the settings say.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <sys/stat.h>
#include <unistd.h>

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "redis/redis.h"
#include "redis/redis_int.h"
#include "net/net.h"
#include "base/base.h"

/* Sockets opened by this process so far (RedisConn.incarnation). */
uint64		rconn_incarnations = 0;


/* The pool: every connection this process made, never freed. */
static RedisConn **pool = NULL;
static int	npool = 0;
static int	maxpool = 0;
static bool xact_callback_registered = false;

/* rconn_backend()'s answers, valid for one settings generation */
static RedisConn *backend_conn = NULL;
static RedisConn *backend_sub = NULL;
static uint64 backend_generation = 0;

static void connection_xact_callback(XactEvent event, void *arg);
static bool idle_since(RedisConn *conn, TimestampTz now);

/* ----------------------------------------------------------------
 * Settings
 * ----------------------------------------------------------------
 */


/* ----------------------------------------------------------------
 * The pool
 * ----------------------------------------------------------------
 */

static void
node_key(const RedisUrl *node, RconnRole role, char *buf, size_t size)
{
	if (node->kind == NODE_CLUSTER)
		snprintf(buf, size, "C%d|%s|%d", (int) node->scheme, node->user,
				 (int) role);
	else if (node->kind == NODE_SENTINEL_MASTER)
		snprintf(buf, size, "M%d|%s|%s|%d|%d", (int) node->scheme,
				 node->master_name, node->user, node->db, (int) role);
	else
		snprintf(buf, size, "%c%d|%s|%d|%s|%d|%d",
				 node->kind == NODE_SENTINEL ? 'S' : 'N', (int) node->scheme,
				 node->host, node->port, node->user, node->db, (int) role);
}

/* The connection of this process to node for role (created, not connected). */
RedisConn *
rconn_get(const RedisUrl *node, RconnRole role)
{
	char		key[sizeof(((RedisConn *) NULL)->key)];
	RedisConn  *conn = NULL;

	node_key(node, role, key, sizeof(key));
	for (int i = 0; i < npool; i++)
	{
		if (strcmp(pool[i]->key, key) == 0)
		{
			conn = pool[i];
			break;
		}
	}
	if (conn == NULL)
	{
		if (npool >= maxpool)
		{
			int			newmax = Max(4, maxpool * 2);

			pool = pool ? repalloc(pool, newmax * sizeof(RedisConn *))
				: MemoryContextAlloc(TopMemoryContext,
									 newmax * sizeof(RedisConn *));
			maxpool = newmax;
		}
		conn = MemoryContextAllocZero(TopMemoryContext, sizeof(RedisConn));
		conn->role = role;
		conn->nreplicas = -1;
		strlcpy(conn->key, key, sizeof(conn->key));
		conn->replycxt = AllocSetContextCreate(TopMemoryContext,
											   "rlock Redis replies",
											   ALLOCSET_SMALL_SIZES);
		pool[npool++] = conn;
		if (!xact_callback_registered && MyBackendType != B_BG_WORKER)
		{
			RegisterXactCallback(connection_xact_callback, NULL);
			xact_callback_registered = true;
		}
	}
	/* the password, which is not part of the key, may have changed */
	if (node->kind == NODE_CLUSTER)
	{
		/* routed (cluster.c): never connected itself; named by its seeds */
		conn->node = *node;
		rconn_set_cluster_address(conn);
		return conn;
	}
	if (node->kind == NODE_SENTINEL_MASTER)
	{
		/* where it was located stays until it is located again */
		char		host[sizeof(conn->node.host)];
		int			port = conn->node.port;

		strlcpy(host, conn->node.host, sizeof(host));
		conn->node = *node;
		strlcpy(conn->node.host, host, sizeof(conn->node.host));
		conn->node.port = port;
		if (host[0] == '\0')
		{
			snprintf(conn->addr, sizeof(conn->addr), "master \"%s\"",
					 node->master_name);
			return conn;
		}
	}
	else
		conn->node = *node;
	if (conn->node.scheme == URL_UNIX)
		strlcpy(conn->addr, node->host, sizeof(conn->addr));
	else
		rconn_set_address(conn);
	return conn;
}

static RedisConn *
configured(RconnRole role)
{
	static RedisUrl none;

	if (backend_generation != net_settings_generation)
	{
		const RedisUrl *url = rlock_redis_conf ? &rlock_redis_conf->url : &none;

		backend_conn = rconn_get(url, RCONN_COMMANDS);
		backend_sub = rconn_get(url, RCONN_SUBSCRIBER);
		backend_generation = net_settings_generation;
	}
	return role == RCONN_COMMANDS ? backend_conn : backend_sub;
}

/* The process's command connection to the configured Redis. */
RedisConn *
rconn_backend(void)
{
	return configured(RCONN_COMMANDS);
}

/* The process's subscriber connection, for waiting on release messages. */
RedisConn *
rconn_backend_subscriber(void)
{
	return configured(RCONN_SUBSCRIBER);
}

/* conn->addr from conn->node's host and port. */
void
rconn_set_address(RedisConn *conn)
{
	snprintf(conn->addr, sizeof(conn->addr),
			 strchr(conn->node.host, ':') ? "[%s]:%d" : "%s:%d",
			 conn->node.host, conn->node.port);
}

const char *
rconn_address(RedisConn *conn)
{
	return conn->addr;
}

/* Close the connection (if any); the next use reconnects.  No I/O. */
void
rconn_discard(RedisConn *conn)
{
	rconn_reset_replies(conn);
	if (conn->wes)
	{
		FreeWaitEventSet(conn->wes);
		conn->wes = NULL;
	}
	if (conn->transport)
	{
		transport_close(conn->transport);
		conn->transport = NULL;
		ReleaseExternalFD();
	}
	rconn_free_io(conn);
	for (int i = 0; i < conn->ndeferred; i++)
		free(conn->deferred_del[i]);
	conn->ndeferred = 0;
	conn->state = CS_CLOSED;
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

/*
 * Close connections unused for rlock.connection_idle_timeout and those to
 * nodes that are no longer configured (all: every connection).  No I/O, no
 * ERROR: called from transaction callbacks.
 */
void
rconn_close_idle(bool all)
{
	TimestampTz now = GetCurrentTimestamp();

	for (int i = 0; i < npool; i++)
	{
		RedisConn  *conn = pool[i];

		if (conn->state == CS_CLOSED)
			continue;
		if (all || conn->busy || rconn_is_stale(conn) ||
			idle_since(conn, now))
			rconn_discard(conn);
	}
}

/* Has conn been unused for longer than rlock.connection_idle_timeout? */
static bool
idle_since(RedisConn *conn, TimestampTz now)
{
	return rlock_connection_idle_timeout_ms > 0 && conn->last_used != 0 &&
		TimestampDifferenceExceeds(conn->last_used, now,
								   rlock_connection_idle_timeout_ms);
}

bool
rconn_idle_expired(RedisConn *conn)
{
	return rlock_connection_idle_timeout_ms > 0 &&
		idle_since(conn, GetCurrentTimestamp());
}

static void
connection_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT ||
		event == XACT_EVENT_PARALLEL_ABORT)
		rconn_close_idle(false);
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

/* Was conn made with settings that changed since? */
bool
rconn_is_stale(RedisConn *conn)
{
	return conn->generation != net_settings_generation;
}

/*
 * The password: the URL's, else the first line of
 * rlock.redis_password_file (for a sentinel: rlock.sentinel_password_file),
 * which others must not be able to read.
 */
static bool
read_password(RedisConn *conn, char *buf, size_t size)
{
	bool		sentinel = conn->node.kind == NODE_SENTINEL;
	const char *path = sentinel ? rlock_sentinel_password_file :
		rlock_redis_password_file;
	const char *setting = sentinel ? "rlock.sentinel_password_file" :
		"rlock.redis_password_file";
	struct stat st;
	int			fd;
	ssize_t		n;
	char	   *nl;

	buf[0] = '\0';
	if (conn->node.password[0] != '\0')
	{
		strlcpy(buf, conn->node.password, size);
		return true;
	}
	if (path == NULL || path[0] == '\0')
		return true;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
	{
		rconn_set_failure(conn, RF_CONFIG,
						  psprintf("could not open %s \"%s\": %s",
								   setting, path, strerror(errno)));
		return false;
	}
	if (fstat(fd, &st) < 0 || (st.st_mode & S_IRWXO) != 0)
	{
		close(fd);
		rconn_set_failure(conn, RF_CONFIG,
						  psprintf("%s \"%s\" is accessible to other users; it must not be (chmod o-rwx)",
								   setting, path));
		return false;
	}
	n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
	{
		rconn_set_failure(conn, RF_CONFIG,
						  psprintf("could not read %s \"%s\": %s",
								   setting, path, strerror(errno)));
		return false;
	}
	buf[n] = '\0';
	if ((nl = strpbrk(buf, "\r\n")) != NULL)
		*nl = '\0';
	return true;
}

/*
 * Start connecting: resolve the host (bounded by deadline), open the
 * socket and queue the handshake (AUTH, SELECT, CLIENT SETNAME), which
 * goes out once the socket (and TLS) is up.  On failure the connection is
 * left closed and conn->failure says why.
 */
bool
rconn_begin_connect(RedisConn *conn, TimestampTz deadline)
{
	const RedisUrl *url = &conn->node;
	char		ip[NI_MAXHOST];
	const char *target = url->host;
	TransportKind kind;
	TransportError terr = {0};
	char		password[256];
	RedisCmd	cmd;
	char		name[sizeof(conn->name)];
	bool		timed_out = false;
	char	   *err = NULL;

	rconn_discard(conn);
	conn->generation = net_settings_generation;
	conn->demoted = false;
	/* a Sentinel master: ask the sentinels where it is now */
	if (url->kind == NODE_SENTINEL_MASTER && !rconn_locate_master(conn))
		return false;
	if (url->host[0] == '\0')
	{
		rconn_set_failure(conn, RF_CONNECT, "rlock.redis_url is not set");
		return false;
	}
	if (!read_password(conn, password, sizeof(password)))
		return false;

	if (url->scheme == URL_UNIX)
		kind = TRANSPORT_UNIX;
	else
	{
		kind = url->scheme == URL_REDISS ? TRANSPORT_TLS : TRANSPORT_TCP;
		/* name resolution, bounded by the same deadline and interruptible */
		if (!resolve_host(url->host, deadline, ip, sizeof(ip), &timed_out, &err))
		{
			rconn_set_failure(conn, timed_out ? RF_CONNECT_TIMEOUT : RF_RESOLVE,
							  err);
			return false;
		}
		target = ip;
	}

	if (!AcquireExternalFD())
	{
		rconn_set_failure(conn, RF_NOFD, NULL);
		return false;
	}
	conn->transport = transport_open(kind, target, url->port,
									 (rlock_tls_server_name && rlock_tls_server_name[0])
									 ? rlock_tls_server_name : url->host,
									 &terr);
	if (conn->transport == NULL)
	{
		ReleaseExternalFD();
		rconn_set_failure(conn, terr.kind == TE_CONFIG ? RF_CONFIG : RF_CONNECT,
						  terr.detail);
		return false;
	}
	conn->reader = rconn_reader_create(conn);
	if (conn->reader == NULL)
	{
		rconn_discard(conn);
		rconn_set_failure(conn, RF_CONNECT, "out of memory");
		return false;
	}

	conn->incarnation = ++rconn_incarnations;
	conn->wes = RLOCK_CREATE_WAIT_EVENT_SET(3);
	AddWaitEventToSet(conn->wes, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch,
					  NULL);
	AddWaitEventToSet(conn->wes, WL_POSTMASTER_DEATH, PGINVALID_SOCKET,
					  NULL, NULL);
	conn->sockpos = AddWaitEventToSet(conn->wes, WL_SOCKET_WRITEABLE,
									  transport_socket(conn->transport),
									  NULL, NULL);
	conn->sockevents = WL_SOCKET_WRITEABLE;
	conn->want = WL_SOCKET_WRITEABLE;
	conn->state = CS_CONNECTING;

	/* the handshake, sent once connected */
	rconn_reset_replies(conn);
	if (password[0] != '\0' || url->user[0] != '\0')
	{
		rcmd_init(&cmd);
		rcmd_str(&cmd, "AUTH");
		if (url->user[0] != '\0')
			rcmd_str(&cmd, url->user);
		rcmd_str(&cmd, password);
		rconn_queue(conn, &cmd, false, SLOT_AUTH);
	}
	explicit_bzero(password, sizeof(password));
	if (url->db != 0 && url->kind != NODE_SENTINEL)
	{
		rcmd_init(&cmd);
		rcmd_str(&cmd, "SELECT");
		rcmd_int(&cmd, url->db);
		rconn_queue(conn, &cmd, false, SLOT_SELECT);
	}
	/*
	 * CLIENT SETNAME: over TLS it completes the handshake's round trip (with
	 * TLS 1.3 the server's verdict on our certificate comes with the first
	 * reply, so that a refusal is a connection failure); elsewhere it goes
	 * in front of the first commands, costing no round trip of its own.
	 */
	/*
	 * ROLE: a master located through the sentinels must confirm it is one,
	 * and commands connections learn how many replicas acknowledge writes.
	 */
	conn->nreplicas = -1;
	conn->check_role = url->kind == NODE_SENTINEL_MASTER ||
		(url->kind == NODE_DIRECT && conn->role == RCONN_COMMANDS &&
		 rlock_replica_acks > 0);
	if (conn->check_role)
		rconn_queue_role(conn);
	snprintf(name, sizeof(name), MyBackendType == B_BG_WORKER ? "rlock:watchdog:%d" : "rlock:%d",
			 MyProcPid);
	rcmd_init(&conn->setname);
	rcmd_str(&conn->setname, "CLIENT");
	rcmd_str(&conn->setname, "SETNAME");
	strlcpy(conn->name, name, sizeof(conn->name));
	rcmd_str(&conn->setname, conn->name);
	conn->name_pending = true;
	if (kind == TRANSPORT_TLS)
		rconn_queue_setname(conn);
	return true;
}

/* Queue ROLE, whose answer take_reply keeps (SLOT_ROLE). */
bool
rconn_queue_role(RedisConn *conn)
{
	RedisCmd	cmd;

	rcmd_init(&cmd);
	rcmd_str(&cmd, "ROLE");
	conn->role_at = GetCurrentTimestamp();
	return rconn_queue(conn, &cmd, false, SLOT_ROLE);
}

/* Queue CLIENT SETNAME if it has not gone out on this connection yet. */
bool
rconn_queue_setname(RedisConn *conn)
{
	if (!conn->name_pending)
		return true;
	conn->name_pending = false;
	return rconn_queue(conn, &conn->setname, false, SLOT_NAME);
}

/* The handshake was answered: the connection is ready. */
void
rconn_handshake_done(RedisConn *conn)
{
	conn->state = CS_READY;
	conn->busy = false;
	if (conn->connected_before)
		stats_count(RLOCK_STAT_RECONNECTS);
	conn->connected_before = true;
	conn->last_used = GetCurrentTimestamp();
}

/*
 * Make sure conn is connected with the current settings and idle
 * (connecting now if needed).  On failure conn->failure says why.
 */
bool
rconn_ensure(RedisConn *conn)
{
	RconnOp		op = {conn, NULL, 0, false, NULL};

	if (conn->node.kind == NODE_CLUSTER)
		return cluster_ensure(conn);
	if (conn->state == CS_READY && !conn->busy && !rconn_is_stale(conn) &&
		!conn->demoted && !rconn_topology_moved(conn))
		return true;
	rconn_run_parallel(&op, 1);
	return op.ok;
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

/* ----------------------------------------------------------------
 * Bounds
 * ----------------------------------------------------------------
 */

/*
 * The bounds of one round trip and of establishing a connection.  Where a
 * round trip cannot be interrupted (interrupts are held at COMMIT,
 * ROLLBACK and in error clean-up; the process is exiting), the settings,
 * which any user may raise to a minute, are capped: nothing a user sets may
 * make COMMIT, pg_terminate_backend or a shutdown wait.
 */
bool
rconn_uninterruptible(void)
{
	return InterruptHoldoffCount > 0 || CritSectionCount > 0 ||
		proc_exit_inprogress;
}

int
rconn_command_timeout_ms(void)
{
	if (rconn_uninterruptible())
		return Min(rlock_command_timeout_ms, RLOCK_UNINTERRUPTIBLE_CAP_MS);
	return rlock_command_timeout_ms;
}

int
rconn_connect_timeout_ms(void)
{
	if (rconn_uninterruptible())
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

/*
 * Round trips on conn (a Cluster's routed connection) fail at once for a
 * node that cannot be reached or answers TRYAGAIN, instead of waiting for
 * a failover or a migration to end: for reconciling what can be
 * reconciled now, before a call that may concern other nodes.
 */
void
rconn_set_impatient(RedisConn *conn, bool on)
{
	conn->impatient = on;
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

	if (conn->node.kind == NODE_CLUSTER)
	{
		/* on the node of the key's slot, if the map names it (no I/O) */
		conn = cluster_known_conn(key);
		if (conn == NULL)
			return;
	}

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

/* ----------------------------------------------------------------
 * Round trips on one connection
 * ----------------------------------------------------------------
 */

bool
rconn_run(RedisConn *conn, RedisCmd *cmds, int ncmds,
		  RReply ***replies, int elevel, const char *what)
{
	RconnOp		op = {conn, cmds, ncmds, false, NULL};

	if (conn->node.kind == NODE_CLUSTER)
		return cluster_run(conn, cmds, ncmds, replies, elevel, what);
	rconn_run_parallel(&op, 1);
	if (op.ok)
	{
		*replies = op.replies;
		return true;
	}
	rconn_report(conn, elevel, what);
	return false;
}

/*
 * Run one command; ERROR on failure.  The reply belongs to the connection
 * (to the routed one, for a Cluster).
 */
RReply *
rconn_run1(RedisConn *conn, RedisCmd *cmd, const char *what)
{
	RReply	  **replies = NULL;

	rconn_run(conn, cmd, 1, &replies, ERROR, what);
	return replies[0];
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
			return true;
		default:
			return false;
	}
}

/* Report why conn's last round trip failed (connection_error.c words it). */
void
rconn_report(RedisConn *conn, int elevel, const char *what)
{
	rconn_report_failure(conn->failure, conn->addr, conn->errdetail, elevel,
						 what);
}
