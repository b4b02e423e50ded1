/*-------------------------------------------------------------------------
 *
 * base/base.h
 *	  DOOR-DESCRIPTION
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_BASE_H
#define RLOCK_BASE_H

#include "port/atomics.h"
#include "datatype/timestamp.h"

#include "base/compat.h"

/*
 * rlock: Declarations shared by every part of rlock: settings, lock kinds and
 *	  the limits of lock names.
 *
 * rlock is layered as follows (one file per responsibility):
 *
 *	rlock.c			 module entry: _PG_init, the rlock.* settings
 *	sql_api.c		 thin SQL entry points: argument checks, then one call down
 *	sql_api_sets.c	 the same for the multi-lock and the Redlock
 *	introspect.c	 SQL entry points that report: rlock_status, rlock_locks,
 *					 rlock_stats, rlock_ping...
 *	lock_exclusive.c the exclusive reentrant lock (Redisson RLock) and the
 *					 fenced lock (RFencedLock)
 *	lock_rw.c		 the read/write lock (Redisson RReadWriteLock)
 *	lock_fair.c		 the fair lock (Redisson RedissonFairLock)
 *	lock_multi.c	 the multi-lock: a set of exclusive locks, all or none
 *	lock_redlock.c	 the Redlock: the exclusive lock on a quorum of masters
 *	lock_kinds.c	 the table of lock kinds: names, compatibility, and the
 *					 operations the bookkeeping and the watchdog use
 *	lock_wait.c		 how a blocked acquisition waits, for every lock kind
 *	waitqueue.c		 shared memory: which of this server's waiters tries next
 *	holds.c			 backend-local table of what this session holds:
 *					 acquisitions and releases of every kind
 *	holds_set.c		 a set of names acquired all or none, and released
 *					 together, in one round trip per node
 *	holds_batch.c	 many holds told to Redis in one round trip (releases at
 *					 transaction and session end, reconciling uncertain ones)
 *	holds_xact.c	 when holds end: transaction, subtransaction and exit
 *					 callbacks, the check before COMMIT, DISCARD ALL
 *	lockname.c		 lock names: validation, prefixing, Redisson's derived keys
 *	scripts.c		 the Lua scripts and their SHA1 digests
 *	scripts_rw.c	 the read/write lock's scripts (Lua shared: scripts_lua.h)
 *	connection.c	 Redis connections: one per node and use, kept in a
 *					 backend-local pool, connected, checked, closed when idle
 *	connection_exchange.c	every Redis round trip (pipelined, over one or
 *					 several connections at once)
 *	connection_reply.c	the reply parser, bounded (a hostile server costs an
 *					 ERROR, never memory)
 *	connection_wait.c	the one interruptible wait (one socket or several)
 *	connection_command.c	building Redis commands
 *	connection_pubsub.c	 listening for release messages
 *	transport.c		 the non-blocking socket (TCP or Unix) under a connection
 *	transport_tls.c	 TLS over that socket (OpenSSL), rlock.tls_*
 *	resolve.c		 host names resolved within a deadline
 *	url.c			 rlock.redis_url, its password kept out of sight
 *	redlock.c		 rlock.redlock_urls: the independent masters of the
 *					 Redlock, asked in parallel, and their quorum
 *	topology.c		 which node is the master (Sentinel), followed through
 *					 failover and shared by the server's processes
 *	master_confirm.c	 the check before COMMIT asks the sentinels (the
 *					 other masters of a Cluster) if its node is master
 *	cluster.c		 a Redis Cluster's slot map, learned and kept current
 *	cluster_route.c	 routed round trips: each command to its slot's master
 *	cluster_check.c	 slot maps and MOVED/ASK redirections checked first
 *	connection_error.c	 failures and error replies as ERRORs with SQLSTATEs
 *	registry.c		 shared memory: instance identity, registry of held locks
 *	stats.c			 shared-memory activity counters (rlock_stats)
 *	watchdog.c		 the background worker that renews leases
 *	compat.h		 the differences between PostgreSQL versions
 */

/* Longest lock key (prefix included), in bytes, per SPEC.md section 4. */
#define RLOCK_MAX_KEY_LEN		1024
/* Longest explicit owner token. */
#define RLOCK_MAX_OWNER_LEN		256
/* Largest lease or wait we accept: one year, in milliseconds. */
#define RLOCK_MAX_INTERVAL_MS	(INT64CONST(365) * 24 * 3600 * 1000)

/* Largest rlock.connect_timeout and rlock.command_timeout: one minute. */
#define RLOCK_MAX_USER_TIMEOUT_MS	60000

/*
 * Round trips that cannot be interrupted (at COMMIT and ROLLBACK, in error
 * clean-up, at session exit) wait at most this long, whatever the
 * settings say: nothing a user sets may make COMMIT or a shutdown wait.
 */
#define RLOCK_UNINTERRUPTIBLE_CAP_MS	3000

/*
 * The lease a transaction-level lock must have left, after the check before
 * COMMIT, for the commit to finish inside it.  A fixed constant: no
 * setting a user controls may shrink a safety margin.
 */
#define RLOCK_COMMIT_MIN_LEASE_MS	1000

/*
 * Smallest rlock.watchdog_timeout: twice that, so that a lock renewed at
 * COMMIT (to the watchdog's lease) always has the lease a commit needs,
 * with room for the round trip; below it every COMMIT of a lock taken
 * without a lease would fail.
 */
#define RLOCK_MIN_WATCHDOG_TIMEOUT_MS	(2 * RLOCK_COMMIT_MIN_LEASE_MS)

/* Largest rlock.max_locks. */
#define RLOCK_MAX_LOCKS_LIMIT	1000000

