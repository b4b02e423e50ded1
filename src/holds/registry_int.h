/*-------------------------------------------------------------------------
 *
 * registry_int.h
 *	  The inside of the registry of held locks, shared by registry.c (its
 *	  shared memory and each backend's own entries) and registry_read.c
 *	  (rlock_locks and the watchdog) only.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_REGISTRY_INT_H
#define RLOCK_REGISTRY_INT_H

#include "port/atomics.h"
#include "storage/lwlock.h"
#include "utils/hsearch.h"

#include "holds/holds.h"

typedef struct RlockShared
{
	LWLock	   *lock;			/* protects the hash */
	char		instance_uuid[37];
	pg_atomic_uint32 nstranded; /* entries in state REGISTRY_STRANDED */
	struct Latch *worker_latch; /* the worker's, set when stranding */
	TimestampTz instance_started;	/* when shared memory was initialised */
} RlockShared;

extern RlockShared *rlock_shared;
extern HTAB *registry_hash;

/* The hash key of (pid, kind, key). */
static inline void
registry_make_tag(RegistryEntry *tag, int pid, RlockKind kind,
				  const char *key)
{
	tag->pid = pid;
	tag->kind = kind;
	strlcpy(tag->key, key, sizeof(tag->key));
}

/*
 * An entry stops being held (released to zero, removed, stranded or found
 * lost): its hold time goes to the kind's histogram, once per holding
 * (a reentrant hold's levels are one holding; a lost or stranded entry
 * counted already).
 */
static inline void
registry_hold_ends(const RegistryEntry *e)
{
	if (e->state == REGISTRY_HELD && e->session_count + e->xact_count > 0)
		stats_observe_since(e->kind, RLOCK_MEASURE_HOLD, e->acquired_at);
}

#endif							/* RLOCK_REGISTRY_INT_H */
