/*-------------------------------------------------------------------------
 *
 * cluster_route.c
 *	  Round trips on a Cluster's routed connection: each command sent to
 *	  the master of its key's slot, every node's commands at once, and the
 *	  cluster's redirections followed.
 *
 * route_run on the routed connection (cluster_map.c learns the slot map,
 * cluster.c answers from it) cuts
 * the commands into units: a command with a key, and the commands without
 * one that follow it (WAIT after an acquisition must run on the same
 * connection).  Each round sends every pending unit to its node, pipelined
 * per node, all nodes in parallel (rconn_run_parallel), and takes the
 * answers:
 *
 *	MOVED		the slot lives elsewhere for good: the map takes the new owner
 *				(and is read again before the next round); the unit is sent
 *				again there.
 *	ASK			the slot is being migrated and the key is on the target: the
 *				unit is sent there once, behind ASKING; the map is unchanged.
 *	TRYAGAIN, CLUSTERDOWN, LOADING
 *				sent again after a pause, until rlock.command_timeout.
 *	a node that cannot be reached before the commands went out
 *				(refused, timed out connecting): the map is read again and
 *				the unit goes where it says, until rlock.command_timeout.
 *	a node that failed after they went out
 *				not sent again in this call (it may have run there): the call
 *				fails, and the map is read again before the next one.
 *
 * A unit redirected more than MAX_REDIRECTS times is an ERROR, never a
 * loop.  Replies are copied into the routed connection's reply context, in
 * the order of the commands; when a node failed and the caller accepts a
 * failure (elevel < ERROR) they are still handed back, NULL for the
 * commands that got none, so that the watchdog keeps what the other nodes
 * answered.
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

#include "route/route.h"
#include "route/route_int.h"
#include "redis/redis.h"
#include "base/base.h"

#define MAX_REDIRECTS		5
/* Pause before retrying TRYAGAIN, CLUSTERDOWN, LOADING or an unreachable node. */
#define RETRY_PAUSE_MS		50

/* Round trips of the last routed route_run (parallel ones count once). */
static int	last_rounds = 0;

/* A script's key count, read within its length (not a C string); else 0. */
static int
script_nkeys(const RedisCmd *cmd)
{
	int			n = 0;

	for (size_t i = 0; i < cmd->argvlen[2] && i < 9; i++)
	{
		if (cmd->argv[2][i] < '0' || cmd->argv[2][i] > '9')
			return 0;
		n = n * 10 + (cmd->argv[2][i] - '0');
	}
	return cmd->argvlen[2] <= 9 ? n : 0;
}

/* The key a command is routed by, or NULL for a command without one. */
static bool
command_key(const RedisCmd *cmd, const char **key, size_t *len)
{
	const char *verb = cmd->argv[0];

	if (cmd->argc < 2)
		return false;
	if (pg_strcasecmp(verb, "EVALSHA") == 0 || pg_strcasecmp(verb, "EVAL") == 0)
	{
		if (cmd->argc < 4 || script_nkeys(cmd) <= 0)
			return false;
		*key = cmd->argv[3];
		*len = cmd->argvlen[3];
		return true;
	}
	if (pg_strcasecmp(verb, "WAIT") == 0 || pg_strcasecmp(verb, "PING") == 0 ||
		pg_strcasecmp(verb, "ROLE") == 0 || pg_strcasecmp(verb, "INFO") == 0 ||
		pg_strcasecmp(verb, "CLUSTER") == 0 || pg_strcasecmp(verb, "COMMAND") == 0)
		return false;
	*key = cmd->argv[1];
	*len = cmd->argvlen[1];
	return true;
}

/* Where one command (and the keyless ones behind it) goes next. */
typedef struct Unit
{
	int			first;			/* its first command */
	int			ncmds;			/* it and the keyless commands behind it */
	int			slot;			/* -1: no key (any node) */
	int			node;			/* where it goes this round */
	bool		asking;			/* ASK: send ASKING in front */
	bool		pending;
	int			redirects;
} Unit;

