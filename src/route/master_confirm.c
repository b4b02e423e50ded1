/*-------------------------------------------------------------------------
 *
 * master_confirm.c
 *	  Is the node that answered the check before COMMIT still the master?
 *	  (SPEC 6, "failover between servers")
 *
 * Two PostgreSQL servers following the same sentinels, or the same
 * Cluster, switch to a new master at different moments; a master paused
 * while its replica was promoted still says ROLE master when it resumes,
 * and a replica still attached to it acknowledges its writes.  The keys
 * being there is not enough: the check before COMMIT (holds_commit.c) asks
 * others.
 *
 *	- Sentinel: route_run_confirmed runs the renewals and, in the same
 *	  parallel round trip (so within the same bound), asks every sentinel
 *	  SENTINEL GET-MASTER-ADDR-BY-NAME.  Confirmed when one names the node
 *	  that answered and none names another; otherwise (fail closed: none
 *	  answers) the locks count as lost, and a connection the sentinels
 *	  moved away from re-discovers the master at its next use.
 *	- Cluster: route_confirm_owners asks the other masters, right after
 *	  the renewals, about one key of each slot (EXISTS): each answers MOVED
 *	  to the owner it knows, or for itself.  Confirmed unless most of those
 *	  that answer name another owner, or none answers.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"

#include "route/route.h"
#include "route/route_int.h"
#include "redis/redis.h"
#include "base/base.h"

/*
 * Run cmds on conn (as route_run, ERROR on failure) and, when conn is a
 * master the sentinels located, ask every sentinel at once, in the same
 * parallel round trip and so within the same bound, which node is master:
 * the check before COMMIT must know that the node that answered it is
 * still the master, not only that the keys are there (SPEC 6).  Returns
 * false with *why when no sentinel confirmed it (fail closed: none
 * answered, or none knows it) or one names another node, which conn then
 * leaves at its next use.  The sentinels are asked on connections of
 * their own (RCONN_SUBSCRIBER: a sentinel has no subscriber), so that conn,
 * reconnecting mid-way, can ask them on the usual ones.
 */
