/*-------------------------------------------------------------------------
 *
 * worker.h
 *	  The door of src/worker/: the background worker beside the SQL entry
 *	  points; src/rlock.c registers it.
 *
 *	  watchdog.c	renews the leases of the locks the server's sessions
 *					hold, and finds the ones lost
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_WORKER_H
#define RLOCK_WORKER_H

#include "fmgr.h"

extern void watchdog_register(void);
extern PGDLLEXPORT void rlock_watchdog_main(Datum arg);

#endif							/* RLOCK_WORKER_H */
