/*-------------------------------------------------------------------------
 *
 * base.h
 *	  The door of src/base/, rlock's ground floor: what every layer may use.
 *	  The limits of names and intervals, the lock kinds and scopes, the
 *	  values of the rlock.* settings, and the activity counters.  Nothing
 *	  here calls into any other part of rlock.
 *
 *	  Its files:
 *	  settings.c	the values of the rlock.* settings (src/rlock.c defines
 *					the settings themselves)
 *	  stats_file.c	pg_stat/rlock_stats.stat: the counters kept across a
 *					clean restart
 *	  stats.c		shared-memory activity counters (rlock_stats) and the
 *					wait and hold histograms (rlock_stats_histograms)
 *	  printable.c	text a server sent, made safe to show
 *	  wait_events.c	the wait events rlock's waits show (pg_stat_activity)
 *	  events.c		the ring of this server's recent events (rlock_events)
 *	  compat.h		the differences between PostgreSQL 13 and 17
 *
 * rlock's layers, lowest first; a layer calls only those below it, through
 * their doors (test/check-layers keeps it so):
 *
 *	  base/		limits, kinds, settings, counters
 *	  net/		sockets, TLS, host names, URLs, digests
 *	  redis/	one Redis node: connections, round trips, the wait, pub/sub,
 *				errors as SQLSTATEs
 *	  route/	which node: Sentinel, Cluster slots, Redlock masters
 *	  holds/	what this session holds, the shared registry, transaction ends
 *	  locks/	the lock kinds, their scripts, waiting
 *	  sql/		the SQL entry points      worker/  the watchdog
 *	  src/rlock.c  _PG_init: the settings, the shared memory, the worker
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
	RLOCK_KIND_REDLOCK,			/* the exclusive lock on a quorum of the
								 * masters of rlock.redlock_urls */
	RLOCK_KIND_SEMAPHORE		/* permits of a semaphore: one hold each */
} RlockKind;

#define RLOCK_NUM_KINDS		6

/* Scope of one hold. */
typedef enum RlockScope
{
	RLOCK_SCOPE_SESSION,
	RLOCK_SCOPE_XACT
} RlockScope;

/* Settings (their values: settings.c; their definitions: src/rlock.c). */
extern char *rlock_redis_url;
extern char *rlock_key_prefix;
extern char *rlock_redlock_urls;
extern int	rlock_watchdog_timeout_ms;
extern int	rlock_connect_timeout_ms;
extern int	rlock_command_timeout_ms;
extern int	rlock_retry_timeout_ms;
extern int	rlock_deadlock_timeout_ms;
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
extern int	rlock_max_locks_per_session;	/* -1: a tenth of max_locks */
extern int	rlock_max_permits_per_session;
extern int	rlock_max_read_holds_per_lock;
extern int	rlock_max_owner_holds_per_session;
extern int	rlock_max_owner_holds_per_lock;
extern int	rlock_max_owner_lease_s;
extern int	rlock_superuser_reserved_locks;
extern char *rlock_server_name_setting;

/* this server's name on the Redis (settings.c), and as a client name */
extern const char *rlock_server_label(void);
extern void rlock_server_label_sanitized(char *out, int maxlen);

/*
 * The servers' announcements (SPEC.md section 3): a hash per instance,
 * RLOCK_SERVERS_KEY ":<instance uuid>", and the index of them, a sorted
 * set of instance UUIDs scored by when their hash expires (epoch ms).
 * The hash tag keeps them in one slot of a Cluster.
 */
#define RLOCK_SERVERS_KEY		"{rlock:servers}"

/*
 * The waits made known (SPEC.md section 5.6): a hash per waiting session,
 * RLOCK_SERVERS_KEY ":wait:<holder id>", and their index, in the same slot
 * (locks/wait_graph.c, locks/scripts_wait.c).
 */
#define RLOCK_WAITS_KEY			RLOCK_SERVERS_KEY ":waits"

/*
 * Was rlock loaded by shared_preload_libraries (set in _PG_init)?  Only
 * then is rlock.redis_url masked everywhere: loaded later by a backend,
 * the postmaster logs its raw value on reload, and SHOW shows it to every
 * role until the session's first rlock call.
 */
extern bool rlock_preloaded;

/*
 * Text a server sent, safe to show (printable.c): escaped as \xNN where it
 * is not valid text, from its first RLOCK_PRINTABLE_MAX bytes.
 */
#define RLOCK_PRINTABLE_MAX		1024
extern void rlock_printable_into(char *dst, size_t size, const char *s,
								 size_t len);
extern char *rlock_printable(const char *s, size_t len);

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
	RLOCK_STAT_OPEN_CONNECTIONS,	/* a gauge, not a counter: Redis
									 * connections open now (each process
									 * sets its own; not reset) */
	RLOCK_NUM_STATS
} RlockStat;

