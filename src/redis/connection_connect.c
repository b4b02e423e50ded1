/*-------------------------------------------------------------------------
 *
 * connection_connect.c
 *	  Establishing one connection: the host resolved, the socket and TLS
 *	  opened, the handshake (AUTH, SELECT, ROLE, CLIENT SETNAME) queued and
 *	  its answers taken; and the few things a connection must learn from the
 *	  route layer during its own life.
 *
 * Connecting: the host name is resolved within the deadline (resolve.c),
 * the socket connects and TLS shakes hands without blocking, then AUTH (the
 * password of the URL, else of rlock.redis_password_file) and SELECT go out
 * pipelined, all within rlock.connect_timeout; CLIENT SETNAME rlock:<server>:<pid>
 * goes in front of the first commands (over TLS: with AUTH and SELECT).
 * connection_exchange.c drives these steps; this file says what they are.
 *
 * The route hooks.  The connection layer serves single nodes and never
 * calls the route layer above it; but a connection to "the master of
 * <name>" (a Sentinel deployment) must, during its own life, ask where that
 * master is each time it connects, report what its node's ROLE said, and
 * notice that another process confirmed a new master.  Those moments are
 * inside a round trip, where no caller can step in, so the route layer
 * registers them at init (rconn_set_route_hooks, from route_init in
 * _PG_init, which every process that loads rlock runs, the watchdog
 * included): the sentinels and the topology's shared memory stay the route
 * layer's, and the connection only holds what it was told (its address, the
 * topology epoch it was located at).  Nothing else crosses upward.
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

#include "miscadmin.h"
#include "storage/fd.h"
#include "storage/latch.h"
#include "utils/timestamp.h"

#include "redis/redis.h"
#include "redis/redis_int.h"
#include "net/net.h"
#include "base/base.h"

/* Sockets opened by this process so far (RedisConn.incarnation). */
uint64		rconn_incarnations = 0;

/* What the route layer registered (rconn_set_route_hooks). */
static RconnRouteHooks route_hooks;

/* ----------------------------------------------------------------
 * The route hooks
 * ----------------------------------------------------------------
 */

void
rconn_set_route_hooks(const RconnRouteHooks *hooks)
{
	route_hooks = *hooks;
}

/*
 * Before conn (a Sentinel's master) connects: fill in its node's host and
 * port from the sentinels.  On failure conn->failure says why.
 */
static bool
locate_master(RedisConn *conn)
{
	RconnFailure failure = RF_NONE;
	char	   *detail = NULL;

	snprintf(conn->addr, sizeof(conn->addr), "master \"%s\"",
			 conn->node.master_name);
	if (route_hooks.locate_master == NULL)
	{
		/* (not reached: route_init registers it in _PG_init) */
		conn->node.host[0] = '\0';
		rconn_set_failure(conn, RF_NO_MASTER, "no way to ask the sentinels");
		return false;
	}
	if (!route_hooks.locate_master(conn->failed_at, conn->node.host,
								   sizeof(conn->node.host), &conn->node.port,
								   &failure, &detail))
	{
		conn->node.host[0] = '\0';
		rconn_set_failure(conn, failure, detail);
		return false;
	}
	rconn_set_address(conn);
	conn->topology_epoch = route_hooks.topology_epoch ?
		route_hooks.topology_epoch() : 0;
	return true;
}

/*
 * Has another process confirmed a new master since conn (a Sentinel's
 * master) was located?  (An epoch of 0: no shared memory, nothing known.)
 */
bool
rconn_topology_moved(RedisConn *conn)
{
	uint64		epoch;

	if (conn->node.kind != NODE_SENTINEL_MASTER || conn->state == CS_CLOSED ||
		route_hooks.topology_epoch == NULL)
		return false;
	epoch = route_hooks.topology_epoch();
	return epoch != 0 && conn->topology_epoch != epoch;
}

/*
 * conn's node answered ROLE "master" in its handshake: the route layer
 * records it as this server's master.  Never throws (mid-handshake).
 */
static void
master_confirmed(RedisConn *conn)
{
	conn->failed_at[0] = '\0';
	if (route_hooks.master_confirmed != NULL)
		conn->topology_epoch =
			route_hooks.master_confirmed(conn->node.master_name, conn->addr);
}

/*
 * ROLE's answer: the number of replicas of a master, or (for a master the
 * sentinels located) the news that it is not one, which fails the
 * connection so that the next attempt asks the sentinels again.  A server
 * that refuses ROLE (an ACL) leaves the replica count unknown: then no
 * acknowledgement is waited for, and a located master is taken on the
 * sentinels' word.
 */
