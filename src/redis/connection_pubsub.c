/*-------------------------------------------------------------------------
 *
 * connection_pubsub.c
 *	  Publish/subscribe on one node's subscriber connection: how a waiter
 *	  listens for release messages (lock_wait.c) with the same
 *	  interruptible wait as every round trip.
 *
 * A subscribed RESP2 connection cannot run commands, so waiters use a
 * connection of their own (the route layer's route_backend_subscriber).  A
 * waiter subscribes to one channel at a time; leaving it does not wait for
 * Redis's answer, and whatever arrives meanwhile is skipped by the next
 * subscription.  A waiter that took a lock others of this server still
 * wait for may keep its subscription instead (rconn_keep_subscription):
 * its next wait on that channel resumes it without a round trip, skipping
 * the messages that arrived in between (rconn_resume_subscription), so a
 * session that waits again and again on a hot name subscribes once.  With sharded pub/sub (rlock.publish_mode: SPUBLISH on a
 * Redis 7 Cluster) the verbs are SSUBSCRIBE and SUNSUBSCRIBE and messages
 * come as "smessage".
 *
 * This file subscribes one node's connection once and says how it went
 * (subscribed, failed, or redirected by a Cluster's MOVED); following a
 * failover, a Cluster's slot map and redirections is the route layer's
 * (route_subscribe, route_wait_message), which calls in here.
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
#include "base/base.h"

/* The channel sub is subscribed to is no longer known (or kept). */
static void
forget_channel(RedisConn *sub)
{
	if (sub->sub_channel != NULL)
		pfree(sub->sub_channel);
	sub->sub_channel = NULL;
	sub->kept_since = 0;
}

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

/*
 * Subscribe sub, one node's subscriber connection, to channel (and to
 * nothing else), with SSUBSCRIBE if sharded.  Reconnects as needed; a
 * connection that had worked and broke is retried once.  Returns
 * RSUB_FAILED when the connection failed (sub's failure says why),
 * RSUB_MOVED with *moved (palloc'd: "MOVED <slot> <host>:<port>") when a
 * Cluster node says the channel's slot lives elsewhere; RSUB_REFUSED,
 * after a WARNING with its words, for an error reply (e.g. NOPERM for the
 * channel: the waiter does without messages).  Messages of channels it was
 * subscribed to before are skipped.
 */
RconnSubResult
rconn_subscribe_once(RedisConn *sub, const char *channel, const char *what,
					 bool sharded, char **moved)
{
	RedisCmd	cmd;

	rconn_pool_enter();
	for (int attempt = 0;; attempt++)
	{
		TimestampTz deadline;
		bool		ok = true;
		bool		skip_name;

		if (!rconn_ensure(sub))
			return RSUB_FAILED;

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
		forget_channel(sub);
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
				sub->sub_channel = MemoryContextStrdup(TopMemoryContext,
													   channel);
				return RSUB_OK;
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
				*moved = pnstrdup(r->str, r->len);
				freeReplyObject(r);
				rconn_discard(sub);
				return RSUB_MOVED;
			}
			if (r->type == REDIS_REPLY_ERROR)
			{
				/*
				 * e.g. NOPERM for the channel: refused (its words are the
				 * failure's detail); the waiter does without messages
				 */
				RReply		copy = {0};

				copy.type = RREPLY_ERROR;
				copy.str = rlock_printable(r->str, r->len);
				copy.len = strlen(copy.str);
				freeReplyObject(r);
				rconn_discard(sub);
				rconn_set_failure(sub, RF_PROTOCOL, copy.str);
				rconn_reply_error(&copy, WARNING, what);
				pfree(copy.str);
				return RSUB_REFUSED;
			}
			freeReplyObject(r);
		}
		if (sub->failure == RF_LOST && sub->proven && attempt == 0)
		{
			rconn_discard(sub);
			continue;
		}
		rconn_discard_failed(sub);
		return RSUB_FAILED;
	}
}

/*
 * Wait for a message on the subscribed channel of sub (one node's) until
 * deadline.  Returns 1 when a message arrived, 2 when the process latch was
 * set (another waiter of this server passed the turn on, waitqueue.c), 0
 * on timeout, -1 when the connection failed (it is then discarded; the
 * caller resubscribes), RCONN_MSG_DROPPED when the server dropped a
 * sharded subscription because the slot moved away (discarded too; the
 * caller reads the map again and subscribes where the slot went).
 */
