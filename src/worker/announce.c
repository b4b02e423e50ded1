/*-------------------------------------------------------------------------
 *
 * announce.c
 *	  The server announces itself on the Redis it locks on (SPEC.md section
 *	  3): holder ids name no server, and their UUID changes at every crash
 *	  restart, so each server keeps a hash saying who it is.
 *
 * The hash {rlock:servers}:<instance uuid> holds the server's readable name
 * (rlock_server_label: rlock.server_name, cluster_name, or host:port), its
 * host, when this instance began (as text, and "started_ms" in epoch ms),
 * and the UUID of this server's previous run (crash_cleanup.c knows it
 * from pg_stat_tmp/rlock_instance; empty on a first start).  The worker
 * refreshes it every ANNOUNCE_MS and it expires ANNOUNCE_TTL_MS after the
 * last refresh, so a server that is gone disappears by itself.  The sorted
 * set {rlock:servers} indexes the hashes (member: the UUID, score: when its
 * hash expires, epoch ms), so that rlock_servers() reads them without
 * scanning the key space; stale members are dropped at each refresh.  All
 * keys share one hash tag: one slot in a Cluster.  The writes are plain
 * commands, pipelined in one round trip; a failure is retried a second
 * later, quietly (the renewals already report an outage), and counted in
 * no rlock_stats counter (stats_quiet).
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/timestamp.h"

#include "redis/redis.h"
#include "route/route.h"
#include "holds/holds.h"
#include "locks/locks.h"
#include "base/base.h"
#include "worker/worker.h"

/* How often the announcement is refreshed, and how long it outlives that. */
#define ANNOUNCE_MS			5000
#define ANNOUNCE_TTL_MS		15000
#define ANNOUNCE_RETRY_MS	1000

static TimestampTz next_announce = 0;

/* The former run's waits are forgotten (wait_graph_forget_server). */
static bool forgot_previous = false;

/*
 * Refresh this server's announcement when it is due (in the caller's
 * context), waiting for Redis no later than cap.
 */
void
announce_refresh(TimestampTz cap)
{
	TimestampTz now = GetCurrentTimestamp();
	const char *uuid = registry_instance_uuid();
	int64		now_ms = (now - SetEpochTimestamp()) / 1000;
	char	   *key;
	RedisCmd	cmds[4];
	RReply	  **replies = NULL;
	RedisConn  *conn;
	bool		ok;

	if (now < next_announce || uuid == NULL || cap <= now)
		return;
	key = psprintf("%s:%s", RLOCK_SERVERS_KEY, uuid);

	rcmd_init(&cmds[0]);
	rcmd_str(&cmds[0], "HSET");
	rcmd_str(&cmds[0], key);
	rcmd_str(&cmds[0], "name");
	rcmd_str(&cmds[0], rlock_server_label());
	rcmd_str(&cmds[0], "host");
	rcmd_str(&cmds[0], holds_file_host());
	rcmd_str(&cmds[0], "started");
	rcmd_str(&cmds[0], timestamptz_to_str(registry_instance_started()));
	rcmd_str(&cmds[0], "started_ms");
	rcmd_int(&cmds[0], (registry_instance_started() - SetEpochTimestamp()) / 1000);
	rcmd_str(&cmds[0], "previous_uuid");
	rcmd_str(&cmds[0], crash_cleanup_previous_uuid());

	rcmd_init(&cmds[1]);
	rcmd_str(&cmds[1], "PEXPIRE");
	rcmd_str(&cmds[1], key);
	rcmd_int(&cmds[1], ANNOUNCE_TTL_MS);

	rcmd_init(&cmds[2]);
	rcmd_str(&cmds[2], "ZADD");
	rcmd_str(&cmds[2], RLOCK_SERVERS_KEY);
	rcmd_int(&cmds[2], now_ms + ANNOUNCE_TTL_MS);
	rcmd_str(&cmds[2], uuid);

	rcmd_init(&cmds[3]);
	rcmd_str(&cmds[3], "ZREMRANGEBYSCORE");
	rcmd_str(&cmds[3], RLOCK_SERVERS_KEY);
	rcmd_str(&cmds[3], "-inf");
	rcmd_int(&cmds[3], now_ms);

	/* not lock traffic: rlock_stats counts none of it */
	conn = route_backend();
	stats_quiet = true;
	PG_TRY();
	{
		rconn_set_deadline_cap(conn, cap);
		ok = route_run(conn, cmds, 4, &replies, DEBUG1, NULL);
		rconn_set_deadline_cap(conn, DT_NOEND);
	}
	PG_FINALLY();
	{
		stats_quiet = false;
	}
	PG_END_TRY();
	/*
	 * Each answers an integer; any other reply may answer another command:
	 * the connection is closed before its next use (rconn_distrust).
	 */
	for (int i = 0; ok && replies != NULL && i < 4; i++)
	{
		if (replies[i] != NULL && replies[i]->type == RREPLY_INTEGER)
			continue;
		if (replies[i] != NULL && replies[i]->type != RREPLY_ERROR)
			rconn_distrust(replies[i]);
		ok = false;
	}
	next_announce = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												ok ? ANNOUNCE_MS :
												ANNOUNCE_RETRY_MS);

	/*
	 * The waits a former run made known (SPEC.md section 5.6) expire by
	 * themselves within seconds; after a crash, forget them at once.
	 */
	if (ok && !forgot_previous)
		forgot_previous = wait_graph_forget_server(crash_cleanup_previous_uuid(),
												   cap);
}
