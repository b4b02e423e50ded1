/*-------------------------------------------------------------------------
 *
 * redlock.c
 *	  The masters of a Redlock (rlock.redlock_urls: redlock_conf.c): their
 *	  connections, the round trip that asks all of them at once, and the
 *	  one that returns once a majority answered.
 *
 * One master that does not answer costs at most the command deadline,
 * while the others answer in parallel (rconn_run_parallel); a round trip
 * that needs only a majority's answers (an acquisition, a release) does
 * not wait for the last masters once a majority granted (rconn_run_quorum).
 *
 * Each master must count once toward the majority: the setting's check
 * hook refuses a server named twice where it can tell, and the first
 * acquisition over each connection asks the server's run_id in the same
 * round trip, so that two names no setting could tell apart (a TCP port
 * and a Unix socket of one server) fail closed.  A master counted toward a
 * majority has answered, so it was identified.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/timestamp.h"

#include "redis/redis.h"
#include "route/route.h"
#include "route/route_int.h"

/*
 * The masters' command connections, looked up in the pool once per value
 * of the setting (pool entries live as long as the process).
 */
static RedisConn *master_conns[REDLOCK_MAX_MASTERS];
static bool master_conns_valid = false;

/*
 * Who answers on each master's command connection: the server's run_id
 * (INFO server), asked once per socket, in the first acquisition's round
 * trip over it.  Two masters with one run_id are one server, whatever
 * names or addresses the setting gave them (redlock_run_identified).
 */
#define RUN_ID_LEN	40
static uint64 identified_incarnation[REDLOCK_MAX_MASTERS];
static char run_ids[REDLOCK_MAX_MASTERS][RUN_ID_LEN + 1];

/* The setting's generation these were looked up for. */
static uint64 masters_generation = 0;

/* After a change of the setting, connections and identities anew. */
static void
check_generation(void)
{
	if (masters_generation == redlock_conf_generation())
		return;
	master_conns_valid = false;
	memset(identified_incarnation, 0, sizeof(identified_incarnation));
	memset(run_ids, 0, sizeof(run_ids));
	masters_generation = redlock_conf_generation();
}

/* The command connections of the masters, in conns (REDLOCK_MAX_MASTERS). */
int
redlock_masters(RedisConn **conns, const char *name)
{
	redlock_require_configured(name);
	check_generation();
	if (!master_conns_valid)
	{
		for (int i = 0; i < redlock_num_masters(); i++)
			master_conns[i] = rconn_get(redlock_master_url(i),
										RCONN_COMMANDS);
		master_conns_valid = true;
	}
	memcpy(conns, master_conns, redlock_num_masters() * sizeof(RedisConn *));
	return redlock_num_masters();
}

/* The subscriber connection of one master (a waiter listens there). */
RedisConn *
redlock_subscriber(int master)
{
	Assert(master >= 0 && master < redlock_num_masters());
	return rconn_get(redlock_master_url(master), RCONN_SUBSCRIBER);
}

RconnOp *
redlock_run(RedisConn **conns, int n, RedisCmd *cmds, int ncmds,
			TimestampTz cap)
{
	RconnOp    *ops = palloc0(n * sizeof(RconnOp));

	for (int i = 0; i < n; i++)
	{
		ops[i].conn = conns[i];
		ops[i].cmds = cmds;
		ops[i].ncmds = ncmds;
		rconn_set_deadline_cap(conns[i], cap);
	}
	rconn_run_parallel(ops, n);
	for (int i = 0; i < n; i++)
		rconn_set_deadline_cap(conns[i], DT_NOEND);
	return ops;
}

RconnOp *
redlock_run_majority(RedisConn **conns, int n, RedisCmd *cmds, int ncmds,
					 RconnCounts counts, void *arg)
{
	RconnOp    *ops = palloc0(n * sizeof(RconnOp));

	for (int i = 0; i < n; i++)
	{
		ops[i].conn = conns[i];
		ops[i].cmds = cmds;
		ops[i].ncmds = ncmds;
	}
	rconn_run_quorum(ops, n, redlock_quorum(n), counts, arg);
	return ops;
}

