/*-------------------------------------------------------------------------
 *
 * locks.h
 *	  The door of src/locks/: the lock kinds of Redisson's family, their
 *	  Lua scripts, and how a blocked acquisition waits.  Each kind registers
 *	  its operations with the held-lock table at load (lock_kinds.c).
 *
 *	  Its files, lowest first:
 *	  scripts_lua.h		Lua fragments several scripts share
 *	  scripts_fair.c	the fair lock's scripts
 *	  scripts_rw.c		the read/write lock's scripts
 *	  scripts_sync.c	the count-down latch's and the semaphore's scripts
 *	  scripts_wait.c	the wait graph's scripts: waits made known, read;
 *						a lock's blockers
 *	  scripts.c			the Lua scripts, their digests, EVALSHA
 *	  waitqueue.c		shared memory: which waiter of this server tries next
 *	  wait_slots.c		shared memory: what this server's sessions wait for
 *	  wait_read.c		every server's waits read, or some holders'
 *	  wait_blockers.c	who blocks a wait: a lock's holders; a
 *						PostgreSQL lock wait's
 *	  deadlock.c		a waiter's deadlock check: the knot, its victim,
 *						40P01
 *	  wait_graph.c		a wait made known (shared memory, Redis); when it
 *						checks for deadlocks
 *	  wait_outage.c		a wait rides through Redis outages: which ERRORs,
 *						the back-off, the failure at the wait's end
 *	  lock_wait.c		how a blocked acquisition waits, for every kind
 *	  event_wait.c		the wait for an event (a latch reaching zero)
 *	  lock_exclusive.c	the exclusive reentrant lock and the fenced lock
 *	  lock_rw.c			the read/write lock
 *	  lock_fair.c		the fair lock
 *	  lock_multi.c		the multi-lock: a set of exclusive locks, all or none
 *	  lock_redlock_keep.c	keeping a Redlock: releases and renewals on its
 *						masters, its holds checked after they change
 *	  lock_redlock.c	the Redlock: the exclusive lock on a majority of masters
 *	  lock_status.c		a lock's status for introspection (a Redlock's:
 *						from its masters)
 *	  latch.c			the count-down latch (Redisson RCountDownLatch)
 *	  semaphore.c		the semaphore (Redisson RPermitExpirableSemaphore),
 *						its permits held like locks
 *	  lock_kinds.c		locks_init: the kinds register with the held-lock table
 *	  locks_int.h		waiting, the waiters' queue, the exclusive lock's pieces:
 *						for this folder
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_LOCKS_H
#define RLOCK_LOCKS_H

#include "route/route.h"
#include "base/base.h"
#include "holds/holds.h"

/*
 * scripts: The Lua scripts rlock runs in Redis.
 */

typedef enum RlockScriptId
{
	RLOCK_SCRIPT_ACQUIRE,
	RLOCK_SCRIPT_RELEASE,
	RLOCK_SCRIPT_RECONCILE,
	RLOCK_SCRIPT_FORCE_RELEASE,
	RLOCK_SCRIPT_STATUS,
	RLOCK_SCRIPT_RENEW,
	RLOCK_SCRIPT_READ_ACQUIRE,
	RLOCK_SCRIPT_WRITE_ACQUIRE,
	RLOCK_SCRIPT_READ_RELEASE,
	RLOCK_SCRIPT_WRITE_RELEASE,
	RLOCK_SCRIPT_RW_RECONCILE,
	RLOCK_SCRIPT_FAIR_ACQUIRE,
	RLOCK_SCRIPT_FAIR_RELEASE,
	RLOCK_SCRIPT_FAIR_GIVE_UP,
	RLOCK_SCRIPT_LATCH_COUNT,
	RLOCK_SCRIPT_LATCH_SET_COUNT,
	RLOCK_SCRIPT_LATCH_COUNT_DOWN,
	RLOCK_SCRIPT_LATCH_ADOPT,
	RLOCK_SCRIPT_SEM_ACQUIRE,
	RLOCK_SCRIPT_SEM_RELEASE,
	RLOCK_SCRIPT_SEM_RECONCILE,
	RLOCK_SCRIPT_SEM_SET_PERMITS,
	RLOCK_SCRIPT_SEM_ADD_PERMITS,
	RLOCK_SCRIPT_SEM_AVAILABLE,
	RLOCK_SCRIPT_LATCH_DELETE,
	RLOCK_SCRIPT_SEM_DELETE,
	RLOCK_SCRIPT_WAIT_REGISTER,
	RLOCK_SCRIPT_WAIT_READ,
	RLOCK_SCRIPT_LOCK_BLOCKERS,
	RLOCK_SCRIPT_WAIT_FORGET,
	RLOCK_NUM_SCRIPTS
} RlockScriptId;


/* Start cmd as EVALSHA of the script with nkeys keys; add keys, then args. */
extern void rcmd_script(RedisCmd *cmd, RlockScriptId id, int nkeys);

