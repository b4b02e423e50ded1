/*-------------------------------------------------------------------------
 *
 * cluster_map.c
 *	  A Redis Cluster's slot map, learned: which master serves each hash
 *	  slot, read from the cluster and kept current through resharding and
 *	  failover.
 *
 * The slot map is read with CLUSTER SLOTS (Redis 6.0 has no CLUSTER SHARDS)
 * from the first node that answers: the masters known now (those that just
 * failed last), then the URL's seeds; and read again after a MOVED answer
 * (the slot lives elsewhere for good), a node that cannot be reached (it may
 * have failed over), a sharded subscription the server dropped (the slot
 * moved), or a change of settings.  It is this backend's own (16 K slots of
 * two bytes); each process learns changes from the cluster's answers.
 * CLUSTER SLOTS is asked together with COMMAND INFO SPUBLISH, which tells
 * whether the cluster has sharded pub/sub (Redis 7).
 *
 * This file learns the map; cluster.c answers questions about it, and
 * cluster_route.c routes round trips by it.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "route/route.h"
#include "route/route_int.h"
#include "redis/redis.h"
#include "net/net.h"
#include "base/base.h"

static ClusterMap *map = NULL;

/*
 * The last reading of the map failed on answers that waiting will not mend:
 * every node answered, with an error that is not a passing state (not a
 * cluster node: "cluster support disabled") or a map that makes no sense.
 */
static bool map_hopeless = false;

/* ----------------------------------------------------------------
 * The map
 * ----------------------------------------------------------------
 */

/* This backend's map (emptied at a change of settings). */
ClusterMap *
cluster_map(void)
{
	if (map == NULL)
	{
		map = MemoryContextAllocZero(TopMemoryContext, sizeof(ClusterMap));
		memset(map->owner, -1, sizeof(map->owner));
	}
	if (map->generation != net_settings_generation)
	{
		map->valid = false;
		map->nnodes = 0;
		map->generation = net_settings_generation;
	}
	return map;
}

/* The index of host:port in m, added if new (-1 when the table is full). */
static int
node_index(ClusterMap *m, const char *host, int port)
{
	const RedisUrl *base = &rlock_redis_conf->url;
	ClusterNode *n;

	for (int i = 0; i < m->nnodes; i++)
		if (m->nodes[i].url.port == port && strcmp(m->nodes[i].url.host, host) == 0)
			return i;
	if (m->nnodes >= MAX_CLUSTER_NODES)
		return -1;
	if (m->nnodes >= m->maxnodes)
	{
		int			newmax = Max(8, m->maxnodes * 2);

		m->nodes = m->nodes ?
			repalloc(m->nodes, newmax * sizeof(ClusterNode)) :
			MemoryContextAlloc(TopMemoryContext, newmax * sizeof(ClusterNode));
		m->maxnodes = newmax;
	}
	n = &m->nodes[m->nnodes];
	memset(n, 0, sizeof(*n));
	n->url = *base;
	n->url.kind = NODE_DIRECT;
	n->url.db = 0;
	n->url.master_name[0] = '\0';
	strlcpy(n->url.host, host, sizeof(n->url.host));
	n->url.port = port;
	return m->nnodes++;
}

/* The connection (commands or subscriber) to node i of m. */
RedisConn *
cluster_map_conn(ClusterMap *m, int i, RconnRole role)
{
	ClusterNode *n = &m->nodes[i];
	RedisConn **slot = role == RCONN_COMMANDS ? &n->conn : &n->sub;

	if (*slot == NULL)
		*slot = rconn_get(&n->url, role);
	return *slot;
}

/*
 * Parse "MOVED 3999 127.0.0.1:6381" (or ASK): slot and node index.  False
 * for anything else, an address that makes no sense included.
 */
