/*-------------------------------------------------------------------------
 *
 * lock_exclusive.h
 *	  The exclusive reentrant lock (Redisson RLock) and its fenced variant
 *	  (Redisson RFencedLock).
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_LOCK_EXCLUSIVE_H
#define RLOCK_LOCK_EXCLUSIVE_H

#include "holds.h"
#include "lockname.h"

/* How the held-lock table releases and reconciles exclusive locks. */
extern const RlockKindOps exclusive_ops;

/*
 * Acquire.  lease_ms 0 = watchdog lease; wait_ms 0 = one attempt, -1 = no
 * limit; owner NULL = this backend's holder identity (and the hold is
 * recorded in the held-lock table).  honour_lock_timeout arms lock_timeout
 * for the wait, as a blocking lock acquisition does.  token non-NULL makes
 * it a fenced acquisition, which sets *token when it succeeds.
 */
extern bool exclusive_acquire(const LockName *ln, RlockScope scope,
							  int64 lease_ms, int64 wait_ms,
							  const char *owner, bool honour_lock_timeout,
							  int64 *token);
extern void exclusive_build_acquire(RedisCmd *cmd, const LockName *ln,
									int64 lease_ms, const char *holder,
									bool fenced);
extern void exclusive_refused(const LockName *ln, const AcquireResult *res);
extern void exclusive_build_reconcile(RedisCmd *cmd, RlockKind kind,
									  const char *key, const char *holder,
									  int target);
extern bool exclusive_token(const LockName *ln, int64 *token);
extern bool exclusive_force_release(const LockName *ln);

#endif							/* RLOCK_LOCK_EXCLUSIVE_H */
