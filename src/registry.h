/*-------------------------------------------------------------------------
 *
 * registry.h
 *	  rlock's shared memory: the instance identity and the registry of the
 *	  locks held by every session of this server.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_REGISTRY_H
#define RLOCK_REGISTRY_H

#include "datatype/timestamp.h"

#include "rlock.h"

/* State of a registered lock. */
typedef enum RegistryState
{
	REGISTRY_HELD = 0,
	REGISTRY_LOST
} RegistryState;

/* A registered lock (what rlock_locks shows). */
typedef struct RegistryEntry
{
	/* hash key: backend, kind and lock key (NUL-terminated) */
	int			pid;
	RlockKind	kind;
	char		key[RLOCK_MAX_KEY_LEN + 1];

	Oid			dboid;
	RegistryState state;
	bool		watchdog;		/* some hold is renewed by the watchdog */
	int			session_count;
	int			xact_count;
	int64		lease_ms;		/* lease of the last acquisition */
	TimestampTz acquired_at;	/* 0 while reserved, not yet held */
	TimestampTz renewed_at;		/* 0 when never renewed */
} RegistryEntry;

/* One lock to renew, as copied out of the registry by the watchdog. */
typedef struct RenewItem
{
	int			pid;
	RlockKind	kind;
	TimestampTz acquired_at;	/* identifies this holding of the lock */
	char	   *key;			/* palloc'd copy */
} RenewItem;

extern int	rlock_max_locks;

extern void registry_install_hooks(void);
extern bool registry_available(void);
extern void registry_require(const char *what);
extern const char *rlock_backend_holder(void);
extern const char *registry_instance_uuid(void);

/* Backends: their own entries. */
extern void registry_reserve(const char *key, RlockKind kind);
extern void registry_sync(const char *key, RlockKind kind, int session_count,
						  int xact_count, bool watchdog, int64 lease_ms);
extern void registry_remove(const char *key, RlockKind kind);
extern void registry_remove_backend(void);
extern bool registry_is_lost(const char *key, RlockKind kind);

/* Readers (rlock_locks). */
extern int	registry_snapshot(RegistryEntry **entries);

/* The watchdog. */
extern int	registry_renewal_snapshot(RenewItem **items);
extern void registry_renewed(RenewItem *items, const bool *held, int n,
							 TimestampTz now, bool cancel_on_lost);

#endif							/* RLOCK_REGISTRY_H */
