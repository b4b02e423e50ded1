/*-------------------------------------------------------------------------
 *
 * lock_fair.h
 *	  The fair lock (Redisson's fair lock): waiters acquire in FIFO order.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_LOCK_FAIR_H
#define RLOCK_LOCK_FAIR_H

#include "holds.h"
#include "lockname.h"

/* How the held-lock table releases and reconciles fair locks. */
extern const RlockKindOps fair_ops;

/* Arguments as for exclusive_acquire; released with holds_release(). */
extern bool fair_acquire(const LockName *ln, RlockScope scope, int64 lease_ms,
						 int64 wait_ms, const char *owner,
						 bool honour_lock_timeout);

#endif							/* RLOCK_LOCK_FAIR_H */
