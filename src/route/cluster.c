/*-------------------------------------------------------------------------
 *
 * cluster.c
 *	  Redis Cluster (redis-cluster:// URLs): hash slots, and the slot map
 *	  that says which master serves each, kept current through resharding
 *	  and failover.
 *
 * A Cluster deployment gives the layers above one connection, as any other
 * deployment does: a "routed" connection (node kind NODE_CLUSTER) that
 * never has a socket of its own.  A round trip on it (rconn_run) sends each
 * command to the master of its key's hash slot (CRC16 of the {hash tag},
 * PROTOCOL.md: every key and channel of one lock shares a slot), all nodes
 * at once: cluster_route.c.  Scripts over many locks (renewals, the check
 * before COMMIT) are cut per slot by their builders (rconn_slot_groups), so
 * that no script call spans two slots (CROSSSLOT).
 *
 * The slot map is read with CLUSTER SLOTS (Redis 6.0 has no CLUSTER SHARDS)
 * from the first node that answers: the masters known now (those that just
 * failed last), then the URL's seeds; and read again after a MOVED answer
 * (the slot lives elsewhere for good), a node that cannot be reached (it may
 * have failed over), a sharded subscription the server dropped (the slot
 * moved), or a change of settings.  It is this backend's own (16 K slots of
 * two bytes); each process learns changes from the cluster's answers.
 *
 * Waiters subscribe on the subscriber connection of their channel's node
 * (SSUBSCRIBE when releases are published with SPUBLISH: rlock.publish_mode,
 * connection_pubsub.c); CLUSTER SLOTS is asked together with COMMAND INFO
 * SPUBLISH, which tells whether the cluster has sharded pub/sub (Redis 7).
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "redis/redis.h"
#include "redis/redis_int.h"
#include "base/base.h"

#define CLUSTER_SLOTS		16384
#define MAX_CLUSTER_NODES	256

typedef struct ClusterNode
{
	RedisUrl	url;
	RedisConn  *conn;			/* commands connection, once asked for */
	RedisConn  *sub;			/* subscriber connection, once asked for */
} ClusterNode;

typedef struct ClusterMap
{
	uint64		generation;		/* net_settings_generation when read */
	bool		valid;
	bool		stale;			/* read it again before the next round trip */
	bool		sharded;		/* the cluster knows SPUBLISH */
	int			nnodes;
	int			maxnodes;
	ClusterNode *nodes;			/* grown as nodes are learned */
	int16		owner[CLUSTER_SLOTS];	/* index in nodes, -1 none */
} ClusterMap;

static ClusterMap *map = NULL;

/*
 * The last reading of the map failed on answers that waiting will not mend:
 * every node answered, with an error that is not a passing state (not a
 * cluster node: "cluster support disabled") or a map that makes no sense.
 */
static bool map_hopeless = false;


/* ----------------------------------------------------------------
 * Hash slots
 * ----------------------------------------------------------------
 */

/* CRC16-CCITT (XMODEM), as the Redis Cluster specification computes it. */
static uint16
crc16(const char *buf, size_t len)
{
	uint16		crc = 0;

	for (size_t i = 0; i < len; i++)
	{
		crc ^= (uint16) ((unsigned char) buf[i]) << 8;
		for (int b = 0; b < 8; b++)
			crc = (crc & 0x8000) ? (uint16) ((crc << 1) ^ 0x1021) : (uint16) (crc << 1);
	}
	return crc;
}

/* The slot of a key: of its {hash tag} when it has a non-empty one. */
static int
key_slot(const char *key, size_t len)
{
	const char *open = memchr(key, '{', len);

	if (open != NULL)
	{
		const char *close = memchr(open + 1, '}', len - (open + 1 - key));

		if (close != NULL && close > open + 1)
			return crc16(open + 1, close - open - 1) % CLUSTER_SLOTS;
	}
	return crc16(key, len) % CLUSTER_SLOTS;
}

bool
rconn_is_cluster(void)
{
	return rlock_redis_conf != NULL && rlock_redis_conf->url.kind == NODE_CLUSTER;
}

/* The slot of key in a Cluster deployment; -1 elsewhere (one node has all). */
int
rconn_key_slot(const char *key)
{
	if (!rconn_is_cluster())
		return -1;
	return key_slot(key, strlen(key));
}

