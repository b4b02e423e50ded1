/*-------------------------------------------------------------------------
 *
 * registry.c
 *	  rlock's shared memory, reserved when rlock is preloaded: the instance
 *	  identity, and the registry of every lock held by every session of
 *	  this server.
 *
 * The instance UUID is generated each time shared memory is initialised:
 * so it differs between servers and changes after a crash-restart, and a
 * backend pid reused after a crash can never re-enter a stale lock.  A
 * backend's holder identity is "<uuid>:<pid>" (SPEC.md section 3), the shape
 * of Redisson's "<client uuid>:<thread id>".  Without
 * shared_preload_libraries there is no shared memory; each backend then
 * makes up a UUID of its own, which is just as unique.
 *
 * The registry is a shared hash table, sized by rlock.max_locks, with one
 * entry per (backend, lock).  Each backend keeps its own entries in step
 * with its held-lock table (holds_table.c); the watchdog worker reads them
 * to renew leases and marks the ones it finds gone as lost; rlock_locks
 * shows them (registry_read.c).  One LWLock protects it, and it is never held
 * across Redis I/O: readers copy what they need and let go.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

#include "holds/holds.h"
#include "holds/holds_int.h"
#include "holds/registry_int.h"
#include "base/base.h"

int			rlock_max_locks = 10000;

RlockShared *rlock_shared = NULL;
HTAB	   *registry_hash = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static char backend_holder[64];

#define REGISTRY_TAG_SIZE	offsetof(RegistryEntry, dboid)

static void
format_uuid(char *out, const uint8 *b)
{
	static const char hex[] = "0123456789abcdef";
	int			o = 0;

	for (int i = 0; i < 16; i++)
	{
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[o++] = '-';
		out[o++] = hex[b[i] >> 4];
		out[o++] = hex[b[i] & 0x0f];
	}
	out[o] = '\0';
}

static void
generate_uuid(char *out)
{
	uint8		b[16];

	if (!pg_strong_random(b, sizeof(b)))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate random rlock instance identity")));
	b[6] = (b[6] & 0x0f) | 0x40;	/* version 4 */
	b[8] = (b[8] & 0x3f) | 0x80;	/* variant 1 */
	format_uuid(out, b);
}

/*
 * The hash key is (pid, kind, key) with the key NUL-terminated: hash and
 * compare only the bytes in use, not the whole 1 kB buffer.  (One session
 * may hold one name as two kinds: the read and the write side of a
 * read/write lock.)
 */
static uint32
registry_tag_hash(const void *key, Size keysize)
{
	const RegistryEntry *tag = key;

	return hash_combine(murmurhash32((uint32) tag->pid * 8 + (uint32) tag->kind),
						hash_bytes((const unsigned char *) tag->key,
								   strlen(tag->key)));
}

static int
registry_tag_match(const void *key1, const void *key2, Size keysize)
{
	const RegistryEntry *a = key1;
	const RegistryEntry *b = key2;

	if (a->pid != b->pid || a->kind != b->kind)
		return 1;
	return strcmp(a->key, b->key);
}

static void *
registry_tag_copy(void *dest, const void *src, Size keysize)
{
	RegistryEntry *d = dest;
	const RegistryEntry *t = src;

	d->pid = t->pid;
	d->kind = t->kind;
	strlcpy(d->key, t->key, sizeof(d->key));
	return dest;
}

/*
 * Entries the registry has room for: rlock.max_locks held locks, and room
 * for lost ones that linger until their session hears of the loss (its
 * next call on the name), so that they do not keep others from locking.
 */
static long
registry_capacity(void)
{
	return (long) rlock_max_locks + Max(rlock_max_locks / 4, 64);
}

static Size
registry_shmem_size(void)
{
	return add_size(add_size(MAXALIGN(sizeof(RlockShared)),
							 hash_estimate_size(registry_capacity(),
												sizeof(RegistryEntry))),
					registry_cancel_shmem_size());
}

/*
 * Whether this backend's acquisitions may use the entries reserved for
 * superusers: set before each acquisition (holds_quota.c), where the
 * catalog may be read; registry_sync, which may run where it may not,
 * only looks at it.
 */
static bool registry_superuser = false;

void
registry_set_superuser(bool superuser)
{
	registry_superuser = superuser;
}

/*
 * Held locks the registry takes for a superuser, or for others: all but
 * rlock.superuser_reserved_locks (at most half of them), as
 * superuser_reserved_connections keeps connections, so that a role that
 * fills the registry cannot lock superusers out (SPEC 8).
 */
long
registry_limit(bool superuser)
{
	if (superuser)
		return rlock_max_locks;
	return rlock_max_locks - Min(rlock_superuser_reserved_locks,
								 rlock_max_locks / 2);
}

/*
 * Is there room for one more held lock (the caller holds the registry's
 * lock)?  rlock.max_locks counts held locks, not lost ones: those are
 * counted only when the registry is that full, which is rare.
 */