int
rconn_wait_message(RedisConn *sub, TimestampTz deadline)
{
	bool		latch_woken = false;
	bool		read_last = false;	/* no wait since the last read */

	Assert(sub->node.kind != NODE_CLUSTER);	/* routed: the route layer */
	rconn_pool_enter();			/* (closes it if the idle timer shut it) */
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

			if (msg)
			{
				redisReply *text = ((redisReply *) r)->element[2];

				sub->last_message[0] = '\0';
				if (text->type == REDIS_REPLY_STRING)
					strlcpy(sub->last_message, text->str,
							sizeof(sub->last_message));
			}
			freeReplyObject(r);
			if (msg)
			{
				sub->last_used = GetCurrentTimestamp();
				return 1;
			}
			if (dropped)
			{
				/* the slot moved away: subscribe again where it went */
				rconn_discard(sub);
				return RCONN_MSG_DROPPED;
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

/* The text of the last message rconn_wait_message returned. */
const char *
rconn_last_message(RedisConn *sub)
{
	return sub->last_message;
}

/*
 * Ask to leave the channel without waiting for the answer; the next
 * subscription skips whatever arrives meanwhile.  Never throws.
 */
void
rconn_unsubscribe_nowait(RedisConn *sub)
{
	RedisCmd	cmd;

	Assert(sub->node.kind != NODE_CLUSTER);	/* routed: the route layer */
	rconn_pool_enter();
	if (sub->state != CS_READY || sub->busy || !sub->subscribed)
		return;
	forget_channel(sub);
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

/*
 * Keep sub's subscription past the wait that made it, for the next wait on
 * the same channel.  Never throws.
 */
void
rconn_keep_subscription(RedisConn *sub)
{
	Assert(sub->node.kind != NODE_CLUSTER);	/* routed: the route layer */
	if (sub->sub_channel != NULL && sub->state == CS_READY && !sub->busy)
		sub->kept_since = GetCurrentTimestamp();
}

/*
 * The most a resumed subscription reads of what arrived while it was kept
 * (RCONN_RESUME_MAX_READS reads of up to 16 kB); a channel that streams
 * more is subscribed to afresh.
 */
#define RCONN_RESUME_MAX_READS	64

/*
 * Read and skip what arrived on sub, subscribed to channel, so far: true
 * when all of it was messages of channel; false (sub closed) when anything
 * else came (a dropped sharded subscription), the connection failed, or
 * the channel streamed more than RCONN_RESUME_MAX_READS reads.
 */
static bool
skip_pending(RedisConn *sub, const char *channel, bool sharded)
{
	int			reads = 0;

	for (;;)
	{
		void	   *r = NULL;
		TransportStatus st;

		if (!rconn_get_reply(sub, &r))
		{
			rconn_discard(sub);
			return false;
		}
		if (r != NULL)
		{
			bool		msg = is_push((redisReply *) r,
									  sharded ? "smessage" : "message",
									  channel);

			freeReplyObject(r);
			if (!msg)
			{
				/* not a message of ours: start afresh */
				rconn_discard(sub);
				return false;
			}
			continue;
		}
		if (reads++ >= RCONN_RESUME_MAX_READS)
		{
			rconn_discard(sub);
			return false;
		}
		CHECK_FOR_INTERRUPTS();
		st = rconn_read_some(sub);
		if (st == TS_ERROR)
		{
			rconn_discard(sub);
			return false;
		}
		if (st != TS_DONE)
			return true;		/* nothing more to read now */
	}
}

/*
 * Resume sub's kept subscription for a wait on channel: true when sub is
 * still subscribed to channel (the same verb), with every message that
 * arrived before this call read and skipped, without a round trip; the
 * wait that follows sees every message published after it.  False when
 * not (sub is then closed if what it had read was not messages of that
 * channel, or it failed): the caller subscribes.
 */
bool
rconn_resume_subscription(RedisConn *sub, const char *channel, bool sharded)
{
	Assert(sub->node.kind != NODE_CLUSTER);	/* routed: the route layer */
	rconn_pool_enter();			/* (closes it if the idle timer shut it) */
	if (sub->kept_since == 0 || sub->sub_channel == NULL ||
		sub->state != CS_READY || sub->busy || !sub->subscribed ||
		sub->demoted || rconn_is_stale(sub) ||
		sub->sub_sharded != sharded || strcmp(sub->sub_channel, channel) != 0)
		return false;
	if (!skip_pending(sub, channel, sharded))
		return false;
	sub->kept_since = 0;
	sub->last_used = GetCurrentTimestamp();
	return true;
}

/*
 * Skip the messages that arrived on sub, subscribed now, while its waiter
 * did not listen (it was not among the next to try): true when done, false
 * when sub is no longer subscribed (closed: the caller subscribes again).
 */
bool
rconn_skip_messages(RedisConn *sub)
{
	Assert(sub->node.kind != NODE_CLUSTER);	/* routed: the route layer */
	rconn_pool_enter();			/* (closes it if the idle timer shut it) */
	if (sub->sub_channel == NULL || sub->state != CS_READY || sub->busy ||
		!sub->subscribed)
		return false;
	return skip_pending(sub, sub->sub_channel, sub->sub_sharded);
}
