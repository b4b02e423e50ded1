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
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/timestamp.h"

#include "connection.h"
#include "connection_int.h"

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
											   rconn_command_timeout_ms());
		rconn_free_replies(sub);
		sub->busy = true;
		sub->subscribed = true;
		ok = true;
		for (int i = 0; i < n && ok; i++)
			ok = rconn_append_command(sub, &cmds[i], false);
		if (!ok)
			rconn_set_failure(sub, RF_LOST, "out of memory");
		ok = ok && rconn_flush_output(sub, deadline);
		while (ok)
		{
			redisReply *r;

			ok = rconn_read_reply(sub, deadline, &r);
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
				/* e.g. NOPERM for the channel: report it as such */
				redisReply	copy = *r;

				copy.str = pnstrdup(r->str, r->len);
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
