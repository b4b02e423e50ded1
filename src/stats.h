/*-------------------------------------------------------------------------
 *
 * stats.h
 *	  Cumulative activity counters behind the rlock_stats view.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_STATS_H
#define RLOCK_STATS_H

#include "port/atomics.h"
#include "datatype/timestamp.h"

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

#endif							/* RLOCK_STATS_H */
