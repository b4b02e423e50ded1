/*-------------------------------------------------------------------------
 *
 * connection_parallel.c
 *	  Round trips over one node's connection or several at once, and the
 *	  one-node connect built on that (rconn_ensure; rconn_run and
 *	  rconn_ready, which ride out a blip: connection_retry.c).
 *
 * rconn_run_parallel() drives a set of connections, each with its own
 * pipeline of commands (connection_exchange.c takes each a step at a
 * time), without ever blocking: each connection goes as far as it can,
 * then the wait primitive sleeps until one of their sockets is ready, the
 * process latch is set (interrupts are processed there: cancel,
 * statement_timeout, termination) or the earliest deadline passes.  A
 * single connection waits on its own wait event set; several share one
 * (connection_wait.c).  Every other round trip of rlock (rconn_run,
 * rconn_ensure) is this with one connection, so the Sentinel, Cluster and
 * Redlock deployments ask their nodes in parallel through the same code.
 * Connections that send the same commands (a Redlock's masters) share
 * their bytes, made once.
 *
 * A caller that needs only some of the answers (a Redlock's majority)
 * runs rconn_run_quorum: once enough answered, the other connections are
 * not waited for (but those it must hear: RconnOp.awaited, a first round
 * trip, a script not known to be there); they keep their sockets, owing
 * the replies still to come, which their next round trip reads and drops
 * before its own.
 *
 * A server whose round trip timed out is silent (RedisConn.silent) until
 * a reply comes from it.  An optional op (RconnOp.optional: a Redlock's
 * master) on a silent server is left, once the others are done or enough
 * counted, after a short grace (silent_grace), however new its connection
 * and whatever it may lack: its answer could not count, and a server that
 * stopped must not cost every round trip a timeout.  Its commands may run
 * there later, or (a NOSCRIPT dropped, a connection closed mid-way) not
 * at all: what it holds then expires with its lease.
 *
 * Everything here serves single nodes: which node a command goes to (a
 * Cluster's slot map, a Sentinel's master) is the route layer's business,
 * which sits above and calls in here; the pool never asks a router.
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

/*
 * Leave os, whose connection is not waited for any longer (enough others
 * answered, or its server is silent and the others are done): a
 * connection that sent everything keeps its socket, owing the replies
 * still to come (its next round trip sends its own commands behind them,
 * and reads and drops them first); one still connecting or sending is
 * closed.
 */
static void
op_late(OpState *os)
{
	RedisConn  *conn = os->op->conn;

	if (conn->state == CS_EXCHANGE && conn->outpos == conn->outlen &&
		os->queued)
	{
		for (int k = conn->nextslot; k < conn->nslots; k++)
			if (conn->slots[k] >= 0)
				conn->slots[k] = SLOT_OWED;
		/* ready for the next op, which queues its commands behind them */
		conn->owed = true;
		conn->state = CS_READY;
		conn->busy = false;
		conn->last_used = GetCurrentTimestamp();
	}
	else
		rconn_discard(conn);
	if (conn->silent)
		rconn_set_failure(conn, RF_TIMEOUT,
						  "It has not answered since a round trip timed out, and was not waited for once the others were done.");
	os->done = true;
	os->op->ok = false;
	os->op->late = true;
}

/*
 * Is os an optional op whose server is silent (rconn_silent)?  It may be
 * left once the others are done, however new its connection (may_skip:
 * see silent_may_skip), until it is heard again.
 */
static bool
left_silent(const OpState *os)
{
	return os->may_skip && os->op->conn->silent;
}

/*
 * May os, whose server is silent, be left after a grace this round trip
 * (an optional op not awaited)?  Now and then, after a pause that doubles
 * from 1 s to a minute, its grace is a probe's, a second at least (or
 * rlock.command_timeout, if shorter: never longer than a full wait): so a
 * far server that answers again is heard even when a new connection to it
 * (TCP, TLS, AUTH) takes longer than the grace fitted to its last round
 * trip, and one still stopped costs that second, not a command timeout.
 */
