/*-------------------------------------------------------------------------
 *
 * stats.c
 *	  Cumulative activity counters behind the rlock_stats view: acquisitions
 *	  and waits, releases, renewals, lost locks, Redis round trips,
 *	  reconnects and errors, for the whole server since it started (or since
 *	  rlock_stats_reset()); and one gauge, the Redis connections open now.
 *
 * The counters are cheap enough to be always on: every process that uses
 * rlock (backends and the watchdog) owns one slot in shared memory, indexed
 * by its PGPROC number and padded to a cache line, and adds to it with
 * uncontended atomics; nothing on the hot path takes a lock or shares a
 * cache line with another process.  A slot outlives its process, so the
 * next process given that PGPROC keeps adding to it and nothing is lost
 * when sessions end.  Readers sum the slots.  A reset does not write other
 * processes' slots: it records the current sums as a baseline that readers
 * subtract.
 *
 * A gauge (open_connections) is a value each process sets in its own slot
 * rather than adds to (and puts back to 0 when it exits, before its PGPROC
 * can be given to another process): readers sum the slots as they are,
 * and a reset leaves gauges alone.
 *
 * Without shared_preload_libraries a backend counts into a slot of its own
 * that nobody reads; rlock_stats then reports that it needs preloading.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/timestamp.h"

#include "base/base.h"

bool		stats_quiet = false;

/* A slot padded to whole cache lines, so that no two processes share one. */
typedef union PaddedStatsSlot
{
	RlockStatsSlot slot;
	char		pad[TYPEALIGN(PG_CACHE_LINE_SIZE, sizeof(RlockStatsSlot))];
} PaddedStatsSlot;

typedef struct RlockStatsShared
{
	slock_t		mutex;			/* protects baseline and reset_at */
	uint64		baseline[RLOCK_NUM_STATS];
	TimestampTz reset_at;
	int			nslots;
} RlockStatsShared;

RlockStatsSlot *stats_my_slot = NULL;

static RlockStatsShared *stats_shared = NULL;
static PaddedStatsSlot *stats_slots = NULL;
static RlockStatsSlot local_slot;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void
init_slot(RlockStatsSlot *slot)
{
	for (int i = 0; i < RLOCK_NUM_STATS; i++)
		pg_atomic_init_u64(&slot->c[i], 0);
}

/* One slot per PGPROC that can run rlock code: backends and workers. */
static int
stats_nslots(void)
{
	return rlock_max_backends();
}

static void
stats_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(add_size(MAXALIGN(sizeof(RlockStatsShared)),
									mul_size(stats_nslots(),
											 sizeof(PaddedStatsSlot))));
}

static void
stats_shmem_startup(void)
{
	bool		found;
	bool		found_slots;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	stats_shared = ShmemInitStruct("rlock stats", sizeof(RlockStatsShared),
								   &found);
	stats_slots = ShmemInitStruct("rlock stats slots",
								  mul_size(stats_nslots(),
										   sizeof(PaddedStatsSlot)),
								  &found_slots);
	if (!found)
	{
		SpinLockInit(&stats_shared->mutex);
		memset(stats_shared->baseline, 0, sizeof(stats_shared->baseline));
		stats_shared->reset_at = GetCurrentTimestamp();
		stats_shared->nslots = stats_nslots();
		for (int i = 0; i < stats_shared->nslots; i++)
			init_slot(&stats_slots[i].slot);
	}
	LWLockRelease(AddinShmemInitLock);
}

void
stats_install_hooks(void)
{
	RLOCK_SHMEM_REQUEST(prev_shmem_request_hook, stats_shmem_request);
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = stats_shmem_startup;
}

/* Find this process's slot (first count of the process). */
RlockStatsSlot *
stats_attach(void)
{
	if (stats_shared != NULL && MyProc != NULL &&
		RLOCK_MY_PROC_NUMBER >= 0 &&
		RLOCK_MY_PROC_NUMBER < stats_shared->nslots)
		stats_my_slot = &stats_slots[RLOCK_MY_PROC_NUMBER].slot;
	else
	{
		init_slot(&local_slot);
		stats_my_slot = &local_slot;
	}
	return stats_my_slot;
}

void
stats_add_elapsed(RlockStat s, TimestampTz start)
{
	TimestampTz now = GetCurrentTimestamp();

	if (now > start)
		stats_add(s, (uint64) (now - start));
}

static void
sum_slots(uint64 *values)
{
	memset(values, 0, sizeof(uint64) * RLOCK_NUM_STATS);
	for (int i = 0; i < stats_shared->nslots; i++)
		for (int s = 0; s < RLOCK_NUM_STATS; s++)
			values[s] += pg_atomic_read_u64(&stats_slots[i].slot.c[s]);
}

/*
 * The counters since the last reset.  The caller has made sure that rlock
 * is preloaded.
 */
void
stats_read(uint64 *values, TimestampTz *reset_at)
{
	uint64		baseline[RLOCK_NUM_STATS];

	Assert(stats_shared != NULL);
	SpinLockAcquire(&stats_shared->mutex);
	memcpy(baseline, stats_shared->baseline, sizeof(baseline));
	*reset_at = stats_shared->reset_at;
	SpinLockRelease(&stats_shared->mutex);

	sum_slots(values);
	for (int s = 0; s < RLOCK_NUM_STATS; s++)
		if (!stats_is_gauge(s))
			values[s] = (values[s] > baseline[s]) ? values[s] - baseline[s] : 0;
}

/* Start counting from zero: the current sums become the baseline. */
void
stats_reset(void)
{
	uint64		values[RLOCK_NUM_STATS];

	Assert(stats_shared != NULL);
	sum_slots(values);
	SpinLockAcquire(&stats_shared->mutex);
	memcpy(stats_shared->baseline, values, sizeof(values));
	stats_shared->reset_at = GetCurrentTimestamp();
	SpinLockRelease(&stats_shared->mutex);
}
