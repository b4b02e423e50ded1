/*-------------------------------------------------------------------------
 *
 * connection_pubsub.c
 *	  Publish/subscribe on the backend's subscriber connection: how a
 *	  waiter listens for release messages (lock_wait.c) with the same
 *	  interruptible wait as every round trip.
 *
 * A subscribed RESP2 connection cannot run commands, so waiters use a
 * connection of their own (rconn_backend_subscriber).  A waiter subscribes
 * to one channel at a time; leaving it does not wait for Redis's answer,
 * and whatever arrives meanwhile is skipped by the next subscription.
 * Where the master can move (Sentinel, Cluster), a subscription that
 * breaks is retried until the waiter's deadline, so a waiter rides out a
 * failover and listens on the new master.
 *
 * In a Cluster the routed subscriber connection subscribes on the
 * subscriber connection of the channel's node (every channel of a lock
 * shares the lock's slot), leaving the one it used before.  With sharded
 * pub/sub (rlock.publish_mode: SPUBLISH on a Redis 7 Cluster) the verbs are
 * SSUBSCRIBE and SUNSUBSCRIBE and messages come as "smessage"; a slot that
 * moves away makes the node drop the subscription (a "sunsubscribe" push),
 * after which the waiter subscribes again where the slot went.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/timestamp.h"

#include "redis/redis.h"
#include "redis/redis_int.h"
#include "base/base.h"

typedef enum SubResult
{
	SUB_OK,
	SUB_FAILED,					/* the connection failed: sub->failure */
	SUB_MOVED					/* MOVED: the slot lives elsewhere */
} SubResult;

static SubResult subscribe_once(RedisConn *sub, const char *channel,
								const char *what);

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

/* ----------------------------------------------------------------
 * Primitives: writing and reading on the subscriber connection
 * ----------------------------------------------------------------
 */

/* Write everything queued, waiting for the socket as needed. */
static bool
rconn_flush(RedisConn *conn, TimestampTz deadline)
{
	for (;;)
	{
		TransportStatus st = rconn_write_some(conn);

		if (st == TS_DONE)
			return true;
		if (st == TS_ERROR)
			return false;
		if (!rconn_wait(conn, conn->want, deadline, NULL))
		{
			rconn_set_failure(conn, RF_TIMEOUT, NULL);
			return false;
		}
	}
}

/* Read one reply (hiredis' own: freed by the caller), waiting as needed. */
static bool
rconn_read_raw(RedisConn *conn, TimestampTz deadline, redisReply **reply)
{
	bool		read_last = false;	/* no wait since the last read */

	for (;;)
	{
		void	   *r = NULL;
		TransportStatus st;

		if (!rconn_get_reply(conn, &r))
			return false;
		if (r != NULL)
		{
			*reply = (redisReply *) r;
			return true;
		}
		if (read_last && !rconn_read_on(deadline))
		{
			rconn_set_failure(conn, RF_TIMEOUT, NULL);
			return false;
		}
		st = rconn_read_some(conn);
		if (st == TS_ERROR)
			return false;
		read_last = (st == TS_DONE);
		if (st != TS_DONE &&
			!rconn_wait(conn, conn->want, deadline, NULL))
		{
			rconn_set_failure(conn, RF_TIMEOUT, NULL);
			return false;
		}
	}
}

/* Longest pause between two attempts to re-subscribe during a failover. */
#define RESUBSCRIBE_PAUSE_MS	100
/* MOVED answers one subscription follows before it is an ERROR. */
#define MAX_SUBSCRIBE_MOVES		5

/*
 * Subscribe the subscriber connection to channel (and to nothing else).
 * Reconnects as needed; ERROR on failure.  Messages of channels we were
 * subscribed to before are skipped.  Where the master can move (Sentinel,
 * Cluster), a connection failure is retried until retry_until, a pause
 * apart, so that a waiter rides out a failover (DT_NOEND: as long as it
 * waits).
 */
