/*-------------------------------------------------------------------------
 *
 * holds_quota.c
 *	  The per-session caps of a role that is not a superuser (SPEC.md
 *	  section 8): the locks a session holds at once
 *	  (rlock.max_locks_per_session), the semaphore permits it holds
 *	  (rlock.max_permits_per_session), its read holds of one lock,
 *	  re-entries included (rlock.max_read_holds_per_lock), and the holds it
 *	  takes for owner
 *	  tokens (rlock.max_owner_holds_per_session, each with a lease of at most
 *	  rlock.max_owner_lease).  So no role fills the shared registry, and no
 *	  role makes one Redis script slow for everyone: a semaphore's scripts
 *	  read its permits out, a read/write lock's the timeouts of its read
 *	  holds, and each session adds at most so many of them.
 *
 * Every acquisition asks here before its round trip (holds_acquire.c,
 * holds_set.c), so that nothing is taken in Redis and then refused.  This
 * is also where an acquisition learns whether it may use the registry's
 * entries reserved for superusers (registry.c).
 *
 * A session's own holds are counted from its table of holds.  Holds taken
 * for an owner token are not in that table: they outlive the session, and
 * anyone with the token may release them.  They are counted here, each
 * until its lease runs out or this session releases a hold of that lock
 * and kind for an owner token; the lease cap keeps the count meaningful
 * (what a role leaves in Redis expires within rlock.max_owner_lease).
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "holds/holds.h"
#include "holds/holds_int.h"
#include "base/base.h"

/* A hold this session took for an owner token. */
typedef struct OwnerHold
{
	uint32		keyhash;
	RlockKind	kind;
	TimestampTz expires_at;		/* when its lease runs out */
} OwnerHold;

static OwnerHold *owner_holds = NULL;
static int	n_owner_holds = 0;
static int	max_owner_holds = 0;

static uint32
quota_key_hash(const char *key)
{
	return hash_bytes((const unsigned char *) key, strlen(key));
}

/* How messages name a lock of a kind. */
static const char *
quota_label(RlockKind kind)
{
	if (kind == RLOCK_KIND_READ || kind == RLOCK_KIND_WRITE)
		return psprintf("%s lock", rlock_kind_name(kind));
	if (kind == RLOCK_KIND_SEMAPHORE)
		return "semaphore";
	if (kind == RLOCK_KIND_REDLOCK)
		return "Redlock";
	return "lock";
}

/* rlock.max_locks_per_session, its default (-1) worked out. */
static int
max_locks_per_session(void)
{
	if (rlock_max_locks_per_session >= 0)
		return rlock_max_locks_per_session;
	return Max(rlock_max_locks / 10, 1);
}

/* Forget the owner-token holds whose lease has run out. */
static void
prune_owner_holds(void)
{
	TimestampTz now = GetCurrentTimestamp();
	int			j = 0;

	for (int i = 0; i < n_owner_holds; i++)
	{
		if (owner_holds[i].expires_at > now)
			owner_holds[j++] = owner_holds[i];
	}
	n_owner_holds = j;
}

/* Does this session hold key as kind (or is it unsure it does)? */
static bool
holds_already(const char *key, RlockKind kind)
{
	HeldLock   *h = holds_find(key, kind);

	return h != NULL && (holds_total(h) > 0 || h->uncertain);
}

static void
check_names(const LockName *lns, int n, RlockKind kind)
{
	int			cap = max_locks_per_session();
	int			held = 0;
	int			more = 0;

	for (int i = 0; i < n; i++)
	{
		if (!holds_already(lns[i].key, kind))
			more++;
	}
	if (more == 0)
		return;
	if (holds_table != NULL)
	{
		HASH_SEQ_STATUS seq;
		HeldLock   *h;

		hash_seq_init(&seq, holds_table);
		while ((h = hash_seq_search(&seq)) != NULL)
		{
			if (holds_total(h) > 0 || h->uncertain)
				held++;
		}
	}
	if (held + more > cap)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many locks held by this session to take %s \"%s\"",
						quota_label(kind), lns[0].name),
				 errdetail("This session holds %d locks, and rlock.max_locks_per_session allows %d.",
						   held, cap),
				 errhint("Release some of this session's locks, or ask a superuser to raise rlock.max_locks_per_session.")));
}

/* The holds this session has of kind, re-entries included. */
static int64
holds_of_kind(RlockKind kind)
{
	int64		held = 0;

	if (holds_table != NULL)
	{
		HASH_SEQ_STATUS seq;
		HeldLock   *h;

		hash_seq_init(&seq, holds_table);
		while ((h = hash_seq_search(&seq)) != NULL)
		{
			if (h->kind == kind)
				held += holds_total(h);
		}
	}
	return held;
}

static void
check_permits(const LockName *ln, int levels)
{
	int64		held = holds_of_kind(RLOCK_KIND_SEMAPHORE);

	if (held + levels > rlock_max_permits_per_session)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many semaphore permits held by this session to take %d of semaphore \"%s\"",
						levels, ln->name),
				 errdetail("This session holds %lld permits, and rlock.max_permits_per_session allows %d in all.",
						   (long long) held, rlock_max_permits_per_session),
				 errhint("Give back some of this session's permits, or ask a superuser to raise rlock.max_permits_per_session.")));
}

