/*-------------------------------------------------------------------------
 *
 * connection_bounds.c
 *	  How long anything on a Redis connection may wait: the bound of a
 *	  round trip and of establishing a connection, capped where nothing can
 *	  interrupt us, and the per-connection adjustments of it (a cap, a
 *	  deadline per reply, impatience) that callers set.
 *
 * It sits at the bottom of the connection layer, calling nothing of it,
 * because every other file of it (the wording of failures included) asks
 * these bounds.  Round trips that cannot be interrupted (interrupts held at
 * COMMIT, ROLLBACK and in error clean-up, or the process exiting) are
 * capped at RLOCK_UNINTERRUPTIBLE_CAP_MS whatever the settings say.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/timestamp.h"

#include "redis/redis.h"
#include "redis/redis_int.h"
#include "base/base.h"

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
 * reconciled now, before a call that may concern other nodes.  The route
 * layer, which runs such round trips, reads it (rconn_is_impatient).
 */
void
rconn_set_impatient(RedisConn *conn, bool on)
{
	conn->impatient = on;
}

bool
rconn_is_impatient(RedisConn *conn)
{
	return conn->impatient;
}

/*
 * node's round trips made on behalf of conn (a routed connection) keep
 * conn's bounds: its per-reply deadlines and its cap.
 */
void
rconn_inherit_bounds(RedisConn *node, RedisConn *conn)
{
	node->progress_deadlines = conn->progress_deadlines;
	node->deadline_cap = conn->deadline_cap;
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