bool
rconn_take_role(RedisConn *conn, redisReply *r)
{
	const char *role;

	if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
		r->element[0]->type != REDIS_REPLY_STRING)
	{
		conn->nreplicas = -1;
		if (conn->node.kind == NODE_SENTINEL_MASTER && conn->state == CS_HANDSHAKE)
			master_confirmed(conn);
		return true;
	}
	role = r->element[0]->str;
	if (strcmp(role, "master") == 0)
	{
		conn->nreplicas = (r->elements >= 3 &&
						   r->element[2]->type == REDIS_REPLY_ARRAY) ?
			(int) r->element[2]->elements : 0;
		if (conn->nreplicas > 0 && route_hooks.replicas_reported != NULL)
			route_hooks.replicas_reported(conn->addr, conn->nreplicas);
		if (conn->node.kind == NODE_SENTINEL_MASTER && conn->state == CS_HANDSHAKE)
			master_confirmed(conn);
		return true;
	}
	conn->nreplicas = -1;
	if (conn->node.kind != NODE_SENTINEL_MASTER)
		return true;
	conn->demoted = true;
	if (conn->state != CS_HANDSHAKE)
		return true;			/* this round trip's replies say the rest */
	strlcpy(conn->failed_at, conn->addr, sizeof(conn->failed_at));
	rconn_set_failure(conn, RF_NOT_MASTER,
					  psprintf("The sentinels named it as master \"%s\", but its role is \"%s\".",
							   conn->node.master_name, role));
	return false;
}

/* ----------------------------------------------------------------
 * Connecting
 * ----------------------------------------------------------------
 */

/*
 * The password: the URL's, else, for a node of rlock.redis_url's
 * deployment only, the first line of rlock.redis_password_file (for a
 * sentinel: rlock.sentinel_password_file), which others must not be able
 * to read.  A master of rlock.redlock_urls gets only the password of its
 * own URL: a secret goes only where it belongs (SPEC 8).  A failure names
 * the setting, not its path: the setting is hidden from plain roles, whose
 * calls connect too.
 *
 * Not preloaded, rlock cannot hide a password in a URL (the postmaster
 * logs the raw value on reload, SHOW shows the placeholder setting to
 * every role until the session loads rlock): such a password is refused,
 * never sent.
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
		if (!rlock_preloaded)
		{
			rconn_set_failure(conn, RF_UNMASKED, NULL);
			return false;
		}
		strlcpy(buf, conn->node.password, size);
		return true;
	}
	if (conn->node.origin != URL_OF_REDIS_URL || path == NULL ||
		path[0] == '\0')
		return true;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
	{
		rconn_set_failure(conn, RF_CONFIG,
						  psprintf("could not open the file of %s: %s",
								   setting, strerror(errno)));
		return false;
	}
	if (fstat(fd, &st) < 0 || (st.st_mode & S_IRWXO) != 0)
	{
		close(fd);
		rconn_set_failure(conn, RF_CONFIG,
						  psprintf("the file of %s is accessible to other users; it must not be (chmod o-rwx)",
								   setting));
		return false;
	}
	n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
	{
		rconn_set_failure(conn, RF_CONFIG,
						  psprintf("could not read the file of %s: %s",
								   setting, strerror(errno)));
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
	bool		queued = true;
	char		name[sizeof(conn->name)];
	bool		timed_out = false;
	char	   *err = NULL;

	rconn_discard(conn);
	conn->generation = net_settings_generation;
	conn->demoted = false;
	/* a Sentinel master: ask the sentinels where it is now */
	if (url->kind == NODE_SENTINEL_MASTER && !locate_master(conn))
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
	rconn_socket_opened(conn);
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

	/* the handshake, sent once connected (a part not queued fails it) */
	rconn_reset_replies(conn);
	if (password[0] != '\0' || url->user[0] != '\0')
	{
		rcmd_init(&cmd);
		rcmd_str(&cmd, "AUTH");
		if (url->user[0] != '\0')
			rcmd_str(&cmd, url->user);
		rcmd_str(&cmd, password);
		queued = rconn_queue(conn, &cmd, false, SLOT_AUTH);
	}
	explicit_bzero(password, sizeof(password));
	if (queued && url->db != 0 && url->kind != NODE_SENTINEL)
	{
		rcmd_init(&cmd);
		rcmd_str(&cmd, "SELECT");
		rcmd_int(&cmd, url->db);
		queued = rconn_queue(conn, &cmd, false, SLOT_SELECT);
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
	if (queued && conn->check_role)
		queued = rconn_queue_role(conn);
	{
		/* rlock:<server>:<pid>, and the worker's rlock:<server>:watchdog:<pid> */
		char		server[40];

		rlock_server_label_sanitized(server, sizeof(server) - 1);
		snprintf(name, sizeof(name),
				 MyBackendType == B_BG_WORKER ? "rlock:%s:watchdog:%d" : "rlock:%s:%d",
				 server, MyProcPid);
	}
	rcmd_init(&conn->setname);
	rcmd_str(&conn->setname, "CLIENT");
	rcmd_str(&conn->setname, "SETNAME");
	strlcpy(conn->name, name, sizeof(conn->name));
	rcmd_str(&conn->setname, conn->name);
	conn->name_pending = true;
	if (queued && kind == TRANSPORT_TLS)
		queued = rconn_queue_setname(conn);
	return queued;
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
	/* (its last round trip or connect failed: not an idle one's return) */
	if (conn->connected_before && conn->failure != RF_NONE)
		rlock_event(LOG, RLOCK_EVENT_RECONNECT, NULL, NULL, NULL,
					"rlock: connected again to Redis at %s after a failure",
					conn->addr);
	conn->connected_before = true;
	conn->last_used = GetCurrentTimestamp();
}