#define SILENT_PROBE_MAX_MS		60000
#define SILENT_PROBE_WAIT_MS	Min(1000, rconn_command_timeout_ms())
static bool
silent_may_skip(OpState *os, TimestampTz now)
{
	RedisConn  *conn = os->op->conn;

	if (!os->op->optional || os->op->awaited || !conn->silent)
		return false;
	if (now >= conn->silent_probe_at)
	{
		os->probe = true;
		conn->silent_pause_ms = Min(conn->silent_pause_ms * 2,
									SILENT_PROBE_MAX_MS);
		/* (the pause counts from the probe's end) */
		conn->silent_probe_at = TimestampTzPlusMilliseconds(now,
															conn->silent_pause_ms +
															SILENT_PROBE_WAIT_MS);
	}
	return true;
}

/*
 * May the ops not done be left without their replies?  Not one its caller
 * awaits, nor on a connection's first round trip, nor with a script its
 * server was not seen running on this socket (rconn_scripts_known), unless
 * its server is silent (left_silent).
 */
static bool
may_leave(OpState *os, int nops)
{
	for (int i = 0; i < nops; i++)
		if (!os[i].done && !left_silent(&os[i]) &&
			(os[i].op->awaited || !os[i].op->conn->proven ||
			 !rconn_scripts_known(os[i].op)))
			return false;
	return true;
}

/* Are the ops not done all silent ones, and some op done? */
static bool
only_silent_left(OpState *os, int nops, int active)
{
	if (active == nops)
		return false;
	for (int i = 0; i < nops; i++)
		if (!os[i].done && !left_silent(&os[i]))
			return false;
	return true;
}

/*
 * When the silent ops not done are left: three times what the round trip
 * took so far, and 2 ms, or twice what a round trip of theirs last took
 * if longer, or a probe's second (DT_NOEND: no silent op is pending).
 */
static TimestampTz
silent_grace(OpState *os, int nops, TimestampTz start, TimestampTz now)
{
	int64		us = -1;

	for (int i = 0; i < nops; i++)
		if (!os[i].done && left_silent(&os[i]))
			us = Max(us, os[i].probe ? SILENT_PROBE_WAIT_MS * INT64CONST(1000) :
					 2 * os[i].op->conn->op_us);
	if (us < 0)
		return DT_NOEND;
	return now + Max(us, 3 * (now - start) + 2000);
}

/* Will conn go on as it is at its next use (see run_ops)? */
static bool
keeps_socket(RedisConn *conn)
{
	if (conn->state == CS_CLOSED || rconn_is_stale(conn) ||
		rconn_idle_expired(conn) || conn->demoted || conn->out_of_step ||
		rconn_topology_moved(conn))
		return false;
	return conn->state == CS_READY && !conn->busy;
}

bool
rconn_reusable(RedisConn *conn)
{
	rconn_pool_enter();			/* (closes it if the idle timer shut it) */
	return keeps_socket(conn);
}

/*
 * Drive ops until each answered or failed, or (counts) until "need" of
 * them answered with replies that count: the others are left late.
 */
