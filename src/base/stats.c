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
 * The wait and hold histograms (rlock_stats_histograms) are more cells of
 * the same slots: per kind and measure, a count per bucket and a sum, all
 * added to the same way (one bucket's count and the sum, two atomics, per
 * observation).  Readers make the buckets cumulative.
 *
 * The counters outlive a clean restart: the postmaster saves what readers
 * see when it shuts down cleanly (stats_file.c) and the next start adds
 * what it loads to every reader's sums, reset time included.  Readers
 * therefore see slots + offset, where offset is what was loaded minus the
 * sums at the last reset (unsigned arithmetic: the result is never below
 * zero, for slots only grow).  A crash restart saves nothing, and the file
 * was removed when it was loaded: after a crash every counter starts at
 * zero (reset_at the restart).  An immediate shutdown does save them: its
 * postmaster exits normally once its children are gone, and what they
 * counted is all in shared memory.  Gauges are neither saved nor offset.
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
#include "storage/lwlock.h"
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
	slock_t		mutex;			/* protects offset and reset_at */
	uint64		offset[RLOCK_NUM_CELLS];	/* added to the slots' sums */
	TimestampTz reset_at;
	int			nslots;
} RlockStatsShared;

/* The buckets' upper bounds, in microseconds (then +Inf). */
static const int64 hist_bounds_us[RLOCK_HIST_BUCKETS - 1] = {
	1000, 5000, 10000, 50000, 100000, 500000,
	INT64CONST(1000000), INT64CONST(5000000), INT64CONST(10000000),
	INT64CONST(60000000), INT64CONST(300000000), INT64CONST(3600000000)
};

/*
 * The histograms' kinds: RlockKind's names (as rlock_locks shows them: the
 * holds layer's rlock_kind_name reads them here), then two that only wait.
 */
static const char *const hist_kind_names[RLOCK_HIST_KINDS] = {
	[RLOCK_KIND_EXCLUSIVE] = "exclusive",
	[RLOCK_KIND_READ] = "read",
	[RLOCK_KIND_WRITE] = "write",
	[RLOCK_KIND_FAIR] = "fair",
	[RLOCK_KIND_REDLOCK] = "redlock",
	[RLOCK_KIND_SEMAPHORE] = "semaphore",
	[RLOCK_HIST_MULTI] = "multi",
	[RLOCK_HIST_LATCH] = "latch",
};

RlockStatsSlot *stats_my_slot = NULL;

static RlockStatsShared *stats_shared = NULL;
static PaddedStatsSlot *stats_slots = NULL;
static RlockStatsSlot local_slot;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void stats_shmem_shutdown(int code, Datum arg);

static void
init_slot(RlockStatsSlot *slot)
{
	for (int i = 0; i < RLOCK_NUM_CELLS; i++)
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
		memset(stats_shared->offset, 0, sizeof(stats_shared->offset));
		stats_shared->reset_at = GetCurrentTimestamp();
		stats_shared->nslots = stats_nslots();
		for (int i = 0; i < stats_shared->nslots; i++)
			init_slot(&stats_slots[i].slot);

		/*
		 * The postmaster (at its start, or again after a crash): what a clean
		 * shutdown saved, once; the file is gone after a crash.
		 */
		if (!IsUnderPostmaster &&
			stats_file_read(stats_shared->offset, RLOCK_NUM_CELLS,
							&stats_shared->reset_at))
		{
			for (int s = 0; s < RLOCK_NUM_STATS; s++)
				if (stats_is_gauge(s))
					stats_shared->offset[s] = 0;
		}
	}
	LWLockRelease(AddinShmemInitLock);

	/*
	 * The postmaster saves the counters when it exits (each initialisation
	 * registers it again: a crash restart's shmem_exit clears the list).
	 */
	if (!IsUnderPostmaster)
		on_shmem_exit(stats_shmem_shutdown, (Datum) 0);
}

