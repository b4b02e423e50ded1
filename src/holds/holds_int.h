/*-------------------------------------------------------------------------
 *
 * holds_int.h
 *	  The inside of the held-lock table, shared by the files of the holds
 *	  folder only.  They call one another in one direction, lowest first:
 *
 *	  lockname.c		 lock names and the keys derived from them
 *	  registry.c		 shared memory: the registry of held locks
 *						 (registry_read.c, beside the rest, reads it for
 *						 rlock_locks and the watchdog; registry_int.h)
 *	  holds_kinds.c		 the table of lock kinds, filled in at load
 *	  holds_cleanup.c	 clean-ups an ERROR left, and the hook that puts the
 *						 end-of-holds callbacks in place on first use
 *	  holds_table.c		 the table: find, enter, count, forget (no I/O)
 *	  holds_quota.c		 the per-session caps, asked before a round trip
 *	  holds_strand.c	 a release Redis could not be told of, handed to
 *						 the worker (registry_strand.c marks the entry)
 *	  holds_batch.c		 many holds told to Redis in one round trip
 *	  holds_acquire.c	 one acquisition (beside holds_release.c)
 *	  holds_release.c	 one release
 *	  holds_set.c		 a set of names, all or none
 *	  holds_commit.c	 the check before COMMIT
 *	  holds_xact.c		 the transaction, subtransaction and exit callbacks
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_HOLDS_INT_H
#define RLOCK_HOLDS_INT_H

#include "utils/hsearch.h"

#include "holds/holds.h"

/* One lock in a batch: one pipelined round trip for many locks. */
typedef struct BatchItem
{
	HeldLock   *h;
	int			levels;			/* > 0: release that many holds; 0: reconcile
								 * Redis's count down to ours */
	bool		session;		/* the levels were session-level holds */
	const char *latch;			/* the release's unlock latch */
} BatchItem;

/* holds_cleanup.c */
extern void holds_set_end_callbacks(void (*fn) (void));
extern void holds_need_end_callbacks(void);
extern void holds_run_cleanups(void);

/* holds_table.c */
extern HTAB *holds_table;
extern MemoryContext holds_batch_cxt;
extern int	holds_n_uncertain;
extern int	holds_n_with_xact;

extern void holds_set_uncertain(HeldLock *h, bool uncertain);
extern void holds_clear_xact(HeldLock *h);
extern bool holds_sync_registry(HeldLock *h, bool new_expiry);
extern void holds_require_settled(const LockName *ln, RlockKind kind);
extern void holds_drop_if_unused(HeldLock *h);
extern void holds_forget_and_reconcile(HeldLock *h);
extern bool holds_count_hold(HeldLock *h, const HoldRequest *req,
							 int redis_count, const char *name);
extern void holds_take_back(HeldLock *h, const HoldRequest *req);
extern void holds_registry_full(const char *name);
extern void holds_held_as_other_kind(const LockName *ln, HeldLock *other);
extern void holds_report_lost(RlockKind kind, const char *name,
							  const char *detail);
extern int64 holds_keep_lease(HeldLock *h);
extern void holds_update_renewal(HeldLock *h);

/* holds_lost.c */
extern void holds_note_lost_xact(const HeldLock *h);
extern void holds_lost_xact_subxact_end(SubTransactionId subid,
										SubTransactionId parent,
										bool committed);
extern void holds_lost_xact_reset(void);
extern const char *holds_lost_xact_key(RlockKind *kind);

/*
 * The clock margin of semaphore permits taken with a fixed lease.  Redis's
 * clock scores them (scripts_sync.c), but a Redisson client gives back a
 * permit whose score is past by its own clock: one whose clock runs ahead
 * of Redis's takes it back that much early.  So rlock believes such a
 * permit for its lease less this margin (holds_count_hold), and the check
 * before COMMIT asks for the margin on top of what a commit needs: the
 * clocks of Redisson clients sharing a semaphore must stay within
 * HOLDS_CLOCK_SKEW_MS of Redis's (README).  (Renewed permits fail closed a
 * fifth of their lease early; locks expire by Redis's clock alone.)
 */