static bool
is_retry_later(const RReply *r)
{
	return r->type == RREPLY_ERROR &&
		(strncmp(r->str, "TRYAGAIN", 8) == 0 ||
		 strncmp(r->str, "CLUSTERDOWN", 11) == 0 ||
		 strncmp(r->str, "LOADING", 7) == 0);
}

/*
 * Do all pending units go to one node (its index in *node) without ASKING,
 * all units being pending?  The first round of nearly every call.
 */
static bool
single_node(Unit *units, int nunits, int *node)
{
	*node = -1;
	for (int u = 0; u < nunits; u++)
	{
		int			owner;

		if (!units[u].pending || units[u].asking)
			return false;
		owner = cluster_owner(units[u].slot >= 0 ? units[u].slot : 0);
		if (owner < 0 || (*node >= 0 && owner != *node))
			return false;
		*node = owner;
	}
	return *node >= 0;
}

/* Did any unit's reply ask for another try (a redirection, TRYAGAIN...)? */
static bool
any_redirected(RReply **replies, Unit *units, int nunits)
{
	for (int u = 0; u < nunits; u++)
	{
		const RReply *lead = replies[units[u].first];

		if (lead->type == RREPLY_ERROR &&
			(strncmp(lead->str, "MOVED ", 6) == 0 ||
			 strncmp(lead->str, "ASK ", 4) == 0 || is_retry_later(lead)))
			return true;
	}
	return false;
}

/* Deep copy of a reply into cxt. */
static RReply *
copy_reply(const RReply *r, MemoryContext cxt)
{
	RReply	   *c = MemoryContextAlloc(cxt, sizeof(RReply));

	*c = *r;
	if (r->str != NULL)
	{
		c->str = MemoryContextAlloc(cxt, r->len + 1);
		memcpy(c->str, r->str, r->len);
		c->str[r->len] = '\0';
	}
	if (r->type == RREPLY_ARRAY && r->elements > 0)
	{
		c->element = MemoryContextAlloc(cxt, r->elements * sizeof(RReply *));
		for (size_t i = 0; i < r->elements; i++)
			c->element[i] = copy_reply(r->element[i], cxt);
	}
	return c;
}


/* Did a failure happen before the commands could have reached the node? */
static bool
failed_before_sending(RconnFailure f)
{
	return f == RF_CONNECT || f == RF_CONNECT_TIMEOUT || f == RF_RESOLVE ||
		f == RF_NOFD;
}

/* A pause before trying a node again; interruptible. */
static void
pause_before_retry(void)
{
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 RETRY_PAUSE_MS, RLOCK_WAIT_EVENT);
	ResetLatch(MyLatch);
	if (!rconn_uninterruptible())
		CHECK_FOR_INTERRUPTS();
}

/* One routed round trip in the making: the call's state, kept across rounds. */
typedef struct ClusterCall
{
	RedisConn  *conn;			/* the routed connection */
	RedisCmd   *cmds;
	int			ncmds;
	RReply	  **out;			/* the replies, in conn's reply context */
	Unit	   *units;
	int			nunits;
	TimestampTz deadline;
	bool		ok;
	RedisConn  *failed;			/* whose failure the call reports */
} ClusterCall;

/* One round of it: each node's pipeline. */
typedef struct ClusterRound
{
	int		   *opof;			/* node index -> its op, or -1 */
	RconnOp    *ops;
	RedisCmd  **opcmds;
	int		  **opunits;		/* each op's units, in pipeline order */
	int		   *opn;
	int			nops;
	int			npending;
	bool		direct;			/* ops[0] is the caller's commands as they are */
	bool		retry_later;
	bool		unreachable;
} ClusterRound;