/* What redlock_run_identified's counting needs: INFO's reply is skipped. */
typedef struct IdentifiedCount
{
	RconnOp    *ops;
	const bool *asked;
	RedisCmd   *cmd;
	RconnCounts counts;
	void	   *arg;
} IdentifiedCount;

static bool
identified_counts(const RconnOp *op, void *arg)
{
	IdentifiedCount *ic = arg;
	RconnOp		own = *op;

	if (ic->asked[op - ic->ops])
	{
		own.replies++;
		own.cmds = ic->cmd;
		own.ncmds = 1;
	}
	return ic->counts(&own, ic->arg);
}

/*
 * redlock_run_majority of one command on every master (conns:
 * redlock_masters'), with INFO server first on each connection that is not
 * identified on the socket it will use.  When two masters turn out to be
 * one server, *dup_a < *dup_b name them (else both are -1): the caller
 * gives back what the command did and fails closed.  A master counted
 * toward the majority has answered, so it was identified.
 */
RconnOp *
redlock_run_identified(RedisConn **conns, int n, RedisCmd *cmd,
					   RconnCounts counts, void *arg, int *dup_a, int *dup_b)
{
	RconnOp    *ops = palloc0(n * sizeof(RconnOp));
	RedisCmd   *pairs = palloc(n * 2 * sizeof(RedisCmd));
	bool		asked[REDLOCK_MAX_MASTERS];
	IdentifiedCount ic = {ops, asked, cmd, counts, arg};

	check_generation();
	*dup_a = *dup_b = -1;
	for (int i = 0; i < n; i++)
	{
		RedisConn  *conn = conns[i];

		asked[i] = !rconn_reusable(conn) ||
			rconn_incarnation(conn) != identified_incarnation[i];
		ops[i].conn = conn;
		ops[i].cmds = cmd;
		ops[i].ncmds = 1;
		if (asked[i])
		{
			rcmd_init(&pairs[2 * i]);
			rcmd_str(&pairs[2 * i], "INFO");
			rcmd_str(&pairs[2 * i], "server");
			pairs[2 * i + 1] = *cmd;
			ops[i].cmds = &pairs[2 * i];
			ops[i].ncmds = 2;
		}
	}
	rconn_run_quorum(ops, n, redlock_quorum(n), identified_counts, &ic);
	for (int i = 0; i < n; i++)
	{
		RReply	   *info;
		const char *p;

		if (!asked[i] || !ops[i].ok)
			continue;
		info = ops[i].replies[0];
		ops[i].replies++;		/* the caller's command's reply first */
		ops[i].cmds = cmd;
		ops[i].ncmds = 1;
		identified_incarnation[i] = rconn_incarnation(conns[i]);
		run_ids[i][0] = '\0';
		if (info->type != RREPLY_STRING ||
			(p = strstr(info->str, "run_id:")) == NULL)
			continue;			/* not told (ACL): not compared */
		p += 7;
		if (strspn(p, "0123456789abcdefABCDEF") == RUN_ID_LEN)
		{
			memcpy(run_ids[i], p, RUN_ID_LEN);
			run_ids[i][RUN_ID_LEN] = '\0';
		}
	}
	for (int i = 0; i < n && *dup_a < 0; i++)
	{
		if (run_ids[i][0] == '\0' ||
			identified_incarnation[i] != rconn_incarnation(conns[i]))
			continue;
		for (int j = 0; j < i; j++)
		{
			if (run_ids[j][0] != '\0' &&
				identified_incarnation[j] == rconn_incarnation(conns[j]) &&
				strcmp(run_ids[i], run_ids[j]) == 0)
			{
				*dup_a = j;
				*dup_b = i;
				break;
			}
		}
	}
	return ops;
}

/*
 * Did conn's last round trip fail without a word from its server (no
 * answer in time, the connection broke)?  Such a master may be alive, and
 * may yet grant: it is not counted as refusing the connection.
 */
bool
redlock_failed_silently(RedisConn *conn)
{
	RconnFailure f = rconn_failure(conn);

	return f == RF_TIMEOUT || f == RF_CONNECT_TIMEOUT || f == RF_LOST;
}
