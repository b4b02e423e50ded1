/*-------------------------------------------------------------------------
 *
 * locks_int.h
 *	  What the files of src/locks/ share among themselves and nothing
 *	  outside sees: how a blocked acquisition waits (lock_wait.c), this
 *	  server's queue of waiters (waitqueue.c), and the exclusive lock's
 *	  pieces the multi-lock and the Redlock build on.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_LOCKS_INT_H
#define RLOCK_LOCKS_INT_H

#include "locks/locks.h"

/*
 * lock_wait: How a blocked acquisition waits, for every lock kind.
 */

/*
 * One attempt of a lock kind: returns true when the lock was acquired;
 * otherwise sets *pttl to how long the current holder's lease still runs
 * (ms; -1 when unknown), the longest the waiter sleeps before trying again.
 */
typedef bool (*LockTryFn) (void *arg, int64 *pttl);

/*
 * Called when a wait ends without the lock (timed out, cancelled, an
 * ERROR), with interrupts held; must not throw.  May be NULL.
 */
typedef void (*LockGiveUpFn) (void *arg);

/*
 * Wait for a lock whose releases are announced on "channel": subscribe,
 * then alternate attempts and sleeps until one attempt succeeds.  wait_ms
 * -1 waits without limit.  share: 0 (false) for a lock one waiter takes;
 * LOCK_WAIT_SHARED (true) when the lock may be held by several waiters at
 * once (a read lock), so the next one tries as soon as this one has it;
 * LOCK_WAIT_PERMITS for a semaphore's permits: besides, a waiter that a
 * release message woke first and that could not take what it asks for
 * lets the next waiter look (it may ask for fewer), and queues again
 * behind it.  Returns false when the wait is over.
 */
#define LOCK_WAIT_SHARED	1
#define LOCK_WAIT_PERMITS	2
#define LOCK_WAIT_SHARE_MASK	3

/*
 * Or'd into share: the caller made no attempt yet, and this server has
 * sessions waiting on the channel already (waitqueue_has_waiters).  The
 * wait then subscribes and queues first, and attempts only when no waiter
 * is ahead of it, else when a release or the turn reaches it: the release
 * that frees the lock wakes the waiter ahead, not a newcomer's failed try.
 * Only for a lock one waiter takes, not already held by this session nor
 * asked for with an owner token (the attempt would succeed at once).
 */
#define LOCK_WAIT_BEHIND	4

/*
 * Or'd into share by a kind whose newcomers always queue behind this
 * server's waiters (LOCK_WAIT_BEHIND when there are some): its waiters may
 * take turns listening for messages (waitqueue_place), as none of them
 * can be overtaken by a newcomer's attempt while it sleeps.  Other kinds'
 * waiters all listen, and try on every message that finds them first.
 */
#define LOCK_WAIT_QUEUED	8

extern bool lock_wait(const LockName *ln, const char *channel, int64 wait_ms,
					  bool honour_lock_timeout, int share,
					  LockTryFn try_fn, LockGiveUpFn give_up_fn, void *arg);

extern bool lock_wait_on(RedisConn *sub, const LockName *ln,
						 const char *channel, int64 wait_ms,
						 bool honour_lock_timeout, int share,
						 LockTryFn try_fn, LockGiveUpFn give_up_fn,
						 void *arg);
extern void lock_wait_retarget(RedisConn *sub, const char *channel);
extern void lock_wait_permits(bool took, int64 available);

/*
 * Wait for an event announced on "channel" (a latch reaching zero):
 * check_fn is called first with message NULL (look in Redis), then after
 * each message with its text (it may decide from it alone), and with NULL
 * again whenever the wait looks without a message (every few seconds, or
 * after the connection broke).  Every waiter of this server wakes on each
 * message.  what names the object in the error context ("latch").
 * wait_ms -1 waits without limit.  Returns false when the wait is over.
 */
/* Longest single sleep of a waiter between two attempts, in ms. */
#define WAIT_RECHECK_MS		5000

/*
 * A waiter whose subscription the server refused (an error reply to
 * SUBSCRIBE) polls instead: its sleeps start at WAIT_POLL_MIN_MS and double
 * up to WAIT_POLL_MAX_MS, never past the holder's lease or the wait's end.
 */
#define WAIT_POLL_MIN_MS	20
#define WAIT_POLL_MAX_MS	1000

/*
 * wait_outage.c: a wait rides through Redis outages.  In the wait's
 * PG_CATCH, wait_outage_catch says what to do with the ERROR; after the
 * catch block, wait_outage_pause backs off (OUTAGE_BACKOFF_MIN_MS doubling
 * to OUTAGE_BACKOFF_MAX_MS) before the wait resumes; wait_outage_fail ends
 * a wait whose end came during an outage (08006).
 */
#define OUTAGE_BACKOFF_MIN_MS	50
#define OUTAGE_BACKOFF_MAX_MS	500

typedef enum WaitOutageAction
{
	WAIT_OUTAGE_RETHROW,		/* not an outage: the ERROR ends the wait */
	WAIT_OUTAGE_RIDE,			/* flushed: pause, then resume the wait */
	WAIT_OUTAGE_UNREACHABLE		/* the wait's end came during an outage */
} WaitOutageAction;

extern void wait_outage_begin(const char *what, const char *key);
extern void wait_outage_end(void);
extern void wait_outage_answered(void);
extern bool wait_outage_ongoing(void);
extern WaitOutageAction wait_outage_catch(TimestampTz end);
extern void wait_outage_fail(void) pg_attribute_noreturn();
extern void wait_outage_pause(TimestampTz end);