static bool
parse_redirect(ClusterMap *m, const char *err, int *slot, int *node)
{
	ClusterRedirect to;
	char		hostbuf[sizeof(((RedisUrl *) NULL)->host)];

	if (!cluster_parse_redirect(err, &to))
		return false;
	*slot = to.slot;
	if (to.unknown)
		return false;			/* an unknown endpoint: read the map again */
	memcpy(hostbuf, to.host, to.hostlen);
	hostbuf[to.hostlen] = '\0';
	*node = node_index(m, hostbuf, to.port);
	return *node >= 0;
}

/*
 * Take a CLUSTER SLOTS reply (asked of node asked) into m.  A map that
 * makes no sense (an entry cluster_bad_slot_range refuses, two ranges that
 * share a slot) is refused whole (*malformed set); one that serves no
 * slot, or an error (not a cluster node), is refused too.  why says why.
 */
static bool
take_slots(ClusterMap *m, int asked, const char *addr, RReply *r,
		   StringInfo why, bool *malformed)
{
	char		asked_host[sizeof(((RedisUrl *) NULL)->host)];
	int16	   *owner;
	int			covered = 0;

	*malformed = false;
	if (r->type != RREPLY_ARRAY)
	{
		*malformed = r->type != RREPLY_ERROR;
		appendStringInfo(why, "%s%s: %.200s", why->len ? "; " : "",
						 addr, r->type == RREPLY_ERROR ? r->str : "CLUSTER SLOTS did not answer an array");
		return false;
	}
	owner = palloc(sizeof(m->owner));
	memset(owner, -1, sizeof(m->owner));
	for (size_t i = 0; i < r->elements; i++)
	{
		const char *bad = cluster_bad_slot_range(r->element[i]);

		/* each slot in one range at most: no two owners for one slot */
		if (bad == NULL)
		{
			int			lo = (int) r->element[i]->element[0]->integer;
			int			hi = (int) r->element[i]->element[1]->integer;

			for (int s = lo; s <= hi && bad == NULL; s++)
			{
				if (owner[s] >= 0)
					bad = psprintf("slot ranges %d-%d and %d-%d overlap (slot %d)",
								   (int) r->element[owner[s]]->element[0]->integer,
								   (int) r->element[owner[s]]->element[1]->integer,
								   lo, hi, s);
				owner[s] = (int16) i;
			}
		}
		if (bad != NULL)
		{
			*malformed = true;
			appendStringInfo(why, "%s%s: its slot map makes no sense: %s",
							 why->len ? "; " : "", addr, bad);
			pfree(owner);
			return false;
		}
	}
	/* (node_index may move m->nodes: the asked node's host is copied) */
	strlcpy(asked_host, m->nodes[asked].url.host, sizeof(asked_host));
	memset(owner, -1, sizeof(m->owner));
	for (size_t i = 0; i < r->elements; i++)
	{
		RReply	   *e = r->element[i];
		RReply	   *master = e->element[2];
		const char *host = master->element[0]->str;
		int			idx;

		if (host[0] == '\0' || strcmp(host, "?") == 0)
			host = asked_host;
		idx = node_index(m, host, (int) master->element[1]->integer);
		if (idx < 0)
			continue;
		for (int s = (int) e->element[0]->integer;
			 s <= (int) e->element[1]->integer; s++)
		{
			if (owner[s] < 0)
				covered++;
			owner[s] = (int16) idx;
		}
	}
	if (covered == 0)
	{
		appendStringInfo(why, "%s%s: no slot is assigned to any node",
						 why->len ? "; " : "", addr);
		pfree(owner);
		return false;
	}
	memcpy(m->owner, owner, sizeof(m->owner));
	pfree(owner);
	return true;
}

/*
 * Could a node's failure be a failover (the node dead or stalled, for now)
 * rather than something that stays wrong (credentials, TLS, settings)?
 */
bool
cluster_failover_explains(RconnFailure f)
{
	return f == RF_CONNECT || f == RF_CONNECT_TIMEOUT || f == RF_TIMEOUT ||
		f == RF_LOST;
}

/*
 * Read the slot map from the first node that answers: the masters known
 * now, then the URL's seeds.  On failure conn (the routed connection)
 * says why.
 */
