/*-------------------------------------------------------------------------
 *
 * semaphore.c
 *	  The semaphore, on Redisson's RPermitExpirableSemaphore layout: a
 *	  string key at the semaphore's name holding the permits available,
 *	  the sorted set {name}:timeout of the permits out (permit ids scored
 *	  by expiry, epoch ms), the permits available published on
 *	  redisson_sc:{name} when permits come back.
 *
 * What rlock adds is that permits are held like locks: a permit this
 * session takes is a leased permit id, "<holder>:<k>", recorded in the
 * held-lock table as one hold of kind RLOCK_KIND_SEMAPHORE (its k-th
 * hold), in session or transaction scope.  So the table's machinery
 * applies to permits as to locks: given back at the end of their scope
 * (savepoint rollback included), renewed by the watchdog while their lease
 * is NULL (the renew script's "s" mode), shown in rlock_locks, reported
 * lost when Redis no longer has them, and expired (never leaked) when the
 * session or the server dies.  A blocked acquisition waits on the channel
 * (lock_wait.c), never sleeping past the soonest expiry of a permit out.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/builtins.h"

#include "redis/redis.h"
#include "holds/holds.h"
#include "locks/locks.h"
#include "locks/locks_int.h"
#include "base/base.h"

#define SEM_CHANNEL		"redisson_sc"

/*
 * Start cmd as the script id (nkeys keys) on the semaphore at key: its
 * three keys; the caller adds any other.
 */
static void
sem_script(RedisCmd *cmd, RlockScriptId id, int nkeys, const char *key)
{
	rcmd_script(cmd, id, nkeys);
	rcmd_str(cmd, key);
	rcmd_str(cmd, lockname_suffixed(key, "timeout"));
	rcmd_str(cmd, lockname_derive(key, SEM_CHANNEL));
}

/*
 * The name is another kind of object (what: "lock", "latch" or "value"),
 * or a number rlock did not set ("unmarked").
 */
static void
sem_wrong_kind(const LockName *ln, const char *what)
{
	if (what != NULL && strncmp(what, "unmarked", 8) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("semaphore \"%s\" was not set through rlock",
						ln->name),
				 errdetail("Redis key \"%s\" (or \"%s\") exists without rlock's marker \"%s\": it may be an application's value or a semaphore a Redisson client made, and this role may not take it as a semaphore.",
						   ln->key, lockname_suffixed(ln->key, "timeout"),
						   lockname_suffixed(ln->key, SEM_MARKER_SUFFIX)),
				 errhint("A role allowed to run rlock_semaphore_add_permits adopts it, e.g. SELECT rlock_semaphore_add_permits(%s, 0).",
						 quote_literal_cstr(ln->name))));
	if (what != NULL && strncmp(what, "latch", 5) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("semaphore \"%s\" is a count-down latch, not a semaphore",
						ln->name),
				 errdetail("Redis key \"%s\" shows a latch of that name whose count runs.",
						   lockname_suffixed(ln->key, LATCH_MARKER_SUFFIX)),
				 errhint("Use the rlock_latch_* functions for it, or another name.")));
	if (what != NULL && strncmp(what, "lock", 4) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("semaphore \"%s\" is a lock, not a semaphore",
						ln->name),
				 errhint("Use the lock functions for it, or another name.")));
	ereport(ERROR,
			(errcode(ERRCODE_WRONG_OBJECT_TYPE),
			 errmsg("Redis key of semaphore \"%s\" is not a semaphore",
					ln->name),
			 errdetail("Another kind of Redis value already uses that key (or \"%s\"); a semaphore's is a decimal number of permits.",
					   lockname_suffixed(ln->key, "timeout")),
			 errhint("Choose another semaphore name, or set rlock.key_prefix.")));
}

static const char *
sem_build_release(RedisCmd *cmd, RlockKind kind, const char *key,
				  const char *holder, int levels, int64 keep_lease_ms)
{
	char	   *latch = lockname_unlock_latch(key);

	HeldLock   *h = holds_find(key, RLOCK_KIND_SEMAPHORE);

	sem_script(cmd, RLOCK_SCRIPT_SEM_RELEASE, 4, key);
	rcmd_str(cmd, latch);
	rcmd_str(cmd, holder);
	rcmd_int(cmd, levels);
	rcmd_int(cmd, lockname_latch_ttl_ms());
	/* the permits the table counts after this release (already taken off) */
	rcmd_int(cmd, h != NULL ? holds_total(h) : -1);
	rcmd_int(cmd, keep_lease_ms);
	return latch;
}

/*
 * The reconcile also says how far the holder's permit ids may reach (the
 * most the table counted: after a loss the target is 0, and the ids left
 * past a gap must still be found by id, scripts_sync.c).
 */
