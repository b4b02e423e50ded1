/*-------------------------------------------------------------------------
 *
 * lock_rw.h
 *	  The read/write lock (Redisson RReadWriteLock).
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_LOCK_RW_H
#define RLOCK_LOCK_RW_H

#include "holds.h"
#include "lockname.h"

/* How the held-lock table releases and reconciles either side. */
extern const RlockKindOps read_ops;
extern const RlockKindOps write_ops;

/*
 * Acquire the read (kind RLOCK_KIND_READ) or the write side; arguments as
 * for exclusive_acquire.
 */
extern bool rw_acquire(const LockName *ln, RlockKind kind, RlockScope scope,
					   int64 lease_ms, int64 wait_ms, const char *owner,
					   bool honour_lock_timeout);

#endif							/* RLOCK_LOCK_RW_H */