bool
cluster_map_load(RedisConn *conn)
{
	ClusterMap *m = cluster_map();
	const RedisUrlConf *conf = rlock_redis_conf;
	int			ncand = 0;
	int		   *cand;
	StringInfoData why;
	TimestampTz cap;
	RedisConn  *last = NULL;
	bool		same_failure = false;
	bool		last_bad_map = false;	/* the last node gave a bad map */
	bool		malformed;
	int			nbad_maps = 0;
	int			nmalformed = 0;
	int			nhopeless = 0;

	if (conf == NULL || conf->url.kind != NODE_CLUSTER)
	{
		rconn_set_failure(conn, RF_CONFIG, "rlock.redis_url does not name a Redis Cluster");
		return false;
	}
	map_hopeless = false;
	/* candidates: nodes that own slots now, then the seeds */
	cand = palloc((m->nnodes + conf->nhosts + 1) * sizeof(int));
	if (m->valid)
	{
		bool	   *seen = palloc0((m->nnodes + 1) * sizeof(bool));

		for (int s = 0; s < CLUSTER_SLOTS; s++)
			if (m->owner[s] >= 0 && !seen[m->owner[s]])
			{
				seen[m->owner[s]] = true;
				cand[ncand++] = m->owner[s];
			}
	}
	for (int i = 0; i < conf->nhosts; i++)
	{
		int			idx = node_index(m, conf->hosts[i].host, conf->hosts[i].port);
		bool		dup = false;

		for (int k = 0; k < ncand; k++)
			dup |= (cand[k] == idx);
		if (idx >= 0 && !dup)
			cand[ncand++] = idx;
	}

	/* nodes whose last round trip failed (dead, stopped) are asked last */
	for (int k = 0, good = 0; k < ncand; k++)
	{
		RedisConn  *c = m->nodes[cand[k]].conn;

		if (c == NULL || rconn_failure(c) == RF_NONE)
		{
			int			t = cand[k];

			memmove(&cand[good + 1], &cand[good], (k - good) * sizeof(int));
			cand[good++] = t;
		}
	}

	/*
	 * The whole reading waits no longer than one node's connect and answer
	 * may (within the routed connection's own cap): nodes that accept and
	 * never answer, however many a map names, cost that once.
	 */
	cap = rconn_round_trip_deadline(conn, rlock_connect_timeout_ms +
									rconn_command_timeout_ms());
	if (rconn_uninterruptible())
		cap = Min(cap, TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												   RLOCK_UNINTERRUPTIBLE_CAP_MS));
	initStringInfo(&why);
	for (int k = 0; k < ncand; k++)
	{
		RedisConn  *c = cluster_map_conn(m, cand[k], RCONN_COMMANDS);
		RedisCmd	cmds[2];
		RconnOp		op;

		if (k > 0 && GetCurrentTimestamp() >= cap)
		{
			appendStringInfo(&why, "%s%d more not asked within rlock.connect_timeout and rlock.command_timeout",
							 why.len ? "; " : "", ncand - k);
			last = NULL;
			break;
		}

		rcmd_init(&cmds[0]);
		rcmd_str(&cmds[0], "CLUSTER");
		rcmd_str(&cmds[0], "SLOTS");
		rcmd_init(&cmds[1]);
		rcmd_str(&cmds[1], "COMMAND");
		rcmd_str(&cmds[1], "INFO");
		rcmd_str(&cmds[1], "SPUBLISH");
		memset(&op, 0, sizeof(op));
		op.conn = c;
		op.cmds = cmds;
		op.ncmds = 2;
		rconn_set_deadline_cap(c, cap);
		rconn_run_parallel(&op, 1);
		rconn_set_deadline_cap(c, DT_NOEND);
		if (!op.ok)
			last_bad_map = false;
		if (!op.ok)
			same_failure = (last == NULL ||
							(same_failure &&
							 rconn_failure(last) == rconn_failure(c))) &&
				!cluster_failover_explains(rconn_failure(c));
		last = c;
		if (!op.ok)
		{
			const char *detail = rconn_failure_detail(c);
			RconnFailure f = rconn_failure(c);

			appendStringInfo(&why, "%s%s: %s", why.len ? "; " : "",
							 rconn_address(c), detail[0] ? detail :
							 f == RF_TIMEOUT || f == RF_CONNECT_TIMEOUT ?
							 "no answer in time" : "no answer");
			continue;
		}
		if (!take_slots(m, cand[k], rconn_address(c), op.replies[0], &why,
						&malformed))
		{
			RReply	   *r0 = op.replies[0];

			same_failure = false;
			last_bad_map = true;
			nmalformed += malformed;
			nbad_maps++;
			if (malformed ||
				(r0->type == RREPLY_ERROR && !rconn_reply_is(r0, "LOADING") &&
				 !rconn_reply_is(r0, "BUSY") &&
				 !rconn_reply_is(r0, "MASTERDOWN") &&
				 !rconn_reply_is(r0, "TRYAGAIN") &&
				 !rconn_reply_is(r0, "CLUSTERDOWN")))
				nhopeless++;
			continue;
		}
		last_bad_map = false;
		m->sharded = op.replies[1]->type == RREPLY_ARRAY &&
			op.replies[1]->elements == 1 &&
			op.replies[1]->element[0]->type == RREPLY_ARRAY;
		m->valid = true;
		m->stale = false;
		pfree(cand);
		return true;
	}
	pfree(cand);
	map_hopeless = ncand > 0 && nhopeless == ncand;
	if (last != NULL && same_failure)
	{
		/* every node failed alike (a wrong password...): say that */
		rconn_adopt_failure(conn, last);
		return false;
	}
	if (ncand == 1 && last != NULL && !last_bad_map)
	{
		/* one seed: its own failure says it best (refused, TLS, AUTH...) */
		rconn_adopt_failure(conn, last);
		return false;
	}
	/* only maps that make no sense: the servers broke the protocol */
	rconn_set_failure(conn,
					  nbad_maps > 0 && nmalformed == nbad_maps &&
					  nbad_maps == ncand ? RF_PROTOCOL : RF_CLUSTER,
					  psprintf("No node of the cluster gave its slot map: %s.",
							   why.len ? why.data : "no node to ask"));
	return false;
}

