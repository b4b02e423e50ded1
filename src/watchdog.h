/*-------------------------------------------------------------------------
 *
 * watchdog.h
 *	  The background worker that renews the leases of locks taken without
 *	  a lease.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_WATCHDOG_H
#define RLOCK_WATCHDOG_H

#include "fmgr.h"

extern void watchdog_register(void);
extern PGDLLEXPORT void rlock_watchdog_main(Datum arg);

#endif							/* RLOCK_WATCHDOG_H */
