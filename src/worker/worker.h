/*-------------------------------------------------------------------------
 *
 * worker.h
 *	  The door of src/worker/: the background worker beside the SQL entry
 *	  points; src/rlock.c registers it.
 *
 *	  Its files, lowest first (each calls only those above it in the list):
 *	  stranded.c	finishes the releases that could not reach Redis
 *					(stranded: registry_strand.c)
 *	  holds_file.c	pg_stat_tmp/rlock_holds: what the server's sessions
 *					hold, where a crash restart finds it
 *	  crash_cleanup.c	after a crash restart, releases the dead
 *					instance's holds listed in that file
 *	  announce.c	the server's announcement on its Redis
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
#include "datatype/timestamp.h"

#include "base/base.h"

/* holds_file.c: the file of holds, as read back */
typedef struct HoldsFileEntry
{
	RlockKind	kind;
	int			pid;
	int			holds;
	int64		renew_lease_ms; /* > 0: renewed by the watchdog */
	int64		until_ms;		/* a fixed lease's expiry, epoch ms; 0 none */
	char	   *key;
} HoldsFileEntry;

typedef struct HoldsFile
{
	char	   *uuid;			/* the instance that wrote it */
	int			postmaster_pid;
	char	   *host;
	char	   *datadir;
	int			nholds;
	HoldsFileEntry *holds;
} HoldsFile;

extern const char *holds_file_host(void);
extern void holds_file_refresh(void);
extern void holds_file_remove(void);
extern bool holds_file_read(HoldsFile *hf);
extern const char *holds_file_swap_instance(void);

/* crash_cleanup.c */
extern void crash_cleanup_load(void);
extern bool crash_cleanup_run(TimestampTz cap);
extern bool crash_cleanup_pending(void);
extern const char *crash_cleanup_previous_uuid(void);

/* announce.c */
extern void announce_refresh(TimestampTz cap);

/* stranded.c */
extern void stranded_start(void);
extern long stranded_run(void);

/* watchdog.c */
extern void watchdog_register(void);
extern PGDLLEXPORT void rlock_watchdog_main(Datum arg);

#endif							/* RLOCK_WORKER_H */