/* Cut the commands into units: a command with a key and the keyless ones behind it. */
static void
split_units(ClusterCall *call)
{
	call->units = palloc(Max(call->ncmds, 1) * sizeof(Unit));
	call->nunits = 0;
	for (int i = 0; i < call->ncmds; i++)
	{
		const char *key;
		size_t		len;
		Unit	   *un = &call->units[call->nunits];

		if (command_key(&call->cmds[i], &key, &len))
			un->slot = cluster_slot_of(key, len);
		else if (call->nunits > 0)
		{
			call->units[call->nunits - 1].ncmds++;
			continue;
		}
		else
			un->slot = -1;
		un->first = i;
		un->ncmds = 1;
		un->asking = false;
		un->pending = true;
		un->redirects = 0;
		call->nunits++;
	}
}

/* A unit that fails the call: the call reports why. */
static void
fail_unit(ClusterCall *call, Unit *un, RconnFailure f, char *detail)
{
	rconn_set_failure(call->conn, f, detail);
	un->pending = false;
	call->ok = false;
	call->failed = call->conn;
}

/*
 * Plan a round: each pending unit to the node that serves its slot now (or
 * the one an ASK named), one pipeline per node.  A slot nobody serves is
 * retried later, until the deadline.
 */
static void
plan_round(ClusterCall *call, ClusterRound *r)
{
	Unit	   *units = call->units;
	int			nunits = call->nunits;
	int			nnodes;
	int			o1;

	memset(r, 0, sizeof(*r));
	cluster_refresh_if_stale(call->conn);
	nnodes = cluster_nnodes();
	r->opof = palloc(nnodes * sizeof(int) + sizeof(int));
	for (int k = 0; k < nnodes; k++)
		r->opof[k] = -1;
	r->ops = palloc0(Max(nunits, 1) * sizeof(RconnOp));
	r->opcmds = palloc(Max(nunits, 1) * sizeof(RedisCmd *));
	r->opunits = palloc(Max(nunits, 1) * sizeof(int *));
	r->opn = palloc0(Max(nunits, 1) * sizeof(int));

	/*
	 * The common case, a lock's commands all for one node that owns its
	 * slot: that node's pipeline is the caller's commands as they are.
	 */
	if (single_node(units, nunits, &o1))
	{
		r->ops[0].conn = cluster_node(o1, RCONN_COMMANDS);
		rconn_inherit_bounds(r->ops[0].conn, call->conn);
		r->ops[0].cmds = call->cmds;
		r->ops[0].ncmds = call->ncmds;
		r->opunits[0] = palloc(nunits * sizeof(int));
		for (int u = 0; u < nunits; u++)
		{
			units[u].node = o1;
			r->opunits[0][u] = u;
		}
		r->opn[0] = nunits;
		r->nops = 1;
		r->npending = nunits;
		r->direct = true;
		return;
	}
	for (int u = 0; u < nunits; u++)
	{
		Unit	   *un = &units[u];
		int			o;

		if (!un->pending)
			continue;
		r->npending++;
		if (!un->asking)
		{
			int			s = un->slot >= 0 ? un->slot : 0;

			un->node = cluster_owner(s);
			if (un->node < 0)
			{
				/* nobody serves the slot now: a failover under way */
				if (GetCurrentTimestamp() >= call->deadline ||
					rconn_is_impatient(call->conn))
				{
					fail_unit(call, un, RF_CLUSTER,
							  psprintf("No node serves hash slot %d (the cluster is down).", s));
					r->npending--;
					continue;
				}
				cluster_map_stale();
				r->retry_later = true;
				continue;
			}
		}
		if (r->opof[un->node] < 0)
		{
			o = r->nops++;
			r->opof[un->node] = o;
			r->ops[o].conn = cluster_node(un->node, RCONN_COMMANDS);
			rconn_inherit_bounds(r->ops[o].conn, call->conn);
			r->opcmds[o] = palloc((call->ncmds * 2) * sizeof(RedisCmd));
			r->opunits[o] = palloc(nunits * sizeof(int));
			r->ops[o].ncmds = 0;
			r->ops[o].cmds = r->opcmds[o];
		}
		o = r->opof[un->node];
		r->opunits[o][r->opn[o]++] = u;
		if (un->asking)
		{
			rcmd_init(&r->opcmds[o][r->ops[o].ncmds]);
			rcmd_str(&r->opcmds[o][r->ops[o].ncmds], "ASKING");
			r->ops[o].ncmds++;
		}
		for (int c = 0; c < un->ncmds; c++)
			r->opcmds[o][r->ops[o].ncmds++] = call->cmds[un->first + c];
	}
}