/*
 * Kinds of lock.  (A fenced lock is an exclusive lock: same layout, and
 * released like one.)
 */
typedef enum RlockKind
{
	RLOCK_KIND_EXCLUSIVE = 0,
	RLOCK_KIND_READ,			/* the two sides of a read/write lock */
	RLOCK_KIND_WRITE,
	RLOCK_KIND_FAIR,
	RLOCK_KIND_REDLOCK			/* the exclusive lock on a quorum of the
								 * masters of rlock.redlock_urls */
} RlockKind;

#define RLOCK_NUM_KINDS		5

/* Scope of one hold. */
typedef enum RlockScope
{
	RLOCK_SCOPE_SESSION,
	RLOCK_SCOPE_XACT
} RlockScope;

/* Settings (rlock.c). */
extern char *rlock_redis_url;
extern char *rlock_key_prefix;
extern char *rlock_redlock_urls;
extern int	rlock_watchdog_timeout_ms;
extern int	rlock_connect_timeout_ms;
extern int	rlock_command_timeout_ms;
extern bool rlock_verify_on_commit;
extern bool rlock_cancel_on_lost;
extern int	rlock_connection_idle_timeout_ms;
extern char *rlock_redis_password_file;
extern char *rlock_sentinel_password_file;
extern int	rlock_replica_acks;
extern int	rlock_replica_ack_timeout_ms;
extern char *rlock_tls_ca_file;
extern char *rlock_tls_cert_file;
extern char *rlock_tls_key_file;
extern char *rlock_tls_server_name;
extern int	rlock_tls_verify;
extern int	rlock_publish_mode;

/* rlock.tls_verify */
typedef enum RlockTlsVerify
{
	RLOCK_TLS_VERIFY_NONE,
	RLOCK_TLS_VERIFY_CA,		/* the certificate chains to the CA */
	RLOCK_TLS_VERIFY_FULL		/* ... and names the server */
} RlockTlsVerify;

/* rlock.publish_mode: how releases are published, and waiters subscribe */
typedef enum RlockPublishMode
{
	RLOCK_PUBLISH_AUTO,			/* sharded on a Redis >= 7 Cluster */
	RLOCK_PUBLISH_PLAIN,		/* PUBLISH / SUBSCRIBE */
	RLOCK_PUBLISH_SHARDED		/* SPUBLISH / SSUBSCRIBE */
} RlockPublishMode;

/*
 * stats: Cumulative activity counters behind the rlock_stats view.
 */

/* The counters, in the order of the rlock_stats view's columns. */
typedef enum RlockStat
{
	RLOCK_STAT_ACQUISITIONS,	/* holds granted (reentrant ones included) */
	RLOCK_STAT_CONTENDED,		/* ... of which after waiting */
	RLOCK_STAT_FAILED,			/* tries refused, waits that timed out or
								 * were cancelled */
	RLOCK_STAT_WAIT_US,			/* time spent waiting for locks */
	RLOCK_STAT_RELEASES,		/* locks released (each lock once per call) */
	RLOCK_STAT_RENEWALS,		/* leases renewed by the watchdog */
	RLOCK_STAT_RENEWAL_BATCHES, /* renewal script calls */
	RLOCK_STAT_RENEWAL_CYCLES,	/* watchdog cycles that had locks to renew */
	RLOCK_STAT_RENEWAL_US,		/* time spent in those cycles */
	RLOCK_STAT_RENEWAL_FAILURES,	/* cycles that could not reach Redis */
	RLOCK_STAT_LOCKS_LOST,		/* holds found gone from Redis */
	RLOCK_STAT_ROUND_TRIPS,		/* Redis round trips (a pipeline is one) */
	RLOCK_STAT_RECONNECTS,		/* connections opened after an earlier one */
	RLOCK_STAT_REDIS_ERRORS,	/* failed round trips and error replies */
	RLOCK_STAT_FAILOVERS,		/* new masters confirmed (Sentinel) */
	RLOCK_STAT_ACK_REFUSALS,	/* acquisitions undone: too few replicas
								 * acknowledged them */
	RLOCK_STAT_RENEWAL_ROUND_TRIPS, /* the watchdog's round trips (one
									 * parallel round over every node counts
									 * once) */
	RLOCK_STAT_REDIRECTIONS,	/* Cluster MOVED and ASK answers followed */
	RLOCK_NUM_STATS
} RlockStat;

/*
 * One process's counters.  Only that process writes them (so an add is an
 * uncontended atomic on a cache line of its own); readers sum all slots.
 */
typedef struct RlockStatsSlot
{
	pg_atomic_uint64 c[RLOCK_NUM_STATS];
} RlockStatsSlot;

extern RlockStatsSlot *stats_my_slot;
extern RlockStatsSlot *stats_attach(void);

extern void stats_install_hooks(void);

/* Add n to one of this process's counters. */
static inline void
stats_add(RlockStat s, uint64 n)
{
	RlockStatsSlot *slot = stats_my_slot;

	if (unlikely(slot == NULL))
		slot = stats_attach();
	pg_atomic_fetch_add_u64(&slot->c[s], n);
}

static inline void
stats_count(RlockStat s)
{
	stats_add(s, 1);
}

/* Add the time elapsed since start (a GetCurrentTimestamp()) to s. */
extern void stats_add_elapsed(RlockStat s, TimestampTz start);

/* Readers: the sums since the last reset, and when that was. */
extern void stats_read(uint64 *values, TimestampTz *reset_at);
extern void stats_reset(void);

/* The fixed part of an owner token's holder field: "rlock-owner:<digest>". */
#define RLOCK_OWNER_FIELD_PREFIX	"rlock-owner:"

#endif							/* RLOCK_BASE_H */