static void
sem_build_reconcile(RedisCmd *cmd, RlockKind kind, const char *key,
					const char *holder, int target)
{
	HeldLock   *h = holds_find(key, RLOCK_KIND_SEMAPHORE);

	sem_script(cmd, RLOCK_SCRIPT_SEM_RECONCILE, 3, key);
	rcmd_str(cmd, holder);
	rcmd_int(cmd, target);
	rcmd_int(cmd, Max(target, h != NULL ? h->high_count : 0));
}

const RlockKindOps semaphore_ops = {
	.build_release = sem_build_release,
	.build_reconcile = sem_build_reconcile,
};

/* What an attempt needs, for the waiting loop (lock_wait.c). */
typedef struct SemAttempt
{
	const LockName *ln;
	HoldRequest req;
	const char *holder;
	bool		may_wait;		/* the call waits when the permits are out */
	bool		adopt;			/* may mark a semaphore rlock did not set */
} SemAttempt;

/*
 * One attempt: true when the permits were taken; otherwise *pttl is how
 * long until the soonest permit out expires (-1: none out).
 */
static bool
sem_try(void *arg, int64 *pttl)
{
	SemAttempt *a = arg;
	const LockName *ln = a->ln;
	HeldLock   *h = holds_find(ln->key, RLOCK_KIND_SEMAPHORE);
	RedisCmd	cmd;
	AcquireResult res;
	char	   *request = lockname_unlock_latch(ln->key);

	/*
	 * The attempt's request latch (KEYS[6]): resent after a lost reply, a
	 * grant answers as the first time and takes nothing more
	 * (scripts_sync.c).
	 */
	sem_script(&cmd, RLOCK_SCRIPT_SEM_ACQUIRE, 6, ln->key);
	rcmd_str(&cmd, lockname_suffixed(ln->key, LATCH_MARKER_SUFFIX));
	rcmd_str(&cmd, lockname_suffixed(ln->key, SEM_MARKER_SUFFIX));
	rcmd_str(&cmd, request);
	rcmd_int(&cmd, a->req.levels);
	rcmd_int(&cmd, a->req.lease_ms);
	rcmd_str(&cmd, a->holder);
	rcmd_int(&cmd, h != NULL ? holds_total(h) : 0);
	rcmd_int(&cmd, a->adopt ? 1 : 0);
	rcmd_int(&cmd, lockname_latch_ttl_ms());
	res = holds_run_acquire(ln, RLOCK_KIND_SEMAPHORE, &a->req, &cmd);
	/* answered: nothing will replay this attempt now */
	if (res.status == 1)
		route_defer_del(route_backend(), request);

	switch (res.status)
	{
		case 1:
			lock_wait_permits(true, res.has_extra ? res.extra : 0);
			return true;
		case 0:
			lock_wait_permits(false, res.has_extra ? res.extra : 0);
			/* a sleep bound: whatever the server says, 0 .. a minute */
			*pttl = Max(0, Min(res.value, 60000));
			return false;
		case 3:
			if (res.has_extra && res.extra > 0 && a->req.levels <= res.value)
			{
				/* only its own permits stand in the way: never wait */
				if (!a->may_wait)
				{
					lock_wait_permits(false, 0);
					*pttl = 0;
					return false;
				}
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("semaphore \"%s\" has %lld permits in all, and this session holds %lld of them",
								ln->name, (long long) res.value,
								(long long) res.extra),
						 errdetail("Waiting for %d more would wait for this session's own permits.",
								   a->req.levels),
						 errhint("Release some of this session's permits first, or ask for fewer.")));
			}
			if (a->may_wait)
			{
				/*
				 * Fewer permits in all than asked for, for now: a wait
				 * waits for them to be added (bounded by its wait,
				 * lock_timeout, statement_timeout), as a lock's waiter
				 * waits; only an answer now is refused.
				 */
				lock_wait_permits(false, 0);
				*pttl = -1;
				return false;
			}
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("semaphore \"%s\" has fewer permits than %d in all",
							ln->name, a->req.levels),
					 errdetail("It has %lld permits, available and taken together.",
							   (long long) res.value),
					 errhint("Set its permits with rlock_semaphore_set_permits or rlock_semaphore_add_permits.")));
			break;
		default:
			sem_wrong_kind(ln, res.word);
	}
	return false;				/* keep compiler quiet */
}