/* The renew script's calls: a HoldsRenewCallsFn (holds/holds.h). */
extern int	rcmd_renew_calls(const RenewArg *args, int n, int maxper,
							 RedisCmd **cmds, int **order, int **starts);

/*
 * lock_kinds: the kinds register their operations with the held-lock table.
 */
extern void locks_init(void);

/*
 * waitqueue: Which of this server's sessions waiting for one lock tries next.
 */

extern void waitqueue_install_hooks(void);


/*
 * wait_graph, wait_read: the waits of every server sharing the Redis
 * (SPEC.md section 5.6), read for rlock_waits, rlock_blocking_pids and the
 * deadlock check; a lock's blockers; a PostgreSQL lock wait's.
 */
extern void wait_graph_install_hooks(void);
extern int	wait_graph_deadlock_timeout(void);
extern bool wait_graph_forget_server(const char *uuid, TimestampTz cap);

#define WAIT_MAX_KEYS	4		/* a wait's locks known (a multi-lock's first) */
#define WAIT_KIND_LEN	16

typedef struct WaitRecord
{
	char	   *holder;			/* the waiter's holder id */
	char	   *server;			/* its server's instance UUID */
	int			pid;
	char	   *database;
	char	   *kind;			/* "exclusive", "read", "semaphore", ... */
	int64		since_ms;		/* Redis's time, epoch ms */
	bool		checks;			/* it checks for deadlocks */
	bool		local;			/* this server's (from shared memory) */
	int			nkeys;
	char	   *keys[WAIT_MAX_KEYS];
	char	   *names[WAIT_MAX_KEYS];
} WaitRecord;

typedef struct WaitSnapshot
{
	int			n;
	WaitRecord *recs;
	int			nservers;
	char	  **server_uuids;
	char	  **server_names;
	int64		redis_now_ms;	/* when Redis answered */
	TimestampTz local_now;		/* ... on this server's clock */
} WaitSnapshot;

extern void wait_snapshot_read(WaitSnapshot *snap, int max_waits);
extern void wait_read_tolerant(bool on);
extern void wait_records_fetch(const char *const *holders, int n,
							   WaitRecord **out);
extern bool wait_local_record(int pid, WaitRecord *w);
extern const char *wait_server_name(const WaitSnapshot *snap,
									const char *holder);
extern const char *wait_my_uuid(void);
extern int	wait_holder_pid(const char *holder);
extern TimestampTz wait_local_time(const WaitSnapshot *snap, int64 ms);

typedef struct LockBlockers
{
	char	   *mode;			/* a read/write lock's ("read", "write") */
	int			nholders;
	char	  **holders;		/* holder ids (or a Redisson client's) */
	int			nqueue;
	char	  **queue;			/* a fair lock's queue, head first */
} LockBlockers;

extern LockBlockers *lock_blockers(const char *kind, const char *key,
								   const char *name);
extern LockBlockers *lock_blockers_cached(List **cache, const char *kind,
										  const char *key, const char *name);
extern int	wait_blocking_holders(const WaitRecord *w, LockBlockers **bl,
								  const char ***holders, const char ***names);
extern int	pg_lock_blockers(int pid, int **pids, char **what);

/*
 * lock_exclusive: The exclusive reentrant lock (Redisson RLock) and its fenced variant
 *	  (Redisson RFencedLock).
 */

/* How the held-lock table releases and reconciles exclusive locks. */
extern const RlockKindOps exclusive_ops;

/*
 * Acquire.  lease_ms 0 = watchdog lease; wait_ms 0 = one attempt, -1 = no
 * limit; owner NULL = this backend's holder identity (and the hold is
 * recorded in the held-lock table).  honour_lock_timeout arms lock_timeout
 * for the wait, as a blocking lock acquisition does.  token non-NULL makes
 * it a fenced acquisition, which sets *token when it succeeds.
 */
extern bool exclusive_acquire(const LockName *ln, RlockScope scope,
							  int64 lease_ms, int64 wait_ms,
							  const char *owner, bool honour_lock_timeout,
							  int64 *token);
extern bool exclusive_token(const LockName *ln, int64 *token);
extern bool exclusive_force_release(const LockName *ln);

/*
 * lock_rw: The read/write lock (Redisson RReadWriteLock).
 */

/* How the held-lock table releases and reconciles either side. */
extern const RlockKindOps read_ops;
extern const RlockKindOps write_ops;

/*
 * Acquire the read (kind RLOCK_KIND_READ) or the write side; arguments as
 * for exclusive_acquire.
 */
extern bool rw_acquire(const LockName *ln, RlockKind kind, RlockScope scope,
					   int64 lease_ms, int64 wait_ms, const char *owner,
					   bool honour_lock_timeout);

/*
 * lock_fair: The fair lock (Redisson's fair lock): waiters acquire in FIFO order.
 */