/* The postmaster's exit: save the counters, unless it crashed. */
static void
stats_shmem_shutdown(int code, Datum arg)
{
	uint64		cells[RLOCK_NUM_CELLS];
	TimestampTz reset_at;

	/*
	 * Only the postmaster's own exit, and a normal one: a crash restart calls
	 * shmem_exit() itself (proc_exit is not under way), and shared memory
	 * may then hold anything.
	 */
	if (code != 0 || !proc_exit_inprogress || stats_shared == NULL)
		return;
	stats_read_cells(cells, &reset_at);
	for (int s = 0; s < RLOCK_NUM_STATS; s++)
		if (stats_is_gauge(s))
			cells[s] = 0;
	stats_file_write(cells, RLOCK_NUM_CELLS, reset_at);
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
	memset(values, 0, sizeof(uint64) * RLOCK_NUM_CELLS);
	for (int i = 0; i < stats_shared->nslots; i++)
		for (int s = 0; s < RLOCK_NUM_CELLS; s++)
			values[s] += pg_atomic_read_u64(&stats_slots[i].slot.c[s]);
}

/*
 * Every cell since the last reset (what was loaded at start included).
 * The caller has made sure that rlock is preloaded.
 */
void
stats_read_cells(uint64 *cells, TimestampTz *reset_at)
{
	uint64		offset[RLOCK_NUM_CELLS];

	Assert(stats_shared != NULL);
	SpinLockAcquire(&stats_shared->mutex);
	memcpy(offset, stats_shared->offset, sizeof(offset));
	*reset_at = stats_shared->reset_at;
	SpinLockRelease(&stats_shared->mutex);

	sum_slots(cells);
	for (int s = 0; s < RLOCK_NUM_CELLS; s++)
	{
		if (s < RLOCK_NUM_STATS && stats_is_gauge(s))
			continue;
		/* (modulo 2^64: the offset may be "negative", never the result) */
		cells[s] += offset[s];
		if ((int64) cells[s] < 0)
			cells[s] = 0;
	}
}

/* The counters (RLOCK_NUM_STATS of them) since the last reset. */
void
stats_read(uint64 *values, TimestampTz *reset_at)
{
	uint64		cells[RLOCK_NUM_CELLS];

	stats_read_cells(cells, reset_at);
	memcpy(values, cells, sizeof(uint64) * RLOCK_NUM_STATS);
}

/*
 * Start counting from zero: minus the current sums become the offset (what
 * was loaded at start goes too).
 */
void
stats_reset(void)
{
	uint64		values[RLOCK_NUM_CELLS];

	Assert(stats_shared != NULL);
	sum_slots(values);
	for (int s = 0; s < RLOCK_NUM_CELLS; s++)
		values[s] = -values[s];
	SpinLockAcquire(&stats_shared->mutex);
	memcpy(stats_shared->offset, values, sizeof(values));
	stats_shared->reset_at = GetCurrentTimestamp();
	SpinLockRelease(&stats_shared->mutex);
}

/* ----------------------------------------------------------------
 * The wait and hold histograms
 * ----------------------------------------------------------------
 */

/* Count one observation of us microseconds in this process's slot. */
void
stats_observe(int hkind, RlockMeasure m, int64 us)
{
	RlockStatsSlot *slot;
	int			cell;
	int			b = 0;

	if (hkind < 0 || hkind >= RLOCK_HIST_KINDS || !stats_hist_has(hkind, m))
		return;
	if (us < 0)
		us = 0;
	while (b < RLOCK_HIST_BUCKETS - 1 && us > hist_bounds_us[b])
		b++;
	slot = stats_slot();
	cell = stats_hist_cell(hkind, m);
	pg_atomic_fetch_add_u64(&slot->c[cell + b], 1);
	pg_atomic_fetch_add_u64(&slot->c[cell + RLOCK_HIST_SUM], (uint64) us);
}

/* ... of the time elapsed since start (a GetCurrentTimestamp()) */
void
stats_observe_since(int hkind, RlockMeasure m, TimestampTz start)
{
	stats_observe(hkind, m, (int64) (GetCurrentTimestamp() - start));
}

const char *
stats_hist_kind_name(int hkind)
{
	if (hkind < 0 || hkind >= RLOCK_HIST_KINDS)
		return "unknown";
	return hist_kind_names[hkind];
}

/* A multi-lock's set and a latch are waited for, never held as such. */
bool
stats_hist_has(int hkind, RlockMeasure m)
{
	return m == RLOCK_MEASURE_WAIT || hkind < RLOCK_NUM_KINDS;
}

/* A bucket's upper bound in microseconds; -1 for the last one, +Inf. */
int64
stats_hist_bound_us(int bucket)
{
	if (bucket < 0 || bucket >= RLOCK_HIST_BUCKETS - 1)
		return -1;
	return hist_bounds_us[bucket];
}