/* lock_wait.c's parts that event_wait.c shares */
extern void lock_wait_context(void *arg);
extern void lock_wait_leave(void);
extern bool lock_wait_listen(RedisConn *sub, const char *channel,
							 const char *name, TimestampTz deadline);
extern int64 lock_wait_poll_sleep(int *poll_ms, int64 pttl);
extern int	lock_wait_turn(TimestampTz until);

typedef bool (*EventCheckFn) (void *arg, const char *message);

extern bool event_wait(const LockName *ln, const char *what,
					   const char *channel, int64 wait_ms,
					   bool honour_lock_timeout, EventCheckFn check_fn,
					   void *arg);

/* waitqueue.c: taking turns among this server's waiters */
extern char *waitqueue_name(const char *server, const char *channel);
extern void waitqueue_join(const char *channel);
extern bool waitqueue_is_first(void);
extern bool waitqueue_has_waiters(const char *channel);
extern bool waitqueue_others_waiting(void);

/* A queued waiter's place (waitqueue_place): how it waits */
typedef enum WaitPlace
{
	WAIT_PLACE_LISTENS,			/* subscribed, reads the channel's messages */
	WAIT_PLACE_SUBSCRIBED,		/* subscribed, sleeps on its latch */
	WAIT_PLACE_ASLEEP			/* not subscribed, sleeps on its latch */
} WaitPlace;

extern WaitPlace waitqueue_place(void);
extern void waitqueue_leave(bool pass_on);

/* lock_exclusive.c: what the multi-lock and the Redlock build on */
extern const char *exclusive_build_acquire(RedisCmd *cmd, const LockName *ln,
											int64 lease_ms, const char *holder,
											bool fenced, bool request_id);
extern void exclusive_refused(const LockName *ln, const AcquireResult *res);
extern void exclusive_build_reconcile(RedisCmd *cmd, RlockKind kind,
									  const char *key, const char *holder,
									  int target);

/*
 * lock_redlock_keep.c: int64s in descending order (qsort), for majorities;
 * this session's Redlocks checked after a change of rlock.redlock_urls
 */
extern int	redlock_compare_desc(const void *a, const void *b);
extern void redlock_recheck_holds(void);

/*
 * semaphore.c, latch.c: the key ({N}:rlock_semaphore) by which a name
 * whose permits rlock set or added stays a semaphore, for the latch
 * scripts to refuse once no permit is out (a semaphore's permits and a
 * latch's count look alike in Redis).
 */
#define SEM_MARKER_SUFFIX	"rlock_semaphore"

/*
 * {N}:rlock_latch marks N a count-down latch while rlock_latch_set_count's
 * count runs (the count-down that reaches zero deletes it): the
 * semaphore's scripts refuse such a name.
 */
#define LATCH_MARKER_SUFFIX	"rlock_latch"

/*
 * wait_graph.c: waits made known.  A slot of shared memory per backend
 * (written by its owner only; changecount first, odd while written), and
 * the same in Redis once the wait lasts.
 */
typedef struct WaitGraphSlot
{
	pg_atomic_uint32 changecount;
	int			pid;			/* 0: not waiting */
	Oid			dboid;
	TimestampTz since;			/* this server's clock */
	int64		redis_since;	/* Redis's, epoch ms; 0: not known there */
	bool		checks;			/* it checks for deadlocks */
	char		kind[WAIT_KIND_LEN];
	int			nkeys;
	int			prefixlen[WAIT_MAX_KEYS];	/* the name is the key past it */
	char		keys[WAIT_MAX_KEYS][RLOCK_MAX_KEY_LEN + 1];
} WaitGraphSlot;

extern void wait_graph_next(const char *kind, const LockName *lns, int n);
extern void wait_graph_begin(const LockName *ln, bool checks);
extern void wait_graph_tick(void);
extern TimestampTz wait_graph_due(void);
extern void wait_graph_end(void);
extern void wait_graph_abandon(void);
extern int	wait_graph_nslots(void);
extern WaitGraphSlot *wait_slots_mine(void);
extern bool wait_graph_read_slot(int i, int pid, WaitGraphSlot *out);

/* wait_read.c, for wait_blockers.c: a reply's text; an error reply */
extern char *wait_reply_text(const RReply *r);
extern bool wait_read_refused(RReply *r, const char *what);

/* deadlock.c: the check a waiter makes (40P01 when it is the victim) */
extern void deadlock_check(const WaitGraphSlot *self);

/*
 * The wait histogram (rlock_stats_histograms): one observation per
 * acquisition call of a kind, from its start to its end however it ends:
 * granted at once (a wait of 0), after waiting, refused, timed out, or an
 * ERROR (lock_timeout, a deadlock, an outage, a cancel).  Two clock reads
 * and two atomics; nothing here does I/O.  result must be volatile.
 */
#define LOCKS_TIMED_CALL(hkind, result, call) \
	do { \
		TimestampTz timed_start_ = GetCurrentTimestamp(); \
		PG_TRY(); \
		{ \
			(result) = (call); \
		} \
		PG_CATCH(); \
		{ \
			stats_observe_since((hkind), RLOCK_MEASURE_WAIT, timed_start_); \
			PG_RE_THROW(); \
		} \
		PG_END_TRY(); \
		stats_observe_since((hkind), RLOCK_MEASURE_WAIT, timed_start_); \
	} while (0)

#endif							/* RLOCK_LOCKS_INT_H */
