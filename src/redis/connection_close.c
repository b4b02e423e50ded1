/*-------------------------------------------------------------------------
 *
 * connection_close.c
 *	  Closing connections: one that failed or that a caller gives up
 *	  (rconn_discard), those idle or made with settings since changed at a
 *	  transaction end, and idle ones even in a session that issues nothing
 *	  (a timer); and counting the open ones (rlock_stats.open_connections).
 *	  It owns the pool's array, which the timer reads in signal context;
 *	  connection.c finds and makes connections in it.
 *
 * A connection unused for rlock.connection_idle_timeout is closed at a
 * transaction end (rconn_close_idle) or at its next use.  A session that
 * then issues nothing (a pooled backend that rarely locks) would keep it
 * for life; so each top-level transaction end of a backend that leaves
 * connections open arms a timer (a PostgreSQL timeout: SIGALRM) for when
 * the oldest of them will have been unused that long (a subscriber
 * connection whose subscription was kept past its wait: at the latest
 * RCONN_KEEP_SUBSCRIPTION_MS after, connection_pubsub.c).
 *
 * Its handler runs in signal context, between any two instructions of the
 * main line, and does only what is async-signal-safe: it reads the pool
 * (the array; of each connection its state, busy flag, transport, last
 * use, when its subscription was kept), shuts the sockets that are due down (transport_shutdown:
 * shutdown(2), not close(2), so their numbers stay allocated and no wait
 * event set or other file meets a recycled one), marks them
 * shut_by_timer, stores this process's gauge (one atomic store) and
 * re-arms itself for those not due yet (enable_timeout_at, as timeout.c's
 * own handler re-enables a repeating timeout).  Redis sees them closed at
 * once.  The rest (the TLS session, freed without a close_notify, wait
 * event sets, the socket's number and ReleaseExternalFD, buffers, the
 * subscription) is the main line's: its next use of the pool
 * (rconn_pool_enter) closes every connection so marked with rconn_discard,
 * as any closed one, and the caller reconnects on demand.
 *
 * Why the two never meet on a half-written connection: the handler acts
 * only while idle_close_armed is set.  It is set last in
 * connection_xact_callback, after the main line's last touch of the pool
 * (a compiler barrier keeps those stores before), and cleared by
 * rconn_pool_enter, first thing in every function of this layer that
 * writes what the handler reads (rconn_get, rconn_close_idle,
 * rconn_ensure, rconn_run_parallel, rconn_subscribe_once,
 * rconn_wait_message, rconn_unsubscribe_nowait,
 * rconn_resume_subscription: every round trip, connect
 * and close goes through one), before anything else (a compiler barrier
 * keeps the loads after).  A handler that interrupts the main line before
 * the flag is cleared finds the pool as the transaction end left it; one
 * after finds the flag clear and does nothing.  The process has one thread
 * and a handler runs to its end before the main line resumes (SIGALRM
 * blocked meanwhile), so nothing else interleaves.  The main line's other
 * readers (rconn_is_closed and the like) read nothing the handler writes:
 * a shut connection looks ready until its next round trip, which first
 * closes and reconnects it.  The watchdog (a background worker) never
 * arms the timer: it closes its idle connections in its own loop.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "redis/redis.h"
#include "redis/redis_int.h"
#include "net/net.h"
#include "base/base.h"

/* The pool: every connection this process made, never freed. */
RedisConn **rconn_pool = NULL;
int			rconn_npool = 0;

#define pool rconn_pool
#define npool rconn_npool

/* Sockets open (connecting included), less those the timer shut down. */
static volatile int nopen = 0;
static bool exit_callback_registered = false;

/* The idle timer of a backend. */
static TimeoutId idle_timeout_id;
static bool idle_timeout_registered = false;
static volatile sig_atomic_t idle_close_armed = false;
static volatile sig_atomic_t idle_close_shut = false;	/* some were shut */

static bool idle_since(RedisConn *conn, TimestampTz now);
static void connection_xact_callback(XactEvent event, void *arg);
static void connection_exit_callback(int code, Datum arg);
static void idle_timeout_handler(void);

/*
 * At library load (route_init, from _PG_init): the transaction callback
 * that closes idle connections and arms the idle timer, registered before
 * rlock's others so that it runs after them (PostgreSQL calls the latest
 * first): the holds' may still use connections at COMMIT.
 */
void
rconn_init(void)
{
	RegisterXactCallback(connection_xact_callback, NULL);
}

/*
 * The idle timer's registration, at a backend's first connection (not in
 * a transaction callback: it may throw).
 */
void
rconn_idle_register(void)
{
	if (!idle_timeout_registered && MyBackendType == B_BACKEND)
	{
		idle_timeout_id = RegisterTimeout(USER_TIMEOUT, idle_timeout_handler);
		idle_timeout_registered = true;
	}
}

/* This process's rlock_stats.open_connections is nopen. */
static void
publish_open(void)
{
	stats_set(RLOCK_STAT_OPEN_CONNECTIONS, nopen > 0 ? (uint64) nopen : 0);
}

/* conn got a socket (rconn_begin_connect). */
void
rconn_socket_opened(RedisConn *conn)
{
	conn->shut_by_timer = false;
	nopen++;
	publish_open();
	if (!exit_callback_registered)
	{
		/* after the holds' before_shmem_exit, before ProcKill frees the slot */
		on_shmem_exit(connection_exit_callback, (Datum) 0);
		exit_callback_registered = true;
	}
}

/* conn's socket is closed (rconn_discard). */
static void
rconn_socket_closed(RedisConn *conn)
{
	if (!conn->shut_by_timer)
		nopen--;				/* (the timer counted its own) */
	publish_open();
}