static bool
registry_has_room(void)
{
	long		n = hash_get_num_entries(registry_hash);
	long		limit = registry_limit(registry_superuser);
	HASH_SEQ_STATUS seq;
	RegistryEntry *e;

	if (n < limit)
		return true;
	if (n >= registry_capacity())
		return false;
	hash_seq_init(&seq, registry_hash);
	while ((e = hash_seq_search(&seq)) != NULL)
	{
		if (e->state == REGISTRY_LOST ||
			e->session_count + e->xact_count == 0)
			n--;
	}
	return n < limit;
}

static void
registry_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(registry_shmem_size());
	RequestNamedLWLockTranche("rlock", 1);
}

static void
registry_shmem_startup(void)
{
	bool		found;
	HASHCTL		ctl;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	rlock_shared = NULL;
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	rlock_shared = ShmemInitStruct("rlock", sizeof(RlockShared), &found);
	if (!found)
	{
		rlock_shared->lock = &(GetNamedLWLockTranche("rlock"))->lock;
		generate_uuid(rlock_shared->instance_uuid);
		pg_atomic_init_u32(&rlock_shared->nstranded, 0);
		rlock_shared->worker_latch = NULL;
		rlock_shared->instance_started = GetCurrentTimestamp();
	}
	ctl.keysize = REGISTRY_TAG_SIZE;
	ctl.entrysize = sizeof(RegistryEntry);
	ctl.hash = registry_tag_hash;
	ctl.match = registry_tag_match;
	ctl.keycopy = registry_tag_copy;
	registry_hash = ShmemInitHash("rlock registry",
								  registry_capacity(), registry_capacity(),
								  &ctl, HASH_ELEM | HASH_FUNCTION | HASH_COMPARE |
								  HASH_KEYCOPY);
	registry_cancel_shmem_init();
	LWLockRelease(AddinShmemInitLock);
}

void
registry_install_hooks(void)
{
	RLOCK_SHMEM_REQUEST(prev_shmem_request_hook, registry_shmem_request);
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = registry_shmem_startup;
	registry_cancel_install_hook();
}

bool
registry_available(void)
{
	return rlock_shared != NULL;
}

/* ERROR unless rlock was preloaded; "what" needs it. */
void
registry_require(const char *what)
{
	if (rlock_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s requires rlock to be preloaded", what),
				 errhint("Add rlock to shared_preload_libraries in postgresql.conf and restart the server.")));
}

const char *
registry_instance_uuid(void)
{
	return rlock_shared ? rlock_shared->instance_uuid : NULL;
}

/* When this instance (its shared memory) began; 0 without preloading. */
TimestampTz
registry_instance_started(void)
{
	return rlock_shared ? rlock_shared->instance_started : 0;
}

/* This backend's holder identity, "<instance uuid>:<pid>". */
const char *
rlock_backend_holder(void)
{
	if (backend_holder[0] == '\0')
	{
		char		uuid[37];

		if (rlock_shared != NULL)
			memcpy(uuid, rlock_shared->instance_uuid, sizeof(uuid));
		else
			generate_uuid(uuid);
		snprintf(backend_holder, sizeof(backend_holder), "%s:%d",
				 uuid, MyProcPid);
	}
	return backend_holder;
}

/* ----------------------------------------------------------------
 * A backend's own entries
 * ----------------------------------------------------------------
 */

/*
 * Record this backend's holds of key (after they changed), creating its
 * entry when the first hold is granted: waiting for a lock never takes
 * room in the registry.  Returns false, recording nothing, when the
 * registry is full (rlock.max_locks); the caller then gives the hold back.
 * expires_at is the earliest moment Redis may let the lock expire (the
 * start of the round trip that last set its TTL, plus that TTL).
 */
bool
registry_sync(const char *key, RlockKind kind, int session_count,
			  int xact_count, int64 lease_ms, int64 renew_lease_ms,
			  TimestampTz expires_at)
{
	RegistryEntry tag;
	RegistryEntry *e;
	bool		found = false;
	bool		held = session_count + xact_count > 0;

	if (registry_hash == NULL)
		return true;
	registry_make_tag(&tag, MyProcPid, kind, key);
	LWLockAcquire(rlock_shared->lock, LW_EXCLUSIVE);
	e = hash_search(registry_hash, &tag, HASH_FIND, NULL);

	/*
	 * A shared hash can grow into spare shared memory past its nominal size;
	 * rlock.max_locks is the capacity users configure, so enforce it.
	 */
	if (e == NULL && held && registry_has_room())
		e = hash_search(registry_hash, &tag, HASH_ENTER_NULL, &found);
	else
		found = (e != NULL);
	/*
	 * A release of this name still stranded (registry_strand.c) belongs to
	 * the worker now: acquisitions refuse the name meanwhile
	 * (holds_refuse_stranded), so nothing of this session counts here.
	 */
	if (e == NULL || (found && e->state == REGISTRY_STRANDED))
	{
		LWLockRelease(rlock_shared->lock);
		return !held;
	}
	if (!found)
	{
		pg_atomic_init_u32(&e->release_seq, 0);
		pg_atomic_init_u32(&e->releasing_to, 0);
	}
	/*
	 * A lock held before keeps the later of the two expiries: the scripts
	 * never lower a held lock's TTL, and the watchdog's renewals have moved
	 * the registry's expiry on since the session last learned one.
	 */
	if (found && e->session_count + e->xact_count > 0 &&
		expires_at != 0 && expires_at < e->expires_at)
		expires_at = e->expires_at;
	if (found && !held)
		registry_hold_ends(e);
	if (!found || e->session_count + e->xact_count == 0)
	{
		e->dboid = MyDatabaseId;
		e->proc_slot = registry_cancel_slot();
		e->acquired_at = GetCurrentTimestamp();
		e->renewed_at = 0;
		e->state = REGISTRY_HELD;
	}
	e->session_count = session_count;
	e->xact_count = xact_count;
	e->lease_ms = lease_ms;
	e->renew_lease_ms = renew_lease_ms;
	if (expires_at != 0)
		e->expires_at = expires_at;
	/* what a release did is recorded now: no longer in flight */
	if (pg_atomic_read_u32(&e->release_seq) % 2 == 1)
		pg_atomic_fetch_add_u32(&e->release_seq, 1);
	LWLockRelease(rlock_shared->lock);
	return true;
}