bool
route_run_confirmed(RedisConn *conn, RedisCmd *cmds, int ncmds,
					RReply ***replies, const char *what, char **why)
{
	const RedisUrlConf *conf = rlock_redis_conf;
	RconnOp    *ops;
	RedisCmd	ask;
	int			n;
	int			nconfirm = 0;
	char		other[300] = "";
	StringInfoData failed;

	*why = NULL;
	if (rconn_node(conn)->kind != NODE_SENTINEL_MASTER || conf == NULL ||
		conf->url.kind != NODE_SENTINEL_MASTER || conf->nhosts <= 0)
	{
		route_run(conn, cmds, ncmds, replies, ERROR, what);
		return true;
	}
	/* located (asking the sentinels) before the round trip, not in it */
	rconn_ready(conn, what);

	n = conf->nhosts;
	ops = palloc0((n + 1) * sizeof(RconnOp));
	ops[0].conn = conn;
	ops[0].cmds = cmds;
	ops[0].ncmds = ncmds;
	rcmd_init(&ask);
	rcmd_str(&ask, "SENTINEL");
	rcmd_str(&ask, "GET-MASTER-ADDR-BY-NAME");
	rcmd_str(&ask, conf->url.master_name);
	for (int i = 0; i < n; i++)
	{
		RedisUrl	node;

		memset(&node, 0, sizeof(node));
		node.scheme = conf->url.scheme;
		node.kind = NODE_SENTINEL;
		node.origin = URL_OF_REDIS_URL;	/* rlock.sentinel_password_file */
		strlcpy(node.host, conf->hosts[i].host, sizeof(node.host));
		node.port = conf->hosts[i].port;
		ops[i + 1].conn = rconn_get(&node, RCONN_SUBSCRIBER);
		ops[i + 1].cmds = &ask;
		ops[i + 1].ncmds = 1;
	}
	rconn_run_parallel(ops, n + 1);
	if (!ops[0].ok)
		rconn_report(conn, ERROR, what);
	*replies = ops[0].replies;

	initStringInfo(&failed);
	for (int i = 1; i <= n; i++)
	{
		RedisConn  *s = ops[i].conn;
		RReply	   *r = ops[i].ok ? ops[i].replies[0] : NULL;
		char		addr[300];
		long		port;
		char	   *end;

		if (r == NULL)
		{
			const char *detail = rconn_failure_detail(s);

			appendStringInfo(&failed, "%s%s: %s", failed.len ? "; " : "",
							 rconn_address(s), detail[0] ? detail :
							 "no answer in time");
			continue;
		}
		if (r->type != RREPLY_ARRAY || r->elements != 2 ||
			r->element[0]->type != RREPLY_STRING ||
			r->element[1]->type != RREPLY_STRING ||
			r->element[0]->len == 0 || r->element[0]->len >= 256)
		{
			appendStringInfo(&failed, "%s%s: %s", failed.len ? "; " : "",
							 rconn_address(s), r->type == RREPLY_NIL ?
							 "it knows no such master" : "an unexpected reply");
			continue;
		}
		errno = 0;
		port = strtol(r->element[1]->str, &end, 10);
		if (errno != 0 || end == r->element[1]->str || *end != '\0' ||
			port <= 0 || port > 65535)
		{
			appendStringInfo(&failed, "%s%s: %s", failed.len ? "; " : "",
							 rconn_address(s), "an unexpected reply");
			continue;
		}
		snprintf(addr, sizeof(addr),
				 strchr(r->element[0]->str, ':') ? "[%s]:%ld" : "%s:%ld",
				 r->element[0]->str, port);
		if (strcmp(addr, rconn_address(conn)) == 0)
			nconfirm++;
		else if (other[0] == '\0')
			strlcpy(other, addr, sizeof(other));
	}
	if (other[0] != '\0')
	{
		/* follow the sentinels at the next use */
		rconn_relocate(conn, true);
		*why = psprintf("It was checked on %s, but the sentinels name %s as master \"%s\" now: a failover replaced the node it was held on.",
						rconn_address(conn), other, conf->url.master_name);
		return false;
	}
	if (nconfirm == 0)
	{
		*why = psprintf("No sentinel confirmed that %s, where it was checked, is still master \"%s\" (%s).",
						rconn_address(conn), conf->url.master_name, failed.data);
		return false;
	}
	return true;
}

/*
 * "host:port" (or "[v6]:port") of a MOVED answer's node, normalised as
 * rconn_set_address writes addresses; false when it has no such shape.
 */
static bool
moved_address(const char *err, char *addr, size_t size)
{
	const char *sp1 = strchr(err, ' ');
	const char *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
	const char *colon;
	char		host[256];
	size_t		hlen;
	long		port;
	char	   *end;

	if (sp2 == NULL || (colon = strrchr(sp2 + 1, ':')) == NULL)
		return false;
	hlen = colon - (sp2 + 1);
	if (hlen >= 2 && sp2[1] == '[' && colon[-1] == ']')
	{
		sp2++;
		hlen -= 2;
	}
	if (hlen == 0 || hlen >= sizeof(host))
		return false;
	memcpy(host, sp2 + 1, hlen);
	host[hlen] = '\0';
	errno = 0;
	port = strtol(colon + 1, &end, 10);
	if (errno != 0 || end == colon + 1 || *end != '\0' || port <= 0 ||
		port > 65535)
		return false;
	snprintf(addr, size, strchr(host, ':') ? "[%s]:%ld" : "%s:%ld", host,
			 port);
	return true;
}

/*
 * For a Cluster, after the check before COMMIT: does the node that answered
 * for each of keys still own its slot as master?  Its own word is not
 * enough: a master paused while its replica was promoted still believes it
 * owns its slots when it resumes, until gossip corrects it.  The other
 * masters are asked (EXISTS of one key of each slot, pipelined, every
 * master at once): each answers MOVED to the owner it knows, or for itself.
 * Returns the index of a key whose node is not confirmed, with *why, when
 * most of those that answered name another owner (the slot map is then
 * read again) or none answered (fail closed); -1 when all are.  With a
 * single master there is no one else to ask.
 */