/* How the held-lock table releases and reconciles fair locks. */
extern const RlockKindOps fair_ops;

/* Arguments as for exclusive_acquire; released with holds_release(). */
extern bool fair_acquire(const LockName *ln, RlockScope scope, int64 lease_ms,
						 int64 wait_ms, const char *owner,
						 bool honour_lock_timeout);

/*
 * lock_multi: The multi-lock (Redisson RedissonMultiLock): a set of exclusive
 *	  locks, held all or none.
 */

/* The most names one multi-lock takes. */
#define RLOCK_MAX_MULTI_NAMES	1000

/*
 * Acquire every one of the n distinct names, or none.  lease_ms 0 = the
 * watchdog's lease; wait_ms 0 = one attempt, -1 = no limit.
 */
extern bool multi_acquire(const LockName *lns, int n, RlockScope scope,
						  int64 lease_ms, int64 wait_ms,
						  bool honour_lock_timeout);
extern bool multi_release(const LockName *lns, int n);

/*
 * lock_redlock: The Redlock: the exclusive lock on a majority of the independent
 *	  masters of rlock.redlock_urls (Redisson RedissonRedLock).
 */

/* How the held-lock table and the watchdog tell the masters (lock_redlock_keep.c). */
extern const RlockKindOps redlock_ops;

/*
 * The clock drift a Redlock allows its masters: 1 % of the lease plus 2 ms
 * (a lease no longer than that can never be valid, and is refused).
 */
#define REDLOCK_DRIFT_MS(lease_ms)	((lease_ms) / 100 + 2)

/*
 * Acquire.  lease_ms 0 = watchdog lease; wait_ms 0 = one attempt, -1 = no
 * limit.
 */
extern bool redlock_acquire(const LockName *ln, RlockScope scope,
							int64 lease_ms, int64 wait_ms,
							bool honour_lock_timeout);
extern bool redlock_release(const LockName *ln);

/*
 * lock_status: a lock's status for introspection: the status script's call
 * (as this session's holder); what a majority of the masters say of a
 * Redlock this session holds (false: it holds none of that name).
 */
extern void rcmd_status(RedisCmd *cmd, const LockName *ln);
extern bool redlock_own_status(const LockName *ln, int64 *count,
							   int64 *pttl);

/*
 * latch: The count-down latch (Redisson RCountDownLatch): no holds, a
 *	  count that sessions anywhere count down, and waiters woken at zero.
 */

/* trySetCount; expire_ms > 0: the latch disappears after it, at zero or not */
extern bool latch_set_count(const LockName *ln, int64 count, int64 expire_ms);

/*
 * Count down once (applied once, even resent after a lost reply).  A
 * count rlock did not set (no marker) is an ERROR unless adopt (the caller
 * may adopt latches: rlock_latch_adopt's grant), which marks it first.  An
 * absent latch: 0, with a WARNING naming it.
 */
extern int64 latch_count_down(const LockName *ln, bool adopt);
extern int64 latch_count(const LockName *ln);

/* Mark a count a Redisson client set as a latch; false when absent. */
extern bool latch_adopt(const LockName *ln);

/*
 * Wait until the latch is at zero (or absent): true at once when it is
 * (an ERROR, 55000, when absent and must_exist); false when wait_ms (-1:
 * no limit; 0: only look) ran out first.
 */
extern bool latch_await(const LockName *ln, int64 wait_ms,
						bool honour_lock_timeout, bool must_exist);

/* Delete a latch rlock set (its waiters wake); false when absent. */
extern bool latch_delete(const LockName *ln);

/*
 * semaphore: The semaphore (Redisson RPermitExpirableSemaphore), whose
 *	  permits this session holds like locks, one hold per permit.
 */

/* How the held-lock table gives permits back and reconciles them. */
extern const RlockKindOps semaphore_ops;

/*
 * Take permits (> 0) for this session, in scope.  lease_ms 0 = the
 * watchdog's lease, renewed; wait_ms 0 = one attempt, -1 = no limit.
 * ERROR when the semaphore has fewer permits than that in all, and when
 * rlock did not set it (no marker) unless adopt (the caller may size
 * semaphores), which marks it.
 */
extern bool semaphore_acquire(const LockName *ln, RlockScope scope,
							  int permits, int64 lease_ms, int64 wait_ms,
							  bool honour_lock_timeout, bool adopt);
/* Give back permits this session holds at session level. */
extern bool semaphore_release(const LockName *ln, int permits);
extern bool semaphore_set_permits(const LockName *ln, int permits);
extern int64 semaphore_add_permits(const LockName *ln, int permits);
extern int64 semaphore_available(const LockName *ln);

/*
 * Delete a semaphore rlock set, with its permits out (their holders report
 * them lost; its waiters wake); false when absent.
 */
extern bool semaphore_delete(const LockName *ln);

#endif							/* RLOCK_LOCKS_H */
