/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  What differs between the PostgreSQL versions rlock builds against.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_COMPAT_H
#define RLOCK_COMPAT_H

#include "storage/latch.h"
#include "utils/memutils.h"

/* A wait event set that outlives the current statement. */
#if PG_VERSION_NUM >= 170000
#define RLOCK_CREATE_WAIT_EVENT_SET(nevents) \
	CreateWaitEventSet(NULL, (nevents))
#else
#define RLOCK_CREATE_WAIT_EVENT_SET(nevents) \
	CreateWaitEventSet(TopMemoryContext, (nevents))
#endif

#endif							/* RLOCK_COMPAT_H */