void
rconn_subscribe(RedisConn *sub, const char *channel, const char *what,
				TimestampTz retry_until)
{
	int			moves = 0;

	for (;;)
	{
		TimestampTz now;
		RedisConn  *node = sub;
		SubResult	res = SUB_FAILED;

		if (sub->node.kind == NODE_CLUSTER)
		{
			node = cluster_conn_for(sub, channel, strlen(channel),
									RCONN_SUBSCRIBER);
			if (sub->target != NULL && sub->target != node)
				rconn_unsubscribe_nowait(sub->target);
			sub->target = node;
		}
		if (node != NULL)
			res = subscribe_once(node, channel, what);
		if (res == SUB_OK)
			return;
		if (res == SUB_MOVED && ++moves <= MAX_SUBSCRIBE_MOVES)
			continue;
		if (sub->node.kind == NODE_CLUSTER)
			cluster_map_stale();	/* the node may have failed over */
		if (res == SUB_MOVED)
			rconn_set_failure(node, RF_CLUSTER,
							  psprintf("The subscription to channel \"%s\" was redirected more than %d times.",
									   channel, MAX_SUBSCRIBE_MOVES));
		now = GetCurrentTimestamp();
		if (!rconn_follows_failover() || now >= retry_until)
			rconn_report(node != NULL ? node : sub, ERROR, what);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 RESUBSCRIBE_PAUSE_MS, RLOCK_WAIT_EVENT);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/* One try at rconn_subscribe. */
static SubResult
subscribe_once(RedisConn *sub, const char *channel, const char *what)
{
	RedisCmd	cmd;
	bool		sharded = rconn_sharded_publish();

	for (int attempt = 0;; attempt++)
	{
		TimestampTz deadline;
		bool		ok = true;
		bool		skip_name;

		if (!rconn_ensure(sub))
			return SUB_FAILED;

		deadline = rconn_round_trip_deadline(sub, rconn_command_timeout_ms());
		rconn_reset_replies(sub);
		sub->busy = true;
		skip_name = sub->name_pending;	/* its reply comes first */
		ok = rconn_queue_setname(sub);
		if (sub->subscribed)
		{
			rcmd_init(&cmd);
			rcmd_str(&cmd, sub->sub_sharded ? "SUNSUBSCRIBE" : "UNSUBSCRIBE");
			ok = ok && rconn_queue(sub, &cmd, false, SLOT_DROP);
		}
		sub->subscribed = true;
		sub->sub_sharded = sharded;
		rcmd_init(&cmd);
		rcmd_str(&cmd, sharded ? "SSUBSCRIBE" : "SUBSCRIBE");
		rcmd_str(&cmd, channel);
		ok = ok && rconn_queue(sub, &cmd, false, SLOT_DROP);
		stats_count(RLOCK_STAT_ROUND_TRIPS);
		ok = ok && rconn_flush(sub, deadline);
		while (ok)
		{
			redisReply *r;

			ok = rconn_read_raw(sub, deadline, &r);
			if (!ok)
				break;
			if (skip_name)
			{
				/* CLIENT SETNAME's answer: an ACL may refuse it, never mind */
				freeReplyObject(r);
				skip_name = false;
				continue;
			}
			if (is_push(r, sharded ? "ssubscribe" : "subscribe", channel))
			{
				freeReplyObject(r);
				rconn_reset_replies(sub);
				sub->busy = false;
				sub->proven = true;
				sub->last_used = GetCurrentTimestamp();
				return SUB_OK;
			}
			if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSUB", 5) == 0)
			{
				/* an UNSUBSCRIBE that found us unsubscribed (Valkey) */
				freeReplyObject(r);
				continue;
			}
			if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "MOVED ", 6) == 0)
			{
				/* a Cluster's slot that moved: subscribe where it went */
				cluster_note_moved(r->str);
				freeReplyObject(r);
				rconn_discard(sub);
				return SUB_MOVED;
			}
			if (r->type == REDIS_REPLY_ERROR)
			{
				/* e.g. NOPERM for the channel: report it as such */
				RReply		copy = {0};

				copy.type = RREPLY_ERROR;
				copy.str = pnstrdup(r->str, r->len);
				copy.len = r->len;
				freeReplyObject(r);
				rconn_discard(sub);
				rconn_reply_error(&copy, ERROR, what);
			}
			freeReplyObject(r);
		}
		if (sub->failure == RF_LOST && sub->proven && attempt == 0)
		{
			rconn_discard(sub);
			continue;
		}
		rconn_discard_failed(sub);
		return SUB_FAILED;
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
	bool		read_last = false;	/* no wait since the last read */

	if (sub->node.kind == NODE_CLUSTER)
	{
		if (sub->target == NULL)
			return -1;
		return rconn_wait_message(sub->target, deadline);
	}
	if (sub->state != CS_READY || sub->busy)
		return -1;
	for (;;)
	{
		void	   *r = NULL;
		TransportStatus st;

		if (!rconn_get_reply(sub, &r))
		{
			rconn_discard(sub);
			return -1;
		}
		if (r != NULL)
		{
			bool		msg = is_push((redisReply *) r,
									  sub->sub_sharded ? "smessage" : "message",
									  NULL);
			bool		dropped = sub->sub_sharded &&
				is_push((redisReply *) r, "sunsubscribe", NULL);

			freeReplyObject(r);
			if (msg)
			{
				sub->last_used = GetCurrentTimestamp();
				return 1;
			}
			if (dropped)
			{
				/* the slot moved away: subscribe again where it went */
				cluster_map_stale();
				rconn_discard(sub);
				return -1;
			}
			continue;
		}
		if (read_last && !rconn_read_on(deadline))
			return 0;
		st = rconn_read_some(sub);
		if (st == TS_ERROR)
		{
			rconn_discard(sub);
			return -1;
		}
		read_last = (st == TS_DONE);
		if (st != TS_DONE &&
			!rconn_wait(sub, sub->want, deadline, &latch_woken))
			return latch_woken ? 2 : 0;
	}
}

/*
 * Ask to leave the channel without waiting for the answer; the next
 * subscription skips whatever arrives meanwhile.  Never throws.
 */
void
rconn_unsubscribe_nowait(RedisConn *sub)
{
	RedisCmd	cmd;

	if (sub->node.kind == NODE_CLUSTER)
	{
		if (sub->target != NULL)
			rconn_unsubscribe_nowait(sub->target);
		return;
	}
	if (sub->state != CS_READY || sub->busy)
		return;
	rcmd_init(&cmd);
	rcmd_str(&cmd, sub->sub_sharded ? "SUNSUBSCRIBE" : "UNSUBSCRIBE");
	if (!rconn_queue(sub, &cmd, false, SLOT_DROP) ||
		rconn_write_some(sub) == TS_ERROR)
		rconn_discard(sub);
	else
		sub->subscribed = false;	/* no second UNSUBSCRIBE: Valkey refuses
									 * one outside subscribed mode (NOSUB) */
	/* bytes the socket did not take go out with the next command */
}