static void
run_ops(RconnOp *ops, int nops, int need, RconnCounts counts, void *arg)
{
	/* (room for a Redlock's usual masters without a palloc) */
#define INLINE_OPS	8
	OpState		inline_os[INLINE_OPS];
	bool		inline_ready[INLINE_OPS];
	RconnWaiter inline_waiters[INLINE_OPS];
	StringInfoData shared = {0};	/* the bytes ops share (data: none yet) */
	int			counted = 0;	/* answers that count (rconn_run_quorum) */
	TimestampTz start = 0;		/* (when an op is optional) */
	TimestampTz grace = DT_NOEND;	/* silent ops are left then */
	TimestampTz until;			/* the grace, while the others are done */
	OpState    *os = nops <= INLINE_OPS ? inline_os :
		palloc(nops * sizeof(OpState));
	bool	   *ready = nops <= INLINE_OPS ? inline_ready :
		palloc(nops * sizeof(bool));
	RconnWaiter *waiters = nops <= INLINE_OPS ? inline_waiters :
		palloc(nops * sizeof(RconnWaiter));

	rconn_pool_enter();
	for (int i = 0; i < nops; i++)
	{
		RedisConn  *conn = ops[i].conn;

		Assert(conn->node.kind != NODE_CLUSTER);	/* routed: the route layer */
		memset(&os[i], 0, sizeof(OpState));
		os[i].op = &ops[i];
		/* the same commands as an op before: their bytes are made once */
		for (int j = 0; j < i && os[i].shared == NULL; j++)
		{
			if (ops[j].cmds != ops[i].cmds || ops[j].ncmds != ops[i].ncmds ||
				ops[i].ncmds == 0)
				continue;
			if (os[j].shared == NULL && shared.data == NULL)
			{
				initStringInfo(&shared);
				os[j].shared = &shared;
			}
			os[i].shared = os[j].shared;
		}
		ops[i].ok = false;
		ops[i].late = false;
		ops[i].sent = false;
		ops[i].replies = NULL;
		ready[i] = true;		/* every op takes its first step */
		if (ops[i].optional)
		{
			if (start == 0)
				start = GetCurrentTimestamp();
			os[i].started = start;
			os[i].may_skip = silent_may_skip(&os[i], start);
		}
		/* left mid-way (an interrupt), stale, broken or idle: start afresh */
		if (conn->state != CS_CLOSED && !keeps_socket(conn))
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
				rconn_step(&os[i]);
			if (!os[i].done)
				active++;
			else if (counts != NULL && !os[i].tallied)
			{
				os[i].tallied = true;	/* (each answer counted once) */
				if (ops[i].ok && counts(&ops[i], arg))
					counted++;
			}
		}
		if (active == 0)
			break;
		/*
		 * Enough answered, or only silent servers' ops are left: the rest
		 * are not waited for, unless one may yet need its script's body
		 * (may_leave).  A silent server gets its grace first
		 * (silent_grace, fixed when first needed): one that answers again
		 * is heard (no longer silent, it is waited for as any), one still
		 * stopped costs that, not a command_timeout each time.
		 */
		until = DT_NOEND;
		if ((counts != NULL && counted >= need && may_leave(os, nops)) ||
			only_silent_left(os, nops, active))
		{
			TimestampTz t = start != 0 ? GetCurrentTimestamp() : 0;
			TimestampTz g = start != 0 ? silent_grace(os, nops, start, t) :
				DT_NOEND;

			if (g != DT_NOEND)
			{
				if (grace == DT_NOEND)
					grace = g;
				if (t < grace)
					until = grace;	/* a silent op: its grace first */
			}
			if (until == DT_NOEND)
			{
				for (int i = 0; i < nops; i++)
					if (!os[i].done)
						op_late(&os[i]);
				break;
			}
		}

		if (active == 1)
		{
			for (int i = 0; i < nops; i++)
			{
				RedisConn  *conn = os[i].op->conn;

				if (os[i].done)
					continue;
				ready[i] = true;
				if (!rconn_wait(conn, conn->want, Min(os[i].deadline, until),
								NULL) && until >= os[i].deadline)
				{
					rconn_set_failure(conn, RF_TIMEOUT, NULL);
					rconn_op_failed(&os[i]);
				}
			}
			continue;
		}
		for (int i = 0; i < nops; i++)
		{
			waiters[i].conn = os[i].op->conn;
			waiters[i].done = os[i].done;
			waiters[i].deadline = Min(os[i].deadline, until);
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
				rconn_op_failed(&os[i]);
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
	if (shared.data != NULL)
		pfree(shared.data);
}

void
rconn_run_parallel(RconnOp *ops, int nops)
{
	run_ops(ops, nops, 0, NULL, NULL);
}

void
rconn_run_quorum(RconnOp *ops, int nops, int need, RconnCounts counts,
				 void *arg)
{
	run_ops(ops, nops, need, counts, arg);
}

/*
 * Make sure conn (one node's) is connected with the current settings and
 * idle (connecting now if needed).  On failure conn->failure says why.
 */
bool
rconn_ensure(RedisConn *conn)
{
	RconnOp		op = {conn, NULL, 0, false, NULL};

	Assert(conn->node.kind != NODE_CLUSTER);	/* routed: the route layer */
	if (rconn_reusable(conn))
		return true;
	rconn_run_parallel(&op, 1);
	return op.ok;
}
