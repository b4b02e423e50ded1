/*-------------------------------------------------------------------------
 *
 * holds.h
 *	  The door of src/holds/: what this session holds.  Lock names and
 *	  their keys, the shared registry of the server's held locks, the table
 *	  of lock kinds (which the kinds fill in at load), the session's table
 *	  of holds, and when holds end (transaction, subtransaction, exit).
 *	  The lock kinds above register their operations (holds_register_kind)
 *	  and the builder of renewal calls (holds_register_renew_calls) from
 *	  _PG_init; inside the folder, holds_xact.c hands the table its
 *	  callbacks' registration the same way (holds_set_end_callbacks), so
 *	  that the table, below it, puts them in place on first use.
 *
 *	  Its files, lowest first (each calls only those above it in the list):
 *	  lockname.c		lock names, rlock.key_prefix, Redisson's derived keys
 *	  holds_kinds.c		the table of lock kinds and their operations
 *	  registry_cancel.c	rlock.cancel_on_lost's cancel names the lost lock
 *	  registry.c		shared memory: instance identity, registry of holds
 *	  registry_read.c	rlock_locks' snapshot, the watchdog's side of it
 *	  registry_strand.c	releases left to the worker (stranded entries)
 *	  holds_cleanup.c	clean-ups an ERROR left; the callbacks' hook
 *	  holds_lost.c		the transaction-level losses COMMIT must refuse
 *	  holds_table.c		the session's table of holds (no Redis I/O)
 *	  holds_quota.c		the per-session caps of roles not superusers
 *	  holds_strand.c	a release Redis could not be told of, handed over
 *	  holds_batch.c		many holds told to Redis in one round trip
 *	  holds_acquire.c	one acquisition: the script, WAIT, the undo
 *	  holds_release.c	one release and its warnings
 *	  holds_set.c		a set of names acquired all or none
 *	  holds_commit.c	the check before COMMIT
 *	  holds_assert.c	rlock_assert_held: still held, Redis agreeing
 *	  holds_xact.c		transaction, subtransaction and exit callbacks
 *	  holds_int.h		the table's inside, for this folder
 *	  registry_int.h	the registry's inside, for registry*.c
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_HOLDS_H
#define RLOCK_HOLDS_H

#include "datatype/timestamp.h"
#include "port/atomics.h"
#include "access/xact.h"

#include "base/base.h"
#include "route/route.h"

/*
 * lockname: Lock names: validation, key prefix, Redisson's derived key names.
 */

typedef struct LockName
{
	const char *name;			/* the user's name, for messages */
	char		key[RLOCK_MAX_KEY_LEN + 1]; /* rlock.key_prefix || name */
	int			keylen;
} LockName;

extern void lockname_init(LockName *ln, text *name);
extern void lockname_init_as(LockName *ln, text *name, const char *noun);
extern char *lockname_derive(const char *key, const char *prefix);
extern char *lockname_suffixed(const char *key, const char *suffix);
extern char *lockname_unlock_latch(const char *key);
extern const char *lockname_holder_field(RlockKind kind, const char *holder);
extern int64 lockname_latch_ttl_ms(void);
extern char *lockname_owner_field(const char *token);
extern bool lockname_has_holder_prefix(const char *s);
extern bool lockname_is_holder_identity(const char *field);

/*
 * registry: rlock's shared memory: the instance identity and the registry of the
 *	  locks held by every session of this server.
 */

/* State of a registered lock. */
typedef enum RegistryState
{
	REGISTRY_HELD = 0,
	REGISTRY_LOST,
	REGISTRY_STRANDED			/* released by its session, but Redis could
								 * not be told: the worker finishes it
								 * (registry_strand.c) */
} RegistryState;