#define HOLDS_CLOCK_SKEW_MS		100

static inline int64
holds_clock_margin_ms(RlockKind kind, bool renewed, int64 lease_ms)
{
	if (kind != RLOCK_KIND_SEMAPHORE || renewed || lease_ms <= 0)
		return 0;
	/* (at most half the lease: a short one is not believed lost at once) */
	return Min(lease_ms / 100 + HOLDS_CLOCK_SKEW_MS, lease_ms / 2);
}

/* Does some entry have transaction-level holds? */
static inline bool
holds_any_xact(void)
{
	return holds_table != NULL && holds_n_with_xact > 0;
}

/* holds_quota.c */
extern void holds_quota_check(const LockName *lns, int n, RlockKind kind,
							  const HoldRequest *req);
extern void holds_quota_owner_taken(const char *key, RlockKind kind,
									const HoldRequest *req);
extern void holds_quota_owner_released(const char *key, RlockKind kind);

/* registry_strand.c: this backend's side */
extern int64 registry_strand(const char *key, RlockKind kind);
extern bool registry_is_stranded(const char *key);

/* holds_strand.c */
extern bool holds_can_strand(const HeldLock *h);
extern bool holds_strand(HeldLock *h);
extern void holds_refuse_stranded(const LockName *ln);

/* holds_batch.c */
extern BatchItem *holds_batch_items(void);
extern void holds_batch_add(BatchItem *items, int *n, HeldLock *h, int levels,
							bool session);
extern int	holds_run_batch(BatchItem *items, int n, int elevel);

/* holds_release.c */
extern HeldLock *holds_session_hold(const LockName *ln, RlockKind kind);

/* holds_commit.c */
extern void holds_verify_xact(void);
extern void holds_refuse_lost_xact(const char *what);

/* registry.c: a backend's own entries (kept in step by the table) */
extern bool registry_sync(const char *key, RlockKind kind, int session_count,
						  int xact_count, int64 lease_ms,
						  int64 renew_lease_ms, TimestampTz expires_at);
extern void registry_remove(const char *key, RlockKind kind);
extern void registry_releasing(const char *key, RlockKind kind,
							   int remaining);
extern void registry_remove_backend(void);
extern void registry_set_superuser(bool superuser);
extern long registry_limit(bool superuser);
extern bool registry_is_lost(const char *key, RlockKind kind);

/* registry_cancel.c: rlock.cancel_on_lost's cancel names the lost lock */
extern Size registry_cancel_shmem_size(void);
extern void registry_cancel_shmem_init(void);
extern void registry_cancel_install_hook(void);
extern int	registry_cancel_slot(void);
extern void registry_cancel_note(int slot, int pid, RlockKind kind,
								 const char *key, RenewOutcome cause);
extern void registry_cancel_note_reset(void);

/* Of the kinds, the table and acquisitions, used inside this folder only. */
extern bool rlock_kinds_compatible(RlockKind a, RlockKind b);
extern int	holds_renew_calls(const RenewArg *args, int n, int maxper,
							  RedisCmd **cmds, int **order, int **starts);
extern HeldLock *holds_find_conflicting(const char *key, RlockKind kind);
extern HeldLock *holds_enter(const char *key, RlockKind kind);
extern bool holds_check_lost(HeldLock *h, const char *name);
extern void holds_check_lost_on_key(const char *key, RlockKind kind,
									const char *name);
extern void holds_acks_refused(const char *name, RlockKind kind,
							   RedisConn *conn, int wanted,
							   int64 acked, const char *ack_error);

/*
 * Acquisitions whose replies were lost, settled by the session's counts
 * in Redis (holds_acquire.c); resent at most this many times when they
 * did not apply.
 */
#define HOLDS_SETTLE_MAX_RESENDS	3
extern bool holds_may_settle_by_count(RlockKind kind, RedisConn *conn);
extern bool holds_settle_by_count(const LockName *lns, int n, RlockKind kind,
								  const HoldRequest *req, HeldLock **hs,
								  int64 *counts);

#endif							/* RLOCK_HOLDS_INT_H */
