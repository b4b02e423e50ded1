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
#include "port/atomics.h"

#include "rlock.h"

/* State of a registered lock. */
typedef enum RegistryState
{
	REGISTRY_HELD = 0,
	REGISTRY_LOST
} RegistryState;

/* A registered lock (the hash entry). */
typedef struct RegistryEntry
{
	/* hash key: backend, kind and lock key (NUL-terminated) */
	int			pid;
	RlockKind	kind;
	char		key[RLOCK_MAX_KEY_LEN + 1];

	Oid			dboid;
	RegistryState state;
	int			session_count;
	int			xact_count;
	int64		lease_ms;		/* lease of the last acquisition */
	int64		renew_lease_ms; /* > 0: the watchdog renews it with this lease */
	TimestampTz acquired_at;
	TimestampTz renewed_at;		/* 0 when never renewed */
	TimestampTz expires_at;		/* earliest moment Redis may let it expire */

	/*
	 * Bumped when a release is sent and again when its outcome is recorded:
	 * odd while one is in flight.  The watchdog does not take "Redis no
	 * longer has it" for a loss when it changed (or is odd): the holder may
	 * have released it meanwhile.  Atomic, so that marking a release takes
	 * the registry's lock only in shared mode.
	 */
	pg_atomic_uint32 release_seq;
	/* holds left once the release in flight is done (rlock_locks) */
	pg_atomic_uint32 releasing_to;
} RegistryEntry;

/* What rlock_locks shows of an entry (copied out of shared memory). */
typedef struct RegistryRow
{
	int			pid;
	RlockKind	kind;
	Oid			dboid;
	RegistryState state;
	int			session_count;
	int			xact_count;
	int64		lease_ms;
	TimestampTz acquired_at;
	TimestampTz renewed_at;
	char	   *key;			/* palloc'd copy */
} RegistryRow;

/* One lock for the watchdog, as copied out of the registry. */
typedef struct RenewItem
{
	int			pid;
	RlockKind	kind;
	TimestampTz acquired_at;	/* identifies this holding of the lock */
	int64		renew_lease_ms; /* 0: a fixed lease, only checked */
	TimestampTz expires_at;
	uint32		release_seq;	/* the entry's release_seq when copied */
	char	   *key;			/* palloc'd copy */
} RenewItem;

/* Outcome of one lock in a watchdog cycle. */
typedef enum RenewOutcome
{
	RENEW_UNKNOWN = 0,			/* not asked, or no answer: leave it */
	RENEW_HELD,					/* Redis still has it (renewed if renewable) */
	RENEW_GONE,					/* Redis no longer has it */
	RENEW_EXPIRED,				/* its fixed lease ran out */
	RENEW_NOT_RENEWED			/* renewal failed for too long */
} RenewOutcome;

extern int	rlock_max_locks;

extern void registry_install_hooks(void);
extern bool registry_available(void);
extern void registry_require(const char *what);
extern const char *rlock_backend_holder(void);
extern const char *registry_instance_uuid(void);

/* Backends: their own entries. */
extern bool registry_sync(const char *key, RlockKind kind, int session_count,
						  int xact_count, int64 lease_ms,
						  int64 renew_lease_ms, TimestampTz expires_at);
extern void registry_remove(const char *key, RlockKind kind);
extern void registry_releasing(const char *key, RlockKind kind,
							   int remaining);
extern void registry_remove_backend(void);
extern bool registry_is_lost(const char *key, RlockKind kind);

/* Readers (rlock_locks). */
extern int	registry_snapshot(RegistryRow **rows);

/* The watchdog. */
extern int	registry_renewal_snapshot(RenewItem **items);
extern void registry_renewed(RenewItem *items, const RenewOutcome *outcome,
							 const int64 *ttl_ms, int n, TimestampTz sent_at,
							 bool cancel_on_lost);
extern TimestampTz registry_fail_closed_at(int64 renew_lease_ms,
										   TimestampTz expires_at);

#endif							/* RLOCK_REGISTRY_H */