/* A registered lock (the hash entry). */
typedef struct RegistryEntry
{
	/* hash key: backend, kind and lock key (NUL-terminated) */
	int			pid;
	RlockKind	kind;
	char		key[RLOCK_MAX_KEY_LEN + 1];

	Oid			dboid;
	int			proc_slot;		/* its backend's PGPROC slot (cancel notes) */
	RegistryState state;
	int			session_count;
	int			xact_count;
	int64		lease_ms;		/* lease of the last acquisition */
	int64		renew_lease_ms; /* > 0: the watchdog renews it with this lease */
	TimestampTz acquired_at;
	TimestampTz renewed_at;		/* 0 when never renewed */
	TimestampTz expires_at;		/* earliest moment Redis may let it expire */
	TimestampTz stranded_at;	/* when it was stranded (identifies that) */

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
	int			holds;			/* its holds (a semaphore's: its permits) */
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
extern TimestampTz registry_instance_started(void);

/* Readers (rlock_locks). */
extern int	registry_snapshot(RegistryRow **rows);

/* The watchdog. */
extern int	registry_renewal_snapshot(RenewItem **items);
extern void registry_renewed(RenewItem *items, const RenewOutcome *outcome,
							 const int64 *ttl_ms, int n, TimestampTz sent_at,
							 bool cancel_on_lost);
extern TimestampTz registry_fail_closed_at(int64 renew_lease_ms,
										   TimestampTz expires_at);

/*
 * registry_strand: releases that could not reach Redis, left to the worker
 * (its side: src/worker/stranded.c).
 */
typedef struct StrandedItem
{
	int			pid;			/* the holder is "<instance uuid>:<pid>" */
	RlockKind	kind;
	TimestampTz stranded_at;	/* identifies this stranding of the entry */
	TimestampTz expires_at;		/* when its lease runs out in Redis */
	char	   *key;			/* palloc'd copy */
} StrandedItem;

struct Latch;
extern void registry_set_worker_latch(struct Latch *latch);
extern bool registry_any_stranded(void);
extern int	registry_stranded_snapshot(StrandedItem **items);
extern void registry_stranded_settled(const StrandedItem *item);

/*
 * holds: Backend-local table of the locks this session holds
 *	  (holds_table.c), acquisitions and releases (holds_acquire.c,
 *	  holds_release.c, holds_batch.c, holds_set.c), and when its holds end:
 *	  the check before COMMIT (holds_commit.c), transaction, subtransaction
 *	  and session ends, DISCARD ALL (holds_xact.c).
 */

/* Transaction-level holds taken in one (sub)transaction. */
typedef struct XactHolds
{
	SubTransactionId subid;
	int			count;
	int			renewed;		/* of those, taken without a lease */
} XactHolds;

/*
 * What this backend holds of one lock as one kind (its own holder identity
 * only).  The table's key is (key, kind): one session may hold one name as
 * two kinds, the read and the write side of a read/write lock.
 */
typedef struct HeldLock
{
	char		key[RLOCK_MAX_KEY_LEN + 1]; /* the lock's Redis key */
	RlockKind	kind;
	/* end of the hash key (holds_enter zeroes every field below) */
	int			session_count;	/* session-level holds */
	int			session_renewed;	/* of those, taken without a lease (at
									 * most; a release ends fixed ones
									 * first) */
	int			xact_count;		/* transaction-level holds, all levels */
	int			nxact;			/* entries used in xact[] */
	int			maxxact;
	XactHolds  *xact;			/* by subtransaction, innermost last */
	int64		renew_lease_ms; /* > 0: a hold taken without a lease remains
								 * (or, for the write side, one of the read
								 * side's), and the watchdog renews it with
								 * this lease (holds_update_renewal) */
	int64		watchdog_lease_ms;	/* lease of the holds taken without a
									 * lease (the watchdog's, at the time) */
	int64		lease_ms;		/* lease of the last acquisition */
	TimestampTz expires_at;		/* earliest moment Redis may let it expire */
	bool		uncertain;		/* Redis may disagree (interrupted call) */
	int			high_count;		/* the most holds counted since the entry
								 * was made: a semaphore's permit ids are
								 * 1..this at most (its reconcile looks that
								 * far, past a gap: scripts_sync.c) */
	bool		settle_at_end;	/* reconcile it when the transaction ends
								 * (tried once; then the next call does) */
} HeldLock;

/*
 * One lock for the renew script: its holder's field, how, its lease.  A
 * semaphore's permits are renewed ("s") or checked ("t") as the members
 * "<field>:<k>" of its {N}:timeout sorted set.
 */
typedef struct RenewArg
{
	const char *key;
	const char *field;			/* the holder's field in the lock's hash */
	const char *how;			/* "x" renew, "r" renew a read hold, "c" check */
	int64		lease_ms;
} RenewArg;

/*
 * A lock kind's entry in the table of kinds (holds_kinds.c, filled in by
 * the kinds at load time: locks_init): how the held-lock table releases
 * and reconciles its locks, and, for a kind whose locks live on servers of
 * their own, how they are told and renewed there.  (The kind is passed on,
 * for lock files that serve several.)  A holder's count is read the same
 * way for every kind: HGET of its field (lockname_holder_field).
 */
typedef struct RlockKindOps
{
	/*
	 * release "levels" holds; keep_lease_ms: lease of what remains, 0 keep.
	 * Returns the request's unlock latch (deleted once answered).
	 */
	const char *(*build_release) (RedisCmd *cmd, RlockKind kind,
								  const char *key, const char *holder,
								  int levels, int64 keep_lease_ms);
	/* lower this holder's count in Redis to "target" */
	void		(*build_reconcile) (RedisCmd *cmd, RlockKind kind,
									const char *key, const char *holder,
									int target);

	/*
	 * Kinds whose locks live elsewhere than rlock.redis_url (the masters of
	 * a Redlock) set these two instead of the two above.
	 *
	 * settle: lower holder's count of each key to targets[i] (0 releases it)
	 * wherever the lock lives; held[i] says whether enough of the servers
	 * still had the before[i] holds the table counted.  Never leaves a
	 * lock uncertain: what a server that did not answer keeps expires with
	 * its lease.  Reports failures at elevel.
	 *
	 * renew: renew (or check) each lock wherever it lives, as the renew
	 * script does; outcome[i] is RENEW_HELD, RENEW_GONE or RENEW_UNKNOWN, and
	 * left_ms[i] (if not NULL) the lease left for sure (-1 unknown).  No
	 * answer later than cap counts.
	 */
	void		(*settle) (const char *const *keys, const int *targets,
						   const int *before, int n, const char *holder,
						   bool *held, int elevel);
	void		(*renew) (const RenewArg *args, int n, int elevel,
						  TimestampTz cap, RenewOutcome *outcome,
						  int64 *left_ms);
} RlockKindOps;

/*
 * The renew script's calls for n locks of the kinds that live on
 * rlock.redis_url, at most maxper keys a call, the keys of one call sharing
 * a hash slot (in a Cluster): returns the number of calls in *cmds; the
 * locks of call g are order[starts[g]] ... order[starts[g+1]-1], and its
 * reply has a (hold count, PTTL) pair for each, in that order.
 */
typedef int (*HoldsRenewCallsFn) (const RenewArg *args, int n, int maxper,
								  RedisCmd **cmds, int **order, int **starts);

/* holds_kinds.c: the table of kinds */
extern void holds_register_kind(RlockKind kind, const RlockKindOps *ops);
extern void holds_register_renew_calls(HoldsRenewCallsFn fn);
extern const RlockKindOps *holds_kind_ops(RlockKind kind);
extern const char *rlock_kind_name(RlockKind kind);
extern void holds_renew_arg(RenewArg *arg, const char *key, RlockKind kind,
							const char *holder, int64 renew_lease_ms);

/* Does the kind live on rlock.redis_url? */
static inline bool
kind_is_local(RlockKind kind)
{
	return holds_kind_ops(kind)->settle == NULL;
}

/*
 * Clean-up that an ERROR left to do in Redis (a fair waiter leaving its
 * queue, a waiter leaving its channel): PG_CATCH blocks only record it,
 * and it runs from the abort paths, at backend exit and before the next
 * rlock call (holds_cleanup.c), bounded like every uninterruptible round
 * trip.  Never throws.
 */
typedef void (*HoldsCleanupFn) (void);

/* What an acquisition asks for (lock kinds fill it in). */
typedef struct HoldRequest
{
	bool		track;			/* this session's own hold (not an owner's) */
	RlockScope	scope;
	int64		lease_ms;
	bool		watchdog;		/* taken without a lease */
	TimestampTz sent_at;		/* when the acquire script was sent */
	const char *holder;			/* whose hold it is */
	int			levels;			/* holds one acquisition takes: 1, or a
								 * semaphore's permits */
} HoldRequest;

/*
 * The answer of an acquire script, {status, value[, extra]}: status 1 =
 * acquired (value: the holder's count), 0 = refused (value: the holder's
 * remaining lease), others = refused for a reason of the lock kind (word:
 * element 1 as text, if it is text).
 */
#define ACQUIRE_STATUS_MAX 4	/* the highest status a script returns */

typedef struct AcquireResult
{
	int64		status;
	int64		value;
	bool		has_extra;
	int64		extra;			/* e.g. a fencing token */
	char	   *word;
} AcquireResult;

/* holds_table.c: the table */
extern HeldLock *holds_find(const char *key, RlockKind kind);
extern void holds_forget(HeldLock *h);

/*
 * holds_batch.c: reconcile what is uncertain (holds_settle_entries: without
 * the clean-ups an earlier call left, for a call under way: a wait that
 * resumes after an outage); rlock_release_all
 */
extern void holds_settle(void);
extern void holds_settle_entries(void);
extern void holds_recheck_kind(RlockKind kind);
extern int	holds_release_all_session(void);

/* holds_acquire.c: one acquisition */
extern const char *holds_prepare_acquire(const LockName *ln, RlockKind kind,
										 RlockScope scope, int64 lease_ms,
										 const char *owner,
										 HoldRequest *req);
extern AcquireResult holds_run_acquire(const LockName *ln, RlockKind kind,
									   HoldRequest *req, RedisCmd *cmd);
extern bool holds_parse_acquire(RReply *r, AcquireResult *res);

/* holds_release.c: one release */
extern bool holds_release(const LockName *ln, RlockKind kind,
						  const char *owner);
extern bool holds_release_levels(const LockName *ln, RlockKind kind,
								 int levels);

/* holds_set.c: a set of names, all or none */
extern const char *holds_prepare_set(const LockName *lns, int n,
									 RlockKind kind, RlockScope scope,
									 int64 lease_ms, HoldRequest *req);
extern bool holds_run_acquire_set(const LockName *lns, int n, RlockKind kind,
								   HoldRequest *req, RedisCmd *cmds,
								   AcquireResult *res);
extern bool holds_release_set(const LockName *lns, int n, RlockKind kind);

/*
 * holds_acquire.c: the bookkeeping of a kind that asks its own servers
 * (lock_redlock.c)
 */
extern HeldLock *holds_begin_elsewhere(const LockName *ln, RlockKind kind,
									   HoldRequest *req);
extern void holds_end_elsewhere(HeldLock *h, const HoldRequest *req,
								bool granted, const char *name);

/* holds_cleanup.c */
extern void holds_on_abort(HoldsCleanupFn fn);

/* holds_assert.c: rlock_assert_held */
extern void holds_assert_held(const LockName *ln);

/* holds_quota.c: the read acquire script's bound on owner tokens' holds */
extern int	holds_quota_owner_holds_per_lock(const HoldRequest *req);

/* holds_xact.c */
extern void holds_init(void);
extern void holds_install_hooks(void);

static inline int
holds_total(const HeldLock *h)
{
	return h->session_count + h->xact_count;
}

#endif							/* RLOCK_HOLDS_H */