/*
 * This backend is about to send a release of key: until registry_sync
 * records its outcome, a renewal that finds the lock gone proves nothing.
 * remaining: the holds left once it is done; at 0 rlock_locks no longer
 * shows the entry, for Redis may hand the lock on before the reply comes.
 */
void
registry_releasing(const char *key, RlockKind kind, int remaining)
{
	RegistryEntry tag;
	RegistryEntry *e;

	if (registry_hash == NULL)
		return;
	registry_make_tag(&tag, MyProcPid, kind, key);
	LWLockAcquire(rlock_shared->lock, LW_SHARED);
	e = hash_search(registry_hash, &tag, HASH_FIND, NULL);
	/* only this backend changes its entries' sequence: no race to odd */
	if (e != NULL && pg_atomic_read_u32(&e->release_seq) % 2 == 0)
	{
		pg_atomic_write_u32(&e->releasing_to, (uint32) Max(remaining, 0));
		pg_atomic_fetch_add_u32(&e->release_seq, 1);
	}
	LWLockRelease(rlock_shared->lock);
}

/*
 * When a lock must count as lost for want of a successful renewal (or
 * because its fixed lease ran out): a renewed lock a fifth of its lease
 * before the earliest moment Redis may expire it, so that the holder stops
 * believing in it before anyone else can take it; a fixed lease when it
 * runs out.
 */
TimestampTz
registry_fail_closed_at(int64 renew_lease_ms, TimestampTz expires_at)
{
	if (renew_lease_ms > 0)
		return expires_at - (renew_lease_ms / 5) * 1000;
	return expires_at;
}

void
registry_remove(const char *key, RlockKind kind)
{
	RegistryEntry tag;
	RegistryEntry *e;

	if (registry_hash == NULL)
		return;
	registry_make_tag(&tag, MyProcPid, kind, key);
	LWLockAcquire(rlock_shared->lock, LW_EXCLUSIVE);
	e = hash_search(registry_hash, &tag, HASH_FIND, NULL);
	/* (a stranded release is the worker's to remove) */
	if (e != NULL && e->state != REGISTRY_STRANDED)
	{
		registry_hold_ends(e);
		hash_search(registry_hash, &tag, HASH_REMOVE, NULL);
	}
	LWLockRelease(rlock_shared->lock);
}

/*
 * Backend exit: remove whatever entries of this backend remain, but the
 * stranded releases, which the worker finishes (registry_strand.c).
 */
void
registry_remove_backend(void)
{
	HASH_SEQ_STATUS seq;
	RegistryEntry *e;

	if (registry_hash == NULL)
		return;
	LWLockAcquire(rlock_shared->lock, LW_EXCLUSIVE);
	hash_seq_init(&seq, registry_hash);
	while ((e = hash_seq_search(&seq)) != NULL)
	{
		if (e->pid == MyProcPid && e->state != REGISTRY_STRANDED)
		{
			registry_hold_ends(e);
			hash_search(registry_hash, e, HASH_REMOVE, NULL);
		}
	}
	LWLockRelease(rlock_shared->lock);
}

/*
 * Is this backend's lock lost: found gone by the watchdog, or past the
 * moment it must count as lost (registry_fail_closed_at), which needs no
 * round trip to be known?
 */
bool
registry_is_lost(const char *key, RlockKind kind)
{
	RegistryEntry tag;
	RegistryEntry *e;
	bool		lost = false;

	if (registry_hash == NULL)
		return false;
	registry_make_tag(&tag, MyProcPid, kind, key);
	LWLockAcquire(rlock_shared->lock, LW_SHARED);
	e = hash_search(registry_hash, &tag, HASH_FIND, NULL);
	if (e != NULL && e->state != REGISTRY_STRANDED)
		lost = (e->state == REGISTRY_LOST ||
				(e->expires_at != 0 &&
				 GetCurrentTimestamp() >=
				 registry_fail_closed_at(e->renew_lease_ms, e->expires_at)));
	LWLockRelease(rlock_shared->lock);
	return lost;
}