/*
 * Close the connection (if any); the next use reconnects.  No I/O (TLS: no
 * close_notify).  Forgets all of that socket: wait event set, buffers,
 * pending DELs, what it was subscribed to (connection_pubsub.c subscribes
 * a closed connection afresh).
 */
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
		rconn_socket_closed(conn);
	}
	conn->shut_by_timer = false;
	rconn_free_io(conn);
	for (int i = 0; i < conn->ndeferred; i++)
		free(conn->deferred_del[i]);
	conn->ndeferred = 0;
	conn->state = CS_CLOSED;
	conn->busy = false;
	conn->owed = false;
	conn->nscripts_run = 0;
	conn->identity_asked = false;	/* who answers is asked anew */
	conn->identity_known = false;
	conn->proven = false;
	conn->out_of_step = false;
	conn->subscribed = false;
	conn->sub_sharded = false;
	conn->last_message[0] = '\0';
	if (conn->sub_channel != NULL)
		pfree(conn->sub_channel);
	conn->sub_channel = NULL;
	conn->kept_since = 0;
}


/*
 * Close connections unused for rlock.connection_idle_timeout, those to
 * nodes that are no longer configured, and subscriber connections whose
 * subscription was kept past its wait longer than
 * RCONN_KEEP_SUBSCRIPTION_MS (all: every connection).  No I/O, no ERROR:
 * called from transaction callbacks.
 */
void
rconn_close_idle(bool all)
{
	TimestampTz now;

	rconn_pool_enter();
	now = GetCurrentTimestamp();
	for (int i = 0; i < npool; i++)
	{
		RedisConn  *conn = pool[i];

		if (conn->state == CS_CLOSED)
			continue;
		if (all || conn->busy || rconn_is_stale(conn) ||
			idle_since(conn, now) ||
			(conn->kept_since != 0 &&
			 TimestampDifferenceExceeds(conn->kept_since, now,
										RCONN_KEEP_SUBSCRIPTION_MS)))
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

/* Was conn made with settings that changed since? */
bool
rconn_is_stale(RedisConn *conn)
{
	return conn->generation != net_settings_generation;
}



/* May the idle timer shut conn down (when it is due)? */
static inline bool
idle_closable(RedisConn *conn)
{
	return conn->state == CS_READY && !conn->busy &&
		conn->transport != NULL && !conn->shut_by_timer &&
		conn->last_used != 0;
}

/*
 * When the idle timer shuts conn down (0: never): once unused for
 * rlock.connection_idle_timeout, or a subscription kept past its wait
 * RCONN_KEEP_SUBSCRIPTION_MS after it, whichever comes first.
 */
static inline TimestampTz
idle_due(RedisConn *conn, int ms)
{
	TimestampTz due = 0;

	if (ms > 0)
		due = TimestampTzPlusMilliseconds(conn->last_used, ms);
	if (conn->kept_since != 0)
	{
		TimestampTz kept = TimestampTzPlusMilliseconds(conn->kept_since,
													   RCONN_KEEP_SUBSCRIPTION_MS);

		if (due == 0 || kept < due)
			due = kept;
	}
	return due;
}

/*
 * Before any use of the pool: disarm the idle timer, then close what it
 * shut down.
 */
void
rconn_pool_enter(void)
{
	if (idle_close_armed)
	{
		idle_close_armed = false;
		pg_compiler_barrier();
		disable_timeout(idle_timeout_id, false);
	}
	if (idle_close_shut)
	{
		idle_close_shut = false;
		for (int i = 0; i < npool; i++)
			if (pool[i]->shut_by_timer)
				rconn_discard(pool[i]);
	}
}

/*
 * At a transaction end, after the pool's last use: arm the idle timer for
 * when the oldest open connection will have been unused for
 * rlock.connection_idle_timeout.
 */
static void
arm_idle_timer(void)
{
	TimestampTz first = 0;

	if (!idle_timeout_registered)
		return;
	for (int i = 0; i < npool; i++)
	{
		TimestampTz due;

		if (!idle_closable(pool[i]))
			continue;
		due = idle_due(pool[i], rlock_connection_idle_timeout_ms);
		if (due != 0 && (first == 0 || due < first))
			first = due;
	}
	if (first == 0)
		return;
	pg_compiler_barrier();
	idle_close_armed = true;
	enable_timeout_at(idle_timeout_id, first);
}

/* The idle timer's handler, in signal context (see above). */
static void
idle_timeout_handler(void)
{
	int			ms = rlock_connection_idle_timeout_ms;
	TimestampTz now;
	TimestampTz next = 0;
	bool		shut = false;

	if (!idle_close_armed)
		return;
	now = GetCurrentTimestamp();
	for (int i = 0; i < npool; i++)
	{
		RedisConn  *conn = pool[i];
		TimestampTz due;

		if (!idle_closable(conn))
			continue;
		due = idle_due(conn, ms);
		if (due == 0)
			continue;
		if (due <= now)
		{
			transport_shutdown(conn->transport);
			conn->shut_by_timer = true;
			nopen--;
			shut = true;
		}
		else if (next == 0 || due < next)
			next = due;
	}
	if (shut)
	{
		idle_close_shut = true;
		publish_open();
	}
	if (next != 0)
		enable_timeout_at(idle_timeout_id, next);
}

static void
connection_xact_callback(XactEvent event, void *arg)
{
	if (npool == 0 || MyBackendType == B_BG_WORKER)
		return;
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PREPARE)
	{
		rconn_close_idle(false);
		if (MyBackendType == B_BACKEND)
			arm_idle_timer();
	}
}

/* Process exit: its connections are no longer this server's to count. */
static void
connection_exit_callback(int code, Datum arg)
{
	idle_close_armed = false;
	nopen = 0;
	publish_open();
}
