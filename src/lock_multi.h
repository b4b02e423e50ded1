/*-------------------------------------------------------------------------
 *
 * lock_multi.h
 *	  The multi-lock (Redisson RedissonMultiLock): a set of exclusive
 *	  locks, held all or none.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_LOCK_MULTI_H
#define RLOCK_LOCK_MULTI_H

#include "lockname.h"

/* The most names one multi-lock takes. */
#define RLOCK_MAX_MULTI_NAMES	1000

/*
 * Acquire every one of the n distinct names, or none.  lease_ms 0 = the
 * watchdog's lease; wait_ms 0 = one attempt, -1 = no limit.
 */
extern bool multi_acquire(const LockName *lns, int n, RlockScope scope,
						  int64 lease_ms, int64 wait_ms,
						  bool honour_lock_timeout);
extern bool multi_release(const LockName *lns, int n);

#endif							/* RLOCK_LOCK_MULTI_H */
