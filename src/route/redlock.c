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
 * not wait for the last masters once a majority granted (rconn_run_quorum),
 * unless it does not know yet which server one of them is.  A master that
 * has been silent since a round trip timed out (stopped, a stalled link)
 * costs that once: later round trips wait for it only a short grace once
 * the others are done (RconnOp.optional), so a stopped minority does not
 * slow every call by rlock.command_timeout nor keep short leases out; its
 * answer counts again once it is heard.  The other processes of this
 * server are told (redlock_silence.c): a new backend does not pay the
 * timeout again.
 *
 * Each master must count once toward the majority: the setting's check
 * hook refuses a server named twice where it can tell, and the pool asks,
 * in front of the first commands on each socket of a master's connection,
 * which server answers there (its run_id, rconn_identify).  An answer
 * counts only from a master whose server is known on the socket that
 * answered and is no earlier master's, so that two names no setting could
 * tell apart (a TCP port and a Unix socket of one server), or a name that
 * comes to lead to another master's server (seen when a round trip is
 * retried on a fresh connection), fail closed.
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
 * Masters whose server did not tell its run_id on the last socket that was
 * asked (an ACL refusing INFO), remembered across sockets: a refusal must
 * not depend on whether this round trip's socket was asked yet.
 */
static bool master_untold[REDLOCK_MAX_MASTERS];

/* The setting's generation these were looked up for. */
static uint64 masters_generation = 0;

/* After a change of the setting, the connections anew. */
static void
check_generation(void)
{
	if (masters_generation == redlock_conf_generation())
		return;
	master_conns_valid = false;
	memset(master_untold, 0, sizeof(master_untold));
	masters_generation = redlock_conf_generation();
}

/* Look the masters' command connections up, if the setting changed. */
static void
look_up_masters(void)
{
	check_generation();
	if (!master_conns_valid)
	{
		for (int i = 0; i < redlock_num_masters(); i++)
		{
			master_conns[i] = rconn_get(redlock_master_url(i),
										RCONN_COMMANDS);
			/* who answers: the server's run_id, on each socket */
			rconn_identify(master_conns[i]);
		}
		master_conns_valid = true;
	}
}

