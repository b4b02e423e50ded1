/*-------------------------------------------------------------------------
 *
 * cluster_slot.c
 *	  Redis Cluster hash slots: which slot a key hashes to, and keys grouped
 *	  so that each group fits one script call.
 *
 * Every key and channel of one lock shares a slot (CRC16 of the {hash
 * tag}, PROTOCOL.md).  Scripts over many locks (renewals, the check before
 * COMMIT) are cut per slot by their builders (route_slot_groups), so that
 * no script call spans two slots (CROSSSLOT).  Pure arithmetic, no map:
 * the lowest of the Cluster files.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "route/route.h"
#include "route/route_int.h"
#include "net/net.h"

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

/* Is rlock.redis_url a Redis Cluster? */
bool
route_is_cluster(void)
{
	return rlock_redis_conf != NULL && rlock_redis_conf->url.kind == NODE_CLUSTER;
}

/* The slot of key in a Cluster deployment; -1 elsewhere (one node has all). */
static int
route_key_slot(const char *key)
{
	if (!route_is_cluster())
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
route_slot_groups(const char *const *keys, int n, int maxper, int *order,
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
		slots[i] = route_key_slot(keys[i]);
	}
	if (route_is_cluster())
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

/* The slot of a key of len bytes. */
int
cluster_slot_of(const char *key, size_t len)
{
	return key_slot(key, len);
}