/*
 * Take one answered unit's replies (from pos in its node's replies; returns
 * the position after them): a redirection is followed next round, TRYAGAIN
 * and its kin retried until the deadline, anything else is its answer.
 */
static int
take_unit(ClusterCall *call, ClusterRound *r, Unit *un, RReply **replies,
		  int pos)
{
	RReply	   *lead;

	if (un->asking)
		pos++;					/* ASKING's answer */
	lead = replies[pos];
	if (lead->type == RREPLY_ERROR &&
		(strncmp(lead->str, "MOVED ", 6) == 0 ||
		 strncmp(lead->str, "ASK ", 4) == 0))
	{
		bool		ask = lead->str[1] == 'S';
		ClusterRedirect to;
		int			slot;
		int			node;

		un->asking = false;
		if (!cluster_parse_redirect(lead->str, &to))
			fail_unit(call, un, RF_PROTOCOL,
					  psprintf("A redirection for hash slot %d makes no sense: %.200s",
							   un->slot, lead->str));
		else if (++un->redirects > MAX_REDIRECTS)
			fail_unit(call, un, RF_CLUSTER,
					  psprintf("Hash slot %d was redirected more than %d times (last: %s).",
							   un->slot, MAX_REDIRECTS, lead->str));
		else if (ask && cluster_redirect_target(lead->str, &slot, &node))
		{
			un->asking = true;
			un->node = node;
			stats_count(RLOCK_STAT_REDIRECTIONS);
		}
		else
			cluster_note_moved(lead->str);
		return pos + un->ncmds;
	}
	un->asking = false;
	if (is_retry_later(lead) && !rconn_is_impatient(call->conn) &&
		GetCurrentTimestamp() < call->deadline)
	{
		/*
		 * A slot split by a migration answers TRYAGAIN to a script over keys
		 * on both sides, and ASK again when asked anew: that is waiting,
		 * bounded by the deadline, not a redirection loop.
		 */
		un->redirects = 0;
		r->retry_later = true;
		return pos + un->ncmds;
	}
	for (int c = 0; c < un->ncmds; c++)
		call->out[un->first + c] = copy_reply(replies[pos + c],
											  rconn_reply_context(call->conn));
	un->pending = false;
	return pos + un->ncmds;
}

/*
 * Take a round's answers.  A node that could not be reached before our
 * commands were sent may have failed over: its units go where the map,
 * read again, says (until the deadline); any other failure fails them.
 */
static void
take_round(ClusterCall *call, ClusterRound *r)
{
	for (int o = 0; o < r->nops; o++)
	{
		int			pos = 0;

		if (!r->ops[o].ok)
		{
			RedisConn  *nc = r->ops[o].conn;

			/* it may have failed over: read the map again */
			cluster_map_stale();
			if (failed_before_sending(rconn_failure(nc)) &&
				!rconn_is_impatient(call->conn) &&
				GetCurrentTimestamp() < call->deadline)
			{
				r->unreachable = true;
				for (int k = 0; k < r->opn[o]; k++)
					call->units[r->opunits[o][k]].asking = false;
				continue;		/* retried where the new map says */
			}
			for (int k = 0; k < r->opn[o]; k++)
				call->units[r->opunits[o][k]].pending = false;
			call->ok = false;
			call->failed = nc;
			continue;
		}
		for (int k = 0; k < r->opn[o]; k++)
			pos = take_unit(call, r, &call->units[r->opunits[o][k]],
							r->ops[o].replies, pos);
	}
}