static bool
semaphore_acquire_untimed(const LockName *ln, RlockScope scope, int permits,
						  int64 lease_ms, int64 wait_ms, bool honour_lock_timeout,
						  bool adopt)
{
	int64		pttl;
	SemAttempt	attempt;

	attempt.holder = holds_prepare_acquire(ln, RLOCK_KIND_SEMAPHORE, scope,
										   lease_ms, NULL, &attempt.req);
	attempt.req.levels = permits;
	attempt.ln = ln;
	attempt.may_wait = (wait_ms != 0);
	attempt.adopt = adopt;
	if (sem_try(&attempt, &pttl))
		return true;
	if (wait_ms == 0)
	{
		stats_count(RLOCK_STAT_FAILED);
		return false;
	}
	/*
	 * Once this one has its permits, the next waiter looks too while some
	 * are left; and one that cannot take what it asks for, although some
	 * are free, lets the next one look.
	 */
	wait_graph_next("semaphore", ln, 1);
	return lock_wait(ln, lockname_derive(ln->key, SEM_CHANNEL), wait_ms,
					 honour_lock_timeout, LOCK_WAIT_PERMITS, sem_try, NULL,
					 &attempt);
}

bool
semaphore_release(const LockName *ln, int permits)
{
	return holds_release_levels(ln, RLOCK_KIND_SEMAPHORE, permits);
}

/* Run one of the semaphore's scripts without holds; its integer answer. */
static int64
sem_run(const LockName *ln, RlockScriptId id, bool with_arg, int64 arg)
{
	RedisCmd	cmd;
	RReply	   *r;
	bool		marks = (id != RLOCK_SCRIPT_SEM_AVAILABLE);
	RedisConn  *conn = route_backend();
	char	   *request = marks ? lockname_unlock_latch(ln->key) : NULL;
	int64		v;

	/*
	 * setting or adding permits marks the name a semaphore (its 4th key;
	 * deleting reads it: only a marked one goes); a name marked a latch
	 * (the last key) is refused
	 */
	sem_script(&cmd, id, marks ? 6 : 4, ln->key);
	if (marks)
		rcmd_str(&cmd, lockname_suffixed(ln->key, SEM_MARKER_SUFFIX));
	rcmd_str(&cmd, lockname_suffixed(ln->key, LATCH_MARKER_SUFFIX));
	/* a script that changes it is answered once (scripts_sync.c) */
	if (request != NULL)
		rcmd_str(&cmd, request);
	if (with_arg)
		rcmd_int(&cmd, arg);
	if (request != NULL)
		rcmd_int(&cmd, lockname_latch_ttl_ms());
	r = route_run1(conn, &cmd, ln->name);
	if (rconn_reply_is(r, "RLOCKKIND"))
		sem_wrong_kind(ln, rconn_error_word(r, "RLOCKKIND"));
	if (rconn_reply_is(r, "RLOCKRANGE"))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("permits of semaphore \"%s\" would leave the range of an integer",
						ln->name),
				 errdetail("A semaphore's permits available stay within the range of an integer, as rlock_semaphore_available returns them."),
				 errhint("Nothing was changed.")));
	if (r->type == RREPLY_ERROR)
		rconn_reply_error(r, ERROR, ln->name);
	if (r->type != RREPLY_INTEGER)
		rconn_unexpected_reply(r, ln->name);
	v = r->integer;
	/* answered: nothing will replay this request now */
	if (request != NULL)
		route_defer_del(conn, request);
	return v;
}

/* trySetPermits: only a semaphore never set; false otherwise. */
bool
semaphore_set_permits(const LockName *ln, int permits)
{
	return sem_run(ln, RLOCK_SCRIPT_SEM_SET_PERMITS, true, permits) == 1;
}

/* addPermits (negative: fewer); returns the permits available after. */
int64
semaphore_add_permits(const LockName *ln, int permits)
{
	return sem_run(ln, RLOCK_SCRIPT_SEM_ADD_PERMITS, true, permits);
}

int64
semaphore_available(const LockName *ln)
{
	/* (what a rollback to a savepoint gave back counts: settle it first) */
	holds_settle();
	return sem_run(ln, RLOCK_SCRIPT_SEM_AVAILABLE, false, 0);
}

/*
 * Delete the semaphore with its permits out: their holders (this
 * session's included) find them gone at their next renewal or call, and
 * report them lost; waiters wake and look again.  false when absent.
 */
bool
semaphore_delete(const LockName *ln)
{
	return sem_run(ln, RLOCK_SCRIPT_SEM_DELETE, false, 0) == 1;
}

/* semaphore_acquire, its wait counted in the histogram of its kind */
bool
semaphore_acquire(const LockName *ln, RlockScope scope, int permits,
				  int64 lease_ms, int64 wait_ms, bool honour_lock_timeout,
				  bool adopt)
{
	volatile bool result = false;

	LOCKS_TIMED_CALL(RLOCK_KIND_SEMAPHORE, result,
					 semaphore_acquire_untimed(ln, scope, permits, lease_ms,
											   wait_ms, honour_lock_timeout,
											   adopt));
	return result;
}
