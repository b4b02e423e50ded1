/*-------------------------------------------------------------------------
 *
 * worker/worker.h
 *	  DOOR-DESCRIPTION
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