/* The deadline passed with units still pending: they fail the call. */
static void
give_up_pending(ClusterCall *call)
{
	for (int u = 0; u < call->nunits; u++)
		if (call->units[u].pending)
		{
			call->units[u].pending = false;
			call->ok = false;
			if (call->failed == NULL)
			{
				rconn_set_failure(call->conn, RF_CLUSTER,
								  psprintf("Hash slot %d could not be served within rlock.command_timeout (%d ms).",
										   call->units[u].slot, rconn_command_timeout_ms()));
				call->failed = call->conn;
			}
		}
}

/*
 * route_run on a routed connection.  On failure (reported at elevel), when
 * elevel < ERROR, *replies still holds the replies that arrived, NULL for
 * the commands whose node failed.
 */
bool
cluster_run(RedisConn *conn, RedisCmd *cmds, int ncmds, RReply ***replies,
			int elevel, const char *what)
{
	ClusterCall call = {.conn = conn,.cmds = cmds,.ncmds = ncmds,.ok = true};

	MemoryContextReset(rconn_reply_context(conn));
	call.out = MemoryContextAllocZero(rconn_reply_context(conn),
									  Max(ncmds, 1) * sizeof(RReply *));
	*replies = call.out;
	last_rounds = 0;
	if (!cluster_ensure(conn))
	{
		rconn_report(conn, elevel, what);
		return false;
	}
	/* within the caller's cap (the watchdog: the first fail-closed moment) */
	call.deadline = rconn_round_trip_deadline(conn, rconn_command_timeout_ms());
	split_units(&call);

	for (;;)
	{
		ClusterRound r;

		plan_round(&call, &r);
		if (r.npending == 0)
			break;
		if (r.nops > 0)
		{
			rconn_run_parallel(r.ops, r.nops);
			last_rounds++;
		}
		/* one node answered everything, no redirection: its replies as are */
		if (r.direct && r.ops[0].ok &&
			!any_redirected(r.ops[0].replies, call.units, call.nunits))
		{
			*replies = r.ops[0].replies;
			pfree(call.units);
			return true;
		}
		take_round(&call, &r);
		pfree(r.opof);
		pfree(r.ops);
		if (r.retry_later || r.unreachable)
		{
			if (GetCurrentTimestamp() >= call.deadline)
			{
				give_up_pending(&call);
				break;
			}
			pause_before_retry();
		}
	}
	pfree(call.units);
	if (call.ok)
		return true;
	if (call.failed != conn)
		rconn_adopt_failure(conn, call.failed);
	rconn_report(conn, elevel, what);
	return false;
}

/* Round trips the last routed route_run took (parallel ones count once). */
int
route_last_rounds(void)
{
	return route_is_cluster() ? last_rounds : 1;
}

/*
 * Connect now to the node that serves key (ERROR on failure), so that an
 * acquisition can tell "Redis never saw the command" apart from "the
 * command may have run", as rconn_ready does for one node (route_ready_for
 * on a routed connection).  A node that cannot be reached makes us read
 * the map again and try where it says, a pause apart, until
 * rlock.command_timeout: a failover in progress.
 */
void
cluster_ready_for(RedisConn *conn, const char *key, const char *what)
{
	TimestampTz deadline;

	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
										   rconn_command_timeout_ms());
	for (;;)
	{
		RedisConn  *node = cluster_conn_for(conn, key, strlen(key),
											RCONN_COMMANDS);

		if (node != NULL && rconn_ensure(node))
			return;
		if (node != NULL)
			rconn_adopt_failure(conn, node);
		cluster_map_stale();
		/* only what a failover explains is worth waiting for */
		if (GetCurrentTimestamp() >= deadline ||
			(!cluster_failover_explains(rconn_failure(conn)) &&
			 rconn_failure(conn) != RF_CLUSTER) ||
			cluster_map_hopeless())
		{
			rconn_report(conn, ERROR, what);
			return;				/* not reached */
		}
		pause_before_retry();
		route_label_cluster(conn);
	}
}