/* Gauges: set by their process (stats_set), summed but never reset. */
#define stats_is_gauge(s)	((s) == RLOCK_STAT_OPEN_CONNECTIONS)

/*
 * The wait and hold histograms (rlock_stats_histograms), one per kind and
 * measure, never per lock name: the lock kinds (RlockKind), then two that
 * only wait, a multi-lock's set and a latch's await.  A multi-lock's names
 * are held as exclusive locks, a fenced lock is one too.
 */
#define RLOCK_HIST_MULTI		RLOCK_NUM_KINDS
#define RLOCK_HIST_LATCH		(RLOCK_NUM_KINDS + 1)
#define RLOCK_HIST_KINDS		(RLOCK_NUM_KINDS + 2)

typedef enum RlockMeasure
{
	RLOCK_MEASURE_WAIT,			/* an acquisition call: start to its end */
	RLOCK_MEASURE_HOLD,			/* first hold granted to released or lost */
	RLOCK_NUM_MEASURES
} RlockMeasure;

/* Buckets: RLOCK_HIST_BUCKETS - 1 bounds (stats_hist_bound_us), then +Inf */
#define RLOCK_HIST_BUCKETS		13
/* a histogram's cells: a count per bucket (not cumulative), then the sum */
#define RLOCK_HIST_CELLS		(RLOCK_HIST_BUCKETS + 1)
#define RLOCK_HIST_SUM			RLOCK_HIST_BUCKETS

/* Every cell a process counts in: the counters, then the histograms. */
#define RLOCK_NUM_CELLS \
	(RLOCK_NUM_STATS + RLOCK_HIST_KINDS * RLOCK_NUM_MEASURES * RLOCK_HIST_CELLS)

/* The first cell of the histogram of (kind, measure). */
#define stats_hist_cell(k, m) \
	(RLOCK_NUM_STATS + ((k) * RLOCK_NUM_MEASURES + (m)) * RLOCK_HIST_CELLS)

/*
 * One process's counters.  Only that process writes them (so an add is an
 * uncontended atomic on a cache line of its own); readers sum all slots.
 */
typedef struct RlockStatsSlot
{
	pg_atomic_uint64 c[RLOCK_NUM_CELLS];
} RlockStatsSlot;

extern RlockStatsSlot *stats_my_slot;
extern RlockStatsSlot *stats_attach(void);

extern void stats_install_hooks(void);

/* This process's slot of counters, attached on first use. */
static inline RlockStatsSlot *
stats_slot(void)
{
	return likely(stats_my_slot != NULL) ? stats_my_slot : stats_attach();
}

/*
 * While set, this process counts nothing (stats_add): the worker's
 * announcement of the server (src/worker/announce.c) is not lock traffic,
 * and the counters' readers subtract only the renewals' from theirs.
 */
extern bool stats_quiet;

/* Add n to one of this process's counters. */
static inline void
stats_add(RlockStat s, uint64 n)
{
	if (unlikely(stats_quiet))
		return;
	pg_atomic_fetch_add_u64(&stats_slot()->c[s], n);
}

static inline void
stats_count(RlockStat s)
{
	stats_add(s, 1);
}

/*
 * Set one of this process's gauges.  Once the process has its slot (any
 * earlier stats_add or stats_set), this is one atomic store, which a
 * signal handler may make (with the platforms' native 64-bit atomics; only
 * this process ever writes its slot).
 */
static inline void
stats_set(RlockStat s, uint64 v)
{
	pg_atomic_write_u64(&stats_slot()->c[s], v);
}

/* Add the time elapsed since start (a GetCurrentTimestamp()) to s. */
extern void stats_add_elapsed(RlockStat s, TimestampTz start);

/* Readers: the sums since the last reset, and when that was. */
extern void stats_read(uint64 *values, TimestampTz *reset_at);
extern void stats_reset(void);

/*
 * Histograms: count one observation of us microseconds (no lock, no
 * round trip); read every cell (RLOCK_NUM_CELLS of them) since the reset.
 * The name of a histogram's kind, whether it has that measure (a multi-
 * lock's and a latch's are waits only), a bucket's bound (-1: +Inf).
 */
extern void stats_observe(int hkind, RlockMeasure m, int64 us);
extern void stats_observe_since(int hkind, RlockMeasure m, TimestampTz start);
extern void stats_read_cells(uint64 *cells, TimestampTz *reset_at);
extern const char *stats_hist_kind_name(int hkind);
extern bool stats_hist_has(int hkind, RlockMeasure m);
extern int64 stats_hist_bound_us(int bucket);

/*
 * stats_file: the counters as saved at a clean shutdown
 * (pg_stat/rlock_stats.stat), read back once at the next start.  Neither
 * throws: a file that cannot be written, or read, or is not one this
 * build wrote, is a LOG line (a read also removes the file).
 */
extern void stats_file_write(const uint64 *cells, int ncells,
							 TimestampTz reset_at);