/*
 * Group n keys so that the keys of one group may go into one script call
 * (one hash slot, at most maxper keys): order[] receives the keys' indexes
 * group after group, starts[g] the position in order[] where group g
 * begins (starts[ngroups] = n).  Returns the number of groups.  Outside a
 * Cluster the keys keep their order and are cut into chunks of maxper.
 */
int
rconn_slot_groups(const char *const *keys, int n, int maxper, int *order,
				  int *starts)
{
	int			ngroups = 0;
	int		   *slots;

	if (n == 0)
	{
		starts[0] = 0;
		return 0;
	}
	slots = palloc(n * sizeof(int));
	for (int i = 0; i < n; i++)
	{
		order[i] = i;
		slots[i] = rconn_key_slot(keys[i]);
	}
	if (rconn_is_cluster())
	{
		/* insertion sort would be quadratic for 10 000 locks: counting sort */
		int		   *count = palloc0((CLUSTER_SLOTS + 1) * sizeof(int));

		for (int i = 0; i < n; i++)
			count[slots[i] + 1]++;
		for (int s = 0; s < CLUSTER_SLOTS; s++)
			count[s + 1] += count[s];
		for (int i = 0; i < n; i++)
			order[count[slots[i]]++] = i;
		pfree(count);
	}
	for (int i = 0; i < n; i++)
	{
		if (i == 0 || slots[order[i]] != slots[order[i - 1]] ||
			i - starts[ngroups - 1] >= maxper)
			starts[ngroups++] = i;
	}
	starts[ngroups] = n;
	pfree(slots);
	return ngroups;
}

/* ----------------------------------------------------------------
 * The map
 * ----------------------------------------------------------------
 */

static ClusterMap *
get_map(void)
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

static RedisConn *
node_conn(ClusterMap *m, int i, RconnRole role)
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
 * makes no sense is refused whole (*malformed set); one that serves no
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
	for (size_t i = 0; i < r->elements; i++)
	{
		const char *bad = cluster_bad_slot_range(r->element[i]);

		if (bad != NULL)
		{
			*malformed = true;
			appendStringInfo(why, "%s%s: its slot map makes no sense: %s",
							 why->len ? "; " : "", addr, bad);
			return false;
		}
	}
	/* (node_index may move m->nodes: the asked node's host is copied) */
	strlcpy(asked_host, m->nodes[asked].url.host, sizeof(asked_host));
	owner = palloc(sizeof(m->owner));
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
static bool
failover_explains(RconnFailure f)
{
	return f == RF_CONNECT || f == RF_CONNECT_TIMEOUT || f == RF_TIMEOUT ||
		f == RF_LOST;
}

/*
 * Read the slot map from the first node that answers: the masters known
 * now, then the URL's seeds.  On failure conn (the routed connection)
 * says why.
 */
