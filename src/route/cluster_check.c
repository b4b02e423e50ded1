/*-------------------------------------------------------------------------
 *
 * cluster_check.c
 *	  What a server says is checked before it is believed: an address a
 *	  sentinel, a slot map or a redirection names, the entries of a CLUSTER
 *	  SLOTS map and the MOVED/ASK redirections.  A server's word is not
 *	  trusted for slot numbers or addresses (a start slot of INT64_MIN once
 *	  spun a backend for ever).  Pure functions: the lowest of the route
 *	  layer's files with backend.c, calling none of the others.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>

#include "route/route.h"
#include "route/route_int.h"
#include "redis/redis.h"

/*
 * Is host:port, as a server named it (the sentinels, a slot map, a
 * redirection), an address to connect to (hostsize: room for the host)?
 * NULL if so, else what is wrong with it.  A server's word is not trusted.
 */
const char *
route_bad_address(const char *host, size_t len, size_t hostsize,
				  long long port)
{
	if (len == 0)
		return "an empty host";
	if (len >= hostsize || len > 255)
		return "a host name longer than 255 bytes";
	for (size_t i = 0; i < len; i++)
		if (!isgraph((unsigned char) host[i]))
			return "a host name with a space, a control character or a NUL byte";
	if (port < 1 || port > 65535)
		return psprintf("port %lld, outside 1..65535", port);
	return NULL;
}

/*
 * What is wrong with entry e of a CLUSTER SLOTS reply (NULL: nothing):
 * [start, end, [host, port, ...], replicas...], 0 <= start <= end < 16384.
 */
const char *
cluster_bad_slot_range(const RReply *e)
{
	const RReply *master;

	if (e->type != RREPLY_ARRAY || e->elements < 3)
		return "an entry is not an array of a slot range and its master";
	if (e->element[0]->type != RREPLY_INTEGER ||
		e->element[1]->type != RREPLY_INTEGER)
		return "a slot range is not two integers";
	if (e->element[0]->integer < 0 || e->element[0]->integer >= CLUSTER_SLOTS ||
		e->element[1]->integer < 0 || e->element[1]->integer >= CLUSTER_SLOTS)
		return psprintf("slot range %lld-%lld is outside 0-%d",
						(long long) e->element[0]->integer,
						(long long) e->element[1]->integer, CLUSTER_SLOTS - 1);
	if (e->element[0]->integer > e->element[1]->integer)
		return psprintf("slot range %lld-%lld ends before it starts",
						(long long) e->element[0]->integer,
						(long long) e->element[1]->integer);
	for (size_t k = 2; k < e->elements; k++)
	{
		const RReply *node = e->element[k];

		if (node->type != RREPLY_ARRAY || node->elements < 2 ||
			node->element[0]->type != RREPLY_STRING ||
			node->element[1]->type != RREPLY_INTEGER)
			return "a node is not an array of a host and a port";
	}
	master = e->element[2];
	/* "" or "?": the node's address is the one we asked it at (its port) */
	if (master->element[0]->len == 0 || strcmp(master->element[0]->str, "?") == 0)
		return master->element[1]->integer < 1 ||
			master->element[1]->integer > 65535 ?
			psprintf("port %lld, outside 1..65535",
					 (long long) master->element[1]->integer) : NULL;
	return route_bad_address(master->element[0]->str, master->element[0]->len,
							 sizeof(((RedisUrl *) NULL)->host),
							 master->element[1]->integer);
}

/*
 * Read a MOVED or ASK answer, "<MOVED|ASK> <slot> <host>:<port>", into
 * *out; false when it makes no sense.  The slot is in 0..16383 and the
 * port in 1..65535; the host is an address to connect to, or out->unknown
 * is set for an unknown endpoint (":<port>", "?:<port>": the map is read
 * again).  out->host points into err (brackets of an IPv6 address left out).
 */
bool
cluster_parse_redirect(const char *err, ClusterRedirect *out)
{
	const char *p = strchr(err, ' ');
	const char *addr;
	const char *colon;
	char	   *end;
	long		n;

	memset(out, 0, sizeof(*out));
	if (p == NULL || !isdigit((unsigned char) p[1]))
		return false;
	errno = 0;
	n = strtol(p + 1, &end, 10);
	if (errno != 0 || *end != ' ' || n < 0 || n >= CLUSTER_SLOTS)
		return false;
	out->slot = (int) n;
	addr = end + 1;
	colon = strrchr(addr, ':');
	if (colon == NULL || !isdigit((unsigned char) colon[1]))
		return false;
	errno = 0;
	n = strtol(colon + 1, &end, 10);
	if (errno != 0 || *end != '\0' || n < 1 || n > 65535)
		return false;
	out->port = (int) n;
	if (colon == addr || (colon == addr + 1 && addr[0] == '?'))
	{
		out->unknown = true;
		return true;
	}
	out->host = addr;
	out->hostlen = colon - addr;
	if (addr[0] == '[' && colon[-1] == ']' && out->hostlen >= 2)
	{
		out->host++;
		out->hostlen -= 2;
	}
	return route_bad_address(out->host, out->hostlen,
							 sizeof(((RedisUrl *) NULL)->host),
							 out->port) == NULL;
}