extern bool stats_file_read(uint64 *cells, int ncells,
							TimestampTz *reset_at);

/*
 * wait_events: what pg_stat_activity.wait_event shows while rlock waits
 * (named from PostgreSQL 17, 'Extension' before; SPEC.md section 5.6).
 * Every wait of rlock's own passes RLOCK_WAIT_EVENT, the current one: a
 * Redis round trip unless a wait loop of src/locks/ set another for its
 * sleeps (rlock_wait_event_set, and back to what it returned after).
 */
typedef enum RlockWaitEvent
{
	RLOCK_WAIT_REDIS = 0,		/* RlockRedis: a round trip, a connect, a
								 * retry's pause, the worker */
	RLOCK_WAIT_LOCK,			/* RlockLock: blocked on a lock */
	RLOCK_WAIT_SEMAPHORE,		/* RlockSemaphore: waiting for permits */
	RLOCK_WAIT_LATCH,			/* RlockLatch: a count-down latch's await */
	RLOCK_NUM_WAIT_EVENTS
} RlockWaitEvent;

extern RlockWaitEvent rlock_wait_event_current;
extern uint32 rlock_wait_event_info(RlockWaitEvent which);

/* Make which the current wait event; returns the one it replaces. */
static inline RlockWaitEvent
rlock_wait_event_set(RlockWaitEvent which)
{
	RlockWaitEvent prev = rlock_wait_event_current;

	rlock_wait_event_current = which;
	return prev;
}

#define RLOCK_WAIT_EVENT	rlock_wait_event_info(rlock_wait_event_current)

/*
 * events: the ring of this server's recent events behind the rlock_events
 * view (SPEC.md section 12), in shared memory when rlock is preloaded.
 * Recording never ERRORs, never waits (a spinlock around a memcpy) and
 * never allocates: transaction and exit callbacks record.
 */
typedef enum RlockEventType
{
	RLOCK_EVENT_LOST,			/* a hold found gone from Redis */
	RLOCK_EVENT_RENEW_FAILING,	/* the watchdog's renewals fail (an outage) */
	RLOCK_EVENT_RENEW_RECOVERED,	/* ... and Redis answers again */
	RLOCK_EVENT_FORCE_RELEASE,	/* rlock_force_release deleted a lock */
	RLOCK_EVENT_DEADLOCK,		/* a wait ended as a deadlock's victim */
	RLOCK_EVENT_STRANDED_RELEASE,	/* a release could not reach Redis */
	RLOCK_EVENT_STRANDED_SETTLED,	/* ... and the worker finished it */
	RLOCK_EVENT_RECONNECT,		/* a connection made again after a failure */
	RLOCK_EVENT_CRASH_CLEANUP,	/* a crashed run's holds released */
	RLOCK_EVENT_OUTAGE_WAIT,	/* a wait pauses through a Redis outage */
	RLOCK_EVENT_OUTAGE_RIDDEN_OUT,	/* ... and got what it waited for */
	RLOCK_EVENT_FAILOVER,		/* Sentinel named a new master */
	RLOCK_NUM_EVENTS
} RlockEventType;

#define RLOCK_EVENT_KIND_LEN	16
#define RLOCK_EVENT_LOCK_LEN	256
#define RLOCK_EVENT_HOLDER_LEN	128
#define RLOCK_EVENT_DETAIL_LEN	512

/* One event (lock, holder, detail: printable text, cut to fit). */
typedef struct RlockEventEntry
{
	uint64		seq;			/* from 1, one more for each event */
	TimestampTz at;
	int			pid;
	Oid			dboid;			/* InvalidOid: the worker's */
	RlockEventType event;
	char		kind[RLOCK_EVENT_KIND_LEN]; /* as rlock_locks names it */
	char		lock[RLOCK_EVENT_LOCK_LEN];
	char		holder[RLOCK_EVENT_HOLDER_LEN];	/* raw: masked when shown */
	char		detail[RLOCK_EVENT_DETAIL_LEN]; /* the LOG line's words */
} RlockEventEntry;

extern int	rlock_events_max;	/* rlock.events_max: the ring's entries */

extern void events_install_hooks(void);
extern bool rlock_events_available(void);
extern const char *rlock_event_name(RlockEventType ev);
extern const char *rlock_event_record(RlockEventType ev, const char *kind,
									  const char *lock, const char *holder,
									  const char *fmt,...) pg_attribute_printf(5, 6);
extern void rlock_event(int elevel, RlockEventType ev, const char *kind,
						const char *lock, const char *holder,
						const char *fmt,...) pg_attribute_printf(6, 7);
extern int	rlock_events_read(RlockEventEntry *out);

/* The fixed part of an owner token's holder field: "rlock-owner:<digest>". */
#define RLOCK_OWNER_FIELD_PREFIX	"rlock-owner:"

#endif							/* RLOCK_BASE_H */