static bool
load_map(RedisConn *conn)
{
	ClusterMap *m = get_map();
	const RedisUrlConf *conf = rlock_redis_conf;
	int			ncand = 0;
	int		   *cand;
	StringInfoData why;
	TimestampTz cap = 0;
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

		if (c == NULL || c->failure == RF_NONE)
		{
			int			t = cand[k];

			memmove(&cand[good + 1], &cand[good], (k - good) * sizeof(int));
			cand[good++] = t;
		}
	}

	if (rconn_uninterruptible())
		cap = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
										  RLOCK_UNINTERRUPTIBLE_CAP_MS);
	initStringInfo(&why);
	for (int k = 0; k < ncand; k++)
	{
		RedisConn  *c = node_conn(m, cand[k], RCONN_COMMANDS);
		RedisCmd	cmds[2];
		RconnOp		op;

		rcmd_init(&cmds[0]);
		rcmd_str(&cmds[0], "CLUSTER");
		rcmd_str(&cmds[0], "SLOTS");
		rcmd_init(&cmds[1]);
		rcmd_str(&cmds[1], "COMMAND");
		rcmd_str(&cmds[1], "INFO");
		rcmd_str(&cmds[1], "SPUBLISH");
		op.conn = c;
		op.cmds = cmds;
		op.ncmds = 2;
		rconn_set_deadline_cap(c, cap != 0 ? cap : DT_NOEND);
		rconn_run_parallel(&op, 1);
		rconn_set_deadline_cap(c, DT_NOEND);
		if (!op.ok)
			last_bad_map = false;
		if (!op.ok)
			same_failure = (last == NULL || (same_failure &&
											 last->failure == c->failure)) &&
				!failover_explains(c->failure);
		last = c;
		if (!op.ok)
		{
			appendStringInfo(&why, "%s%s: %s", why.len ? "; " : "", c->addr,
							 c->errdetail[0] ? c->errdetail :
							 c->failure == RF_TIMEOUT || c->failure == RF_CONNECT_TIMEOUT ?
							 "no answer in time" : "no answer");
			continue;
		}
		if (!take_slots(m, cand[k], c->addr, op.replies[0], &why,
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
		rconn_set_failure(conn, last->failure, last->errdetail);
		strlcpy(conn->addr, last->addr, sizeof(conn->addr));
		return false;
	}
	if (ncand == 1 && last != NULL && !last_bad_map)
	{
		/* one seed: its own failure says it best (refused, TLS, AUTH...) */
		rconn_set_failure(conn, last->failure, last->errdetail);
		strlcpy(conn->addr, last->addr, sizeof(conn->addr));
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
	ClusterMap *m = get_map();

	if (m->valid && !m->stale)
		return true;
	return load_map(conn);
}

/* Does the cluster have sharded pub/sub (SPUBLISH)?  Learned with the map. */
bool
cluster_sharded(void)
{
	return map != NULL && map->valid && map->sharded;
}

/*
 * The connection (commands or subscriber) to the master of key's slot;
 * NULL when the map cannot be read (conn, the routed one, says why).
 */
RedisConn *
cluster_conn_for(RedisConn *conn, const char *key, size_t len, RconnRole role)
{
	ClusterMap *m = get_map();
	int			slot = key_slot(key, len);

	if (!cluster_ensure(conn))
		return NULL;
	if (m->owner[slot] < 0 && !load_map(conn))
		return NULL;
	if (m->owner[slot] < 0)
	{
		rconn_set_failure(conn, RF_CLUSTER,
						  psprintf("No node serves hash slot %d (the cluster is down).", slot));
		return NULL;
	}
	return node_conn(m, m->owner[slot], role);
}

/* A reply said MOVED: take the slot's new owner; read the whole map later. */
void
cluster_note_moved(const char *err)
{
	ClusterMap *m = get_map();
	int			slot;
	int			node;

	m->stale = true;
	if (parse_redirect(m, err, &slot, &node))
		m->owner[slot] = (int16) node;
	stats_count(RLOCK_STAT_REDIRECTIONS);
}

/* The masters that own slots now (indexes into the map), for rlock_nodes. */
int
cluster_masters(RedisConn *conn, RedisConn ***conns)
{
	ClusterMap *m = get_map();
	bool	   *seen;
	int			n = 0;

	if (!cluster_ensure(conn))
		rconn_report(conn, ERROR, NULL);
	seen = palloc0((m->nnodes + 1) * sizeof(bool));
	*conns = palloc((m->nnodes + 1) * sizeof(RedisConn *));
	for (int s = 0; s < CLUSTER_SLOTS; s++)
		if (m->owner[s] >= 0 && !seen[m->owner[s]])
		{
			seen[m->owner[s]] = true;
			(*conns)[n++] = node_conn(m, m->owner[s], RCONN_COMMANDS);
		}
	return n;
}

/* ----------------------------------------------------------------
 * The map, for cluster_route.c
 * ----------------------------------------------------------------
 */

int
cluster_slot_of(const char *key, size_t len)
{
	return key_slot(key, len);
}

/* The node that owns slot (an index for cluster_node), -1 when none. */
int
cluster_owner(int slot)
{
	ClusterMap *m = get_map();

	return m->valid ? m->owner[slot] : -1;
}

int
cluster_nnodes(void)
{
	return get_map()->nnodes;
}

RedisConn *
cluster_node(int idx, RconnRole role)
{
	return node_conn(get_map(), idx, role);
}

/* The node a MOVED or ASK answer names (added to the table if new). */
bool
cluster_redirect_target(const char *err, int *slot, int *node)
{
	return parse_redirect(get_map(), err, slot, node);
}

/*
 * Read the map again if it was found stale; when no node answers, keep the
 * one we have (MOVED answers and failures correct it).
 */
void
cluster_refresh_if_stale(RedisConn *conn)
{
	ClusterMap *m = get_map();

	if (m->valid && m->stale && !load_map(conn))
		m->stale = false;
}

/* ----------------------------------------------------------------
 * For the rest of the connection layer and introspection
 * ----------------------------------------------------------------
 */

/* The routed connection's name in messages: the URL's seeds. */
void
rconn_set_cluster_address(RedisConn *conn)
{
	const RedisUrlConf *conf = rlock_redis_conf;
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "cluster ");
	for (int i = 0; conf != NULL && i < conf->nhosts; i++)
		appendStringInfo(&buf, strchr(conf->hosts[i].host, ':') ? "%s[%s]:%d" : "%s%s:%d",
						 i > 0 ? "," : "", conf->hosts[i].host, conf->hosts[i].port);
	strlcpy(conn->addr, buf.data, sizeof(conn->addr));
	pfree(buf.data);
}

/* The commands connection of key's node if the map names one (no I/O). */
RedisConn *
cluster_known_conn(const char *key)
{
	ClusterMap *m = get_map();
	int			slot = key_slot(key, strlen(key));

	if (!m->valid || m->owner[slot] < 0)
		return NULL;
	return node_conn(m, m->owner[slot], RCONN_COMMANDS);
}

/*
 * host:port of the master of key's slot (palloc'd), reading the map if it
 * is not known yet; NULL when it cannot be read.
 */
char *
cluster_node_address(RedisConn *conn, const char *key)
{
	ClusterMap *m = get_map();
	int			slot = key_slot(key, strlen(key));

	if (!cluster_ensure(conn) || m->owner[slot] < 0)
		return NULL;
	return pstrdup(node_conn(m, m->owner[slot], RCONN_COMMANDS)->addr);
}

/* Read the map again before the next routed round trip. */
void
cluster_map_stale(void)
{
	if (map != NULL)
		map->stale = true;
}

/*
 * Are releases published with SPUBLISH (and waited for with SSUBSCRIBE)?
 * rlock.publish_mode; "auto" means: on a Cluster that has sharded pub/sub
 * (Redisson's default), read from the map (read now if need be).
 */
bool
rconn_sharded_publish(void)
{
	switch (rlock_publish_mode)
	{
		case RLOCK_PUBLISH_SHARDED:
			return true;
		case RLOCK_PUBLISH_PLAIN:
			return false;
		default:
			if (!rconn_is_cluster())
				return false;
			(void) cluster_ensure(rconn_backend());
			return cluster_sharded();
	}
}

/* The commands connections of the masters that own slots now. */
int
rconn_cluster_masters(RedisConn ***conns)
{
	return cluster_masters(rconn_backend(), conns);
}

/* host:port of the node key lives on (palloc'd), or NULL when not known. */
char *
rconn_node_address(const char *key)
{
	if (rconn_is_cluster())
		return cluster_node_address(rconn_backend(), key);
	return rconn_master_address();
}

/*
 * Connect now to the node that serves key (ERROR on failure), so that an
 * acquisition can tell "Redis never saw the command" apart from "the
 * command may have run", as rconn_ready does for one node.  In a Cluster a
 * node that cannot be reached makes us read the map again and try where it
 * says, a pause apart, until rlock.command_timeout: a failover in progress.
 */
void
rconn_ready_for(RedisConn *conn, const char *key, const char *what)
{
	TimestampTz deadline;

	if (conn->node.kind != NODE_CLUSTER)
	{
		rconn_ready(conn, what);
		return;
	}
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
										   rconn_command_timeout_ms());
	for (;;)
	{
		RedisConn  *node = cluster_conn_for(conn, key, strlen(key),
											RCONN_COMMANDS);

		if (node != NULL && rconn_ensure(node))
			return;
		if (node != NULL)
		{
			rconn_set_failure(conn, node->failure, node->errdetail);
			strlcpy(conn->addr, node->addr, sizeof(conn->addr));
		}
		cluster_map_stale();
		/* only what a failover explains is worth waiting for */
		if (GetCurrentTimestamp() >= deadline ||
			(!failover_explains(conn->failure) && conn->failure != RF_CLUSTER) ||
			map_hopeless)
		{
			rconn_report(conn, ERROR, what);
			return;				/* not reached */
		}
		cluster_pause_before_retry();
		rconn_set_cluster_address(conn);
	}
}