/*
 * Read holds of one lock, re-entries included: each has a timeout key of
 * its own in Redis, which every script on that read/write lock reads.
 */
static void
check_reads(const LockName *lns, int n)
{
	for (int i = 0; i < n; i++)
	{
		HeldLock   *h = holds_find(lns[i].key, RLOCK_KIND_READ);
		int			held = h != NULL ? holds_total(h) : 0;

		if (held + 1 > rlock_max_read_holds_per_lock)
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("too many read holds of read lock \"%s\" held by this session",
							lns[i].name),
					 errdetail("This session holds it %d times, and rlock.max_read_holds_per_lock allows %d.",
							   held, rlock_max_read_holds_per_lock),
					 errhint("Release it first, or ask a superuser to raise rlock.max_read_holds_per_lock.")));
	}
}

static void
check_owner(const LockName *ln, RlockKind kind, const HoldRequest *req)
{
	if (req->lease_ms > (int64) rlock_max_owner_lease_s * 1000)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("lease of %s \"%s\" taken for an owner token is longer than rlock.max_owner_lease",
						quota_label(kind), ln->name),
				 errdetail("The lease asked for is %lld ms; rlock.max_owner_lease allows %d s.",
						   (long long) req->lease_ms, rlock_max_owner_lease_s),
				 errhint("Ask for a shorter lease (and take the lock again before it runs out), or ask a superuser to raise rlock.max_owner_lease.")));
	prune_owner_holds();
	if (n_owner_holds >= rlock_max_owner_holds_per_session)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many holds for owner tokens taken by this session to take %s \"%s\"",
						quota_label(kind), ln->name),
				 errdetail("This session took %d holds for owner tokens whose lease has not run out, and rlock.max_owner_holds_per_session allows %d.",
						   n_owner_holds, rlock_max_owner_holds_per_session),
				 errhint("Release some of them with their owner token, or ask a superuser to raise rlock.max_owner_holds_per_session.")));
}

/*
 * Before the round trip of an acquisition of the n names lns as kind
 * (req->levels holds each): ERROR when it would take this session past one
 * of its caps.  Superusers are not bound by them; their acquisitions may
 * use the registry's reserve.
 */
void
holds_quota_check(const LockName *lns, int n, RlockKind kind,
				  const HoldRequest *req)
{
	bool		su = superuser();

	registry_set_superuser(su);
	if (su)
		return;
	if (!req->track)
	{
		check_owner(lns, kind, req);
		return;
	}
	check_names(lns, n, kind);
	if (kind == RLOCK_KIND_SEMAPHORE)
		check_permits(lns, req->levels * n);
	if (kind == RLOCK_KIND_READ)
		check_reads(lns, n);
}

/* A hold for an owner token was granted: count it until its lease ends. */
void
holds_quota_owner_taken(const char *key, RlockKind kind,
						const HoldRequest *req)
{
	if (req->track || superuser())
		return;
	if (n_owner_holds >= max_owner_holds)
	{
		int			newmax = Max(16, max_owner_holds * 2);

		owner_holds = owner_holds
			? repalloc(owner_holds, newmax * sizeof(OwnerHold))
			: MemoryContextAlloc(TopMemoryContext,
								 newmax * sizeof(OwnerHold));
		max_owner_holds = newmax;
	}
	owner_holds[n_owner_holds].keyhash = quota_key_hash(key);
	owner_holds[n_owner_holds].kind = kind;
	owner_holds[n_owner_holds].expires_at =
		req->sent_at + req->lease_ms * 1000;
	n_owner_holds++;
}

/*
 * A hold of key as kind was released for an owner token: it no longer
 * counts (the one of this session's that would have lasted longest).
 */
void
holds_quota_owner_released(const char *key, RlockKind kind)
{
	uint32		keyhash = quota_key_hash(key);
	int			found = -1;

	for (int i = 0; i < n_owner_holds; i++)
	{
		if (owner_holds[i].keyhash == keyhash && owner_holds[i].kind == kind &&
			(found < 0 ||
			 owner_holds[i].expires_at > owner_holds[found].expires_at))
			found = i;
	}
	if (found >= 0)
		owner_holds[found] = owner_holds[--n_owner_holds];
}

/*
 * The bound a read acquisition for an owner token puts on the read holds
 * of the lock's owner tokens in all (the read acquire script's ARGV[4]):
 * rlock.max_owner_holds_per_lock for a role that is not a superuser, 0 (no
 * bound) for a superuser and for a session's own holds.  Those a session
 * takes count against its own caps, but owner tokens' holds outlive their
 * session: this bounds them on the lock, however many sessions took them.
 */
int
holds_quota_owner_holds_per_lock(const HoldRequest *req)
{
	if (req->track || superuser())
		return 0;
	return rlock_max_owner_holds_per_lock;
}