/* Make sure the slot map is known and current (reading it if not). */
bool
cluster_ensure(RedisConn *conn)
{
	ClusterMap *m = cluster_map();

	if (m->valid && !m->stale)
		return true;
	return cluster_map_load(conn);
}

/* A reply said MOVED: take the slot's new owner; read the whole map later. */
void
cluster_note_moved(const char *err)
{
	ClusterMap *m = cluster_map();
	int			slot;
	int			node;

	m->stale = true;
	if (parse_redirect(m, err, &slot, &node))
		m->owner[slot] = (int16) node;
	stats_count(RLOCK_STAT_REDIRECTIONS);
}

/* The node a MOVED or ASK answer names (added to the table if new). */
bool
cluster_redirect_target(const char *err, int *slot, int *node)
{
	return parse_redirect(cluster_map(), err, slot, node);
}

/*
 * Read the map again if it was found stale; when no node answers, keep the
 * one we have (MOVED answers and failures correct it).
 */
void
cluster_refresh_if_stale(RedisConn *conn)
{
	ClusterMap *m = cluster_map();

	if (m->valid && m->stale && !cluster_map_load(conn))
		m->stale = false;
}

/* Read the map again before the next routed round trip. */
void
cluster_map_stale(void)
{
	if (map != NULL)
		map->stale = true;
}

/* Did the last reading of the map fail on answers waiting will not mend? */
bool
cluster_map_hopeless(void)
{
	return map_hopeless;
}

/* Does the cluster have sharded pub/sub (SPUBLISH)?  Learned with the map. */
bool
cluster_sharded(void)
{
	return map != NULL && map->valid && map->sharded;
}