int
route_confirm_owners(const char *const *keys, int n, char **why)
{
	RedisConn  *conn = route_backend();
	RedisConn **masters;
	int			nmasters;
	int		   *gkey;			/* per slot group: index of its key */
	RedisConn **gowner;			/* ... the node that answered for it */
	int		   *nanswered;
	int		   *nother;
	char	  **other;
	int			ngroups = 0;
	RconnOp    *ops;
	int		  **opgroup;		/* per op, per command: its group */
	int			nops = 0;

	*why = NULL;
	if (rconn_node(conn)->kind != NODE_CLUSTER || n <= 0)
		return -1;
	nmasters = cluster_masters(conn, &masters);
	if (nmasters < 2)
		return -1;

	gkey = palloc(n * sizeof(int));
	gowner = palloc(n * sizeof(RedisConn *));
	for (int i = 0; i < n; i++)
	{
		int			slot = cluster_slot_of(keys[i], strlen(keys[i]));
		int			owner = cluster_owner(slot);
		bool		dup = false;

		for (int g = 0; g < ngroups && !dup; g++)
			dup = cluster_slot_of(keys[gkey[g]], strlen(keys[gkey[g]])) == slot;
		if (dup)
			continue;
		if (owner < 0)
		{
			*why = psprintf("No node of the cluster owns its slot %d now.", slot);
			return i;
		}
		gkey[ngroups] = i;
		gowner[ngroups++] = cluster_node(owner, RCONN_COMMANDS);
	}

	ops = palloc0(nmasters * sizeof(RconnOp));
	opgroup = palloc(nmasters * sizeof(int *));
	for (int m = 0; m < nmasters; m++)
	{
		RedisCmd   *cmds = palloc(ngroups * sizeof(RedisCmd));
		int			k = 0;

		opgroup[nops] = palloc(ngroups * sizeof(int));
		for (int g = 0; g < ngroups; g++)
		{
			if (gowner[g] == masters[m])
				continue;
			rcmd_init(&cmds[k]);
			rcmd_str(&cmds[k], "EXISTS");
			rcmd_str(&cmds[k], keys[gkey[g]]);
			opgroup[nops][k++] = g;
		}
		if (k == 0)
			continue;
		ops[nops].conn = masters[m];
		ops[nops].cmds = cmds;
		ops[nops].ncmds = k;
		nops++;
	}
	if (nops == 0)
		return -1;
	rconn_run_parallel(ops, nops);

	nanswered = palloc0(ngroups * sizeof(int));
	nother = palloc0(ngroups * sizeof(int));
	other = palloc0(ngroups * sizeof(char *));
	for (int o = 0; o < nops; o++)
	{
		if (!ops[o].ok)
			continue;
		for (int k = 0; k < ops[o].ncmds; k++)
		{
			RReply	   *r = ops[o].replies[k];
			int			g = opgroup[o][k];
			char		addr[300];

			if (r->type == RREPLY_INTEGER ||
				(r->type == RREPLY_ERROR && strncmp(r->str, "ASK ", 4) == 0))
				strlcpy(addr, rconn_address(ops[o].conn), sizeof(addr));	/* itself */
			else if (r->type != RREPLY_ERROR ||
					 strncmp(r->str, "MOVED ", 6) != 0 ||
					 !moved_address(r->str, addr, sizeof(addr)))
				continue;		/* no answer (CLUSTERDOWN, TRYAGAIN, ...) */
			nanswered[g]++;
			if (strcmp(addr, rconn_address(gowner[g])) != 0)
			{
				nother[g]++;
				if (other[g] == NULL)
					other[g] = pstrdup(addr);
			}
		}
	}
	for (int g = 0; g < ngroups; g++)
	{
		if (nanswered[g] == 0)
		{
			*why = psprintf("No other master of the cluster confirmed that %s, where it was checked, still owns its slot.",
							rconn_address(gowner[g]));
			return gkey[g];
		}
		if (nother[g] * 2 > nanswered[g])
		{
			cluster_map_stale();
			*why = psprintf("It was checked on %s, but %d of the %d other masters that answered name %s as the owner of its slot: a failover replaced the node it was held on.",
							rconn_address(gowner[g]), nother[g], nanswered[g],
							other[g]);
			return gkey[g];
		}
	}
	return -1;
}
