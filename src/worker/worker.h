/*-------------------------------------------------------------------------
 *
 * worker.h
 *	  The door of src/worker/: the background worker beside the SQL entry
 *	  points; src/rlock.c registers it.
 *
 *	  stranded.c	finishes the releases that could not reach Redis
 *					(stranded: registry_strand.c)
 *	  watchdog.c	renews the leases of the locks the server's sessions
 *					hold, and finds the ones lost; calls stranded.c
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_WORKER_H
#define RLOCK_WORKER_H

#include "fmgr.h"

/* stranded.c */
extern void stranded_start(void);
extern long stranded_run(void);

/* watchdog.c */
extern void watchdog_register(void);
extern PGDLLEXPORT void rlock_watchdog_main(Datum arg);

#endif							/* RLOCK_WORKER_H */
