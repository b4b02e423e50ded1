/*-------------------------------------------------------------------------
 *
 * wait_slots.c
 *	  Shared memory of this server's waits (SPEC.md section 5.6): a slot
 *	  per backend saying what it waits for, so that rlock_waits,
 *	  rlock_blocking_pids and the deadlock check know this server's waits at
 *	  once, without Redis.
 *
 * Each slot is written by its owner alone (wait_graph.c) and read without
 * a lock, as PostgreSQL's backend status is: a change count, odd while the
 * owner writes, tells a reader to read again.  Without
 * shared_preload_libraries there are no slots: waits are known from Redis
 * alone.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/shmem.h"

#include "holds/holds.h"
#include "locks/locks.h"
#include "locks/locks_int.h"
#include "base/base.h"

typedef struct WaitGraphShared
{
	int			nslots;
	WaitGraphSlot slots[FLEXIBLE_ARRAY_MEMBER];
} WaitGraphShared;

static WaitGraphShared *wg = NULL;
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static Size
wait_graph_size(void)
{
	return add_size(offsetof(WaitGraphShared, slots),
					mul_size(rlock_max_backends(), sizeof(WaitGraphSlot)));
}

static void
wait_graph_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(wait_graph_size());
}

static void
wait_graph_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	wg = ShmemInitStruct("rlock wait graph", wait_graph_size(), &found);
	if (!found)
	{
		wg->nslots = rlock_max_backends();
		for (int i = 0; i < wg->nslots; i++)
		{
			pg_atomic_init_u32(&wg->slots[i].changecount, 0);
			wg->slots[i].pid = 0;
		}
	}
	LWLockRelease(AddinShmemInitLock);
}

void
wait_graph_install_hooks(void)
{
	RLOCK_SHMEM_REQUEST(prev_shmem_request_hook, wait_graph_shmem_request);
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = wait_graph_shmem_startup;
}

/* This backend's slot; NULL without shared memory. */
WaitGraphSlot *
wait_slots_mine(void)
{
	if (wg == NULL || MyProc == NULL || RLOCK_MY_PROC_NUMBER >= wg->nslots)
		return NULL;
	return &wg->slots[RLOCK_MY_PROC_NUMBER];
}

/*
 * Copy slot i into *out; false when it holds no wait (of pid's, unless pid
 * is 0).  An empty slot, or another session's, is not copied (most are:
 * the slots are scanned whole).  Retries while its owner writes it.
 */
bool
wait_graph_read_slot(int i, int pid, WaitGraphSlot *out)
{
	WaitGraphSlot *s;

	if (wg == NULL || i < 0 || i >= wg->nslots)
		return false;
	s = &wg->slots[i];
	for (int tries = 0; tries < 1000; tries++)
	{
		uint32		before = pg_atomic_read_u32(&s->changecount);
		uint32		after;

		int			owner;

		pg_read_barrier();
		owner = ((volatile WaitGraphSlot *) s)->pid;
		if ((before & 1) == 0 && (owner == 0 || (pid != 0 && owner != pid)))
			return false;
		if ((before & 1) == 0)
		{
			memcpy(out, s, sizeof(WaitGraphSlot));
			pg_read_barrier();
			after = pg_atomic_read_u32(&s->changecount);
			if (before == after)
				return out->pid != 0 && (pid == 0 || out->pid == pid);
		}
		CHECK_FOR_INTERRUPTS();
	}
	return false;
}

int
wait_graph_nslots(void)
{
	return wg == NULL ? 0 : wg->nslots;
}