/* The command connections of the masters, in conns (REDLOCK_MAX_MASTERS). */
int
redlock_masters(RedisConn **conns, const char *name)
{
	redlock_require_configured(name);
	look_up_masters();
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

/*
 * Which master of the setting conn is the command connection of; -1 when
 * none is (the setting changed since conn was looked up).
 */
static int
master_index(RedisConn *conn)
{
	for (int k = 0; k < redlock_num_masters(); k++)
		if (master_conns[k] == conn)
			return k;
	return -1;
}

/* Has conn's server told its run_id on the socket it has now? */
static bool
told(RedisConn *conn)
{
	const char *id = rconn_run_id(conn);

	return id != NULL && id[0] != '\0';
}

/*
 * A master before master "before" that is the same server as master k,
 * both known by their run_id on the sockets they have now; -1 if none.
 */
static int
twin_of(int k, int before)
{
	const char *id = rconn_run_id(master_conns[k]);

	if (id == NULL || id[0] == '\0')
		return -1;				/* not known, or not told: not compared */
	for (int j = 0; j < before; j++)
	{
		const char *other = rconn_run_id(master_conns[j]);

		if (j != k && other != NULL && strcmp(id, other) == 0)
			return j;
	}
	return -1;
}

/* What run_masters needs to count an answer during the round trip. */
typedef struct MasterCount
{
	RconnOp    *ops;
	const int  *master;
	RconnCounts counts;
	void	   *arg;
} MasterCount;

/*
 * Does op's answer count (rconn_run_quorum's counting)?  Only from a
 * master of the setting whose server told its run_id and is no other
 * master's (either twin: the one run_masters keeps is not known before
 * both are).
 */
static bool
master_counts(const RconnOp *op, void *arg)
{
	MasterCount *mc = arg;
	int			k = mc->master[op - mc->ops];

	if (k < 0 || !told(op->conn) || twin_of(k, redlock_num_masters()) >= 0)
		return false;
	return mc->counts(op, mc->arg);
}

/*
 * cmds on every master of conns at once (see route.h's redlock_run); with
 * counts, until a majority of conns counted.  A master whose server is not
 * known yet on its socket (the pool asks it in front of the first commands
 * on each socket) or is known to be another master's is waited for.  Then
 * an answer that may not count is set aside (ok false, late true: its
 * commands may have run there, as on a master not waited for): one from a
 * connection that is not a master's of the setting any more, or whose
 * server is not known, or from the same server as an earlier master
 * (*dup_a < *dup_b name the first such pair, else both are -1; dup_a and
 * dup_b may be NULL).
 */
static RconnOp *
run_masters(RedisConn **conns, int n, RedisCmd *cmds, int ncmds,
			RconnCounts counts, void *arg, TimestampTz cap,
			int *dup_a, int *dup_b)
{
	RconnOp    *ops = palloc0(n * sizeof(RconnOp));
	int			master[REDLOCK_MAX_MASTERS];
	MasterCount mc = {ops, master, counts, arg};

	Assert(n <= REDLOCK_MAX_MASTERS);
	if (dup_a != NULL)
		*dup_a = *dup_b = -1;
	look_up_masters();			/* (master_index: the setting's masters) */
	for (int i = 0; i < n; i++)
		master[i] = master_index(conns[i]);
	redlock_silence_apply(conns, master, n);	/* what the others found */
	for (int i = 0; i < n; i++)
	{
		ops[i].conn = conns[i];
		ops[i].cmds = cmds;
		ops[i].ncmds = ncmds;
		ops[i].awaited = master[i] >= 0 && !rconn_silent(conns[i]) &&
			(rconn_run_id(conns[i]) == NULL ||
			 twin_of(master[i], master[i]) >= 0);
		ops[i].optional = master[i] >= 0;
		rconn_set_deadline_cap(conns[i], cap);
	}
	if (counts != NULL)
		rconn_run_quorum(ops, n, redlock_quorum(n), master_counts, &mc);
	else
		rconn_run_parallel(ops, n);
	redlock_silence_record(conns, master, ops, n);
	for (int i = 0; i < n; i++)
	{
		int			k = master[i];
		int			j = -1;

		rconn_set_deadline_cap(conns[i], DT_NOEND);
		/* not told: it cannot be told apart, answered or not */
		if (k >= 0 && rconn_run_id(conns[i]) != NULL)
			master_untold[k] = !told(conns[i]);
		if (k >= 0 && master_untold[k] && dup_a != NULL && *dup_a < 0)
			*dup_a = *dup_b = k;
		if (!ops[i].ok)
			continue;
		if (k >= 0 && told(conns[i]) && (j = twin_of(k, k)) < 0)
			continue;			/* it counts */
		ops[i].ok = false;
		ops[i].late = true;
		if (j >= 0 && dup_a != NULL && *dup_a < 0)
		{
			*dup_a = j;
			*dup_b = k;
		}
	}
	return ops;
}

RconnOp *
redlock_run(RedisConn **conns, int n, RedisCmd *cmds, int ncmds,
			TimestampTz cap)
{
	return run_masters(conns, n, cmds, ncmds, NULL, NULL, cap, NULL, NULL);
}

RconnOp *
redlock_run_majority(RedisConn **conns, int n, RedisCmd *cmds, int ncmds,
					 RconnCounts counts, void *arg, int *dup_a, int *dup_b)
{
	return run_masters(conns, n, cmds, ncmds, counts, arg, DT_NOEND,
					   dup_a, dup_b);
}

/*
 * The ERROR of an acquisition whose masters redlock_run_majority found to
 * be one server (dup_a < dup_b), or one of which (dup_a == dup_b) did not
 * tell which server it is: one server must not count twice toward the
 * majority, and when that cannot be told, the acquisition fails closed.
 */
void
redlock_refuse_masters(RedisConn **conns, int dup_a, int dup_b,
					   const char *name)
{
	if (dup_a == dup_b)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("could not acquire Redlock \"%s\": master %d does not tell which Redis server it is",
						name, dup_a + 1),
				 errdetail("Master %d (%s) of rlock.redlock_urls did not give its server run_id (INFO server), so it cannot be told apart from the other masters; one server must not count twice toward the majority.",
						   dup_a + 1, rconn_address(conns[dup_a])),
				 errhint("Allow INFO to rlock's Redis user on that master (ACL SETUSER <user> +info).")));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("could not acquire Redlock \"%s\": two of its masters are one Redis server",
					name),
			 errdetail("Master %d (%s) and master %d (%s) of rlock.redlock_urls answer with the same server run_id; one server must not count twice toward the majority.",
					   dup_a + 1, rconn_address(conns[dup_a]),
					   dup_b + 1, rconn_address(conns[dup_b])),
			 errhint("Name each Redis master of rlock.redlock_urls once.")));
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
