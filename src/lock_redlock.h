/*-------------------------------------------------------------------------
 *
 * lock_redlock.h
 *	  The Redlock: the exclusive lock on a majority of the independent
 *	  masters of rlock.redlock_urls (Redisson RedissonRedLock).
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_LOCK_REDLOCK_H
#define RLOCK_LOCK_REDLOCK_H

#include "holds.h"
#include "lockname.h"

/* How the held-lock table and the watchdog tell the masters. */
extern const RlockKindOps redlock_ops;

/*
 * Acquire.  lease_ms 0 = watchdog lease; wait_ms 0 = one attempt, -1 = no
 * limit.
 */
extern bool redlock_acquire(const LockName *ln, RlockScope scope,
							int64 lease_ms, int64 wait_ms,
							bool honour_lock_timeout);
extern bool redlock_release(const LockName *ln);

#endif							/* RLOCK_LOCK_REDLOCK_H */
