/*-------------------------------------------------------------------------
 *
 * lock_rw.c
 *	  The read/write lock, on Redisson's RReadWriteLock layout: a hash at the
 *	  lock's name with "mode" = read or write, "<holder>" -> read count and
 *	  "<holder>:write" -> write count; one timeout key per read hold
 *	  ({name}:<holder>:rwlock_timeout:<k>) carrying that hold's lease; the
 *	  channel redisson_rwlock:{name}, "0" on a read release, "1" on a write
 *	  release.
 *
 * Many readers or one writer.  A writer may also take read locks
 * (downgrade: when its last write hold goes, the lock stays in read mode);
 * a reader asking for the write lock gets an ERROR instead of waiting for
 * itself forever.  In this session's held-lock table (holds_table.c) the
 * read side and the write side of one name are two entries, of kinds
 * RLOCK_KIND_READ and RLOCK_KIND_WRITE.  Blocked acquisitions wait in
 * lock_wait.c on the lock's channel.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "holds/holds.h"
#include "locks/locks.h"
#include "locks/locks_int.h"
#include "base/base.h"

static char *
channel_of(const char *key)
{
	return lockname_derive(key, "redisson_rwlock");
}

static const char *
rw_build_release(RedisCmd *cmd, RlockKind kind, const char *key,
				 const char *holder, int levels, int64 keep_lease_ms)
{
	char	   *latch = lockname_unlock_latch(key);

	rcmd_script(cmd, kind == RLOCK_KIND_WRITE ? RLOCK_SCRIPT_WRITE_RELEASE :
				RLOCK_SCRIPT_READ_RELEASE, 3);
	rcmd_str(cmd, key);
	rcmd_str(cmd, channel_of(key));
	rcmd_str(cmd, latch);
	rcmd_str(cmd, lockname_holder_field(kind, holder));
	rcmd_int(cmd, levels);
	rcmd_int(cmd, lockname_latch_ttl_ms());
	if (kind == RLOCK_KIND_WRITE)
		rcmd_int(cmd, keep_lease_ms);
	return latch;
}

static void
rw_build_reconcile(RedisCmd *cmd, RlockKind kind, const char *key,
				   const char *holder, int target)
{
	rcmd_script(cmd, RLOCK_SCRIPT_RW_RECONCILE, 2);
	rcmd_str(cmd, key);
	rcmd_str(cmd, channel_of(key));
	rcmd_str(cmd, lockname_holder_field(kind, holder));
	rcmd_int(cmd, target);
	rcmd_str(cmd, kind == RLOCK_KIND_WRITE ? "w" : "r");
}

/* The two sides of a read/write lock, released by the kind they are passed. */
const RlockKindOps read_ops = {
	.build_release = rw_build_release,
	.build_reconcile = rw_build_reconcile,
};

const RlockKindOps write_ops = {
	.build_release = rw_build_release,
	.build_reconcile = rw_build_reconcile,
};

static void
upgrade_error(const LockName *ln)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("cannot take the write lock of \"%s\" while holding only its read lock",
					ln->name),
			 errdetail("Upgrading a read lock would wait for itself forever."),
			 errhint("Release the read lock first, or take the write lock before the read lock (a writer may also read).")));
}

/* What an attempt needs, for the waiting loop (lock_wait.c). */
typedef struct RwAttempt
{
	const LockName *ln;
	RlockKind	kind;
	HoldRequest req;
	const char *holder;
} RwAttempt;

/* One attempt: true when acquired; otherwise sets *pttl. */
static bool
rw_try(void *arg, int64 *pttl)
{
	RwAttempt  *a = arg;
	const LockName *ln = a->ln;
	RlockKind	other = (a->kind == RLOCK_KIND_WRITE) ? RLOCK_KIND_READ :
		RLOCK_KIND_WRITE;
	RedisCmd	cmd;
	AcquireResult res;
	bool		fair;

	/*
	 * An owner token's acquisition carries a request id, so that a replay
	 * after a lost reply answers as the first time (a session's own is
	 * settled by its count, holds_acquire.c).
	 */
	char	   *latch = a->req.track ? NULL : lockname_unlock_latch(ln->key);

	rcmd_script(&cmd, a->kind == RLOCK_KIND_WRITE ?
				RLOCK_SCRIPT_WRITE_ACQUIRE : RLOCK_SCRIPT_READ_ACQUIRE,
				latch ? 2 : 1);
	rcmd_arg(&cmd, ln->key, ln->keylen);
	if (latch)
		rcmd_str(&cmd, latch);
	rcmd_int(&cmd, a->req.lease_ms);
	rcmd_str(&cmd, lockname_holder_field(a->kind, a->holder));
	rcmd_str(&cmd, lockname_holder_field(other, a->holder));
	if (a->kind == RLOCK_KIND_READ)
		rcmd_int(&cmd, holds_quota_owner_holds_per_lock(&a->req));
	if (latch)
	{
		rcmd_int(&cmd, lockname_latch_ttl_ms());
		cmd.request_id = true;
	}
	res = holds_run_acquire(ln, a->kind, &a->req, &cmd);
	if (latch)
		route_defer_del(route_backend(), latch);

	if (res.status == 1)
		return true;
	if (res.status == 0)
	{
		*pttl = res.value;
		return false;
	}
	if (res.status == 3)
		upgrade_error(ln);
	if (res.status == 4)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("read lock \"%s\" has too many holds for owner tokens",
						ln->name),
				 errdetail("It has %lld read holds for owner tokens, and rlock.max_owner_holds_per_lock allows %d.",
						   (long long) res.value,
						   rlock_max_owner_holds_per_lock),
				 errhint("Release some of them with their owner tokens, or ask a superuser to raise rlock.max_owner_holds_per_lock.")));
	fair = (res.word != NULL && strcmp(res.word, "fair") == 0);
	ereport(ERROR,
			(errcode(ERRCODE_WRONG_OBJECT_TYPE),
			 errmsg("lock \"%s\" is %s lock, not a read/write lock",
					ln->name, fair ? "a fair" : "an exclusive"),
			 fair ?
			 errhint("Use the rlock_fair_* functions for it, or another name.") :
			 errhint("Use rlock_acquire and rlock_release for it, or another name.")));
	return false;				/* keep compiler quiet */
}

static bool
rw_acquire_untimed(const LockName *ln, RlockKind kind, RlockScope scope,
				   int64 lease_ms, int64 wait_ms, const char *owner,
				   bool honour_lock_timeout)
{
	RwAttempt	attempt;
	int64		pttl;

	Assert(kind == RLOCK_KIND_READ || kind == RLOCK_KIND_WRITE);
	attempt.holder = holds_prepare_acquire(ln, kind, scope, lease_ms, owner,
										   &attempt.req);
	if (owner == NULL && kind == RLOCK_KIND_WRITE)
	{
		/* no round trip to find out that this would wait for itself */
		HeldLock   *r = holds_find(ln->key, RLOCK_KIND_READ);
		HeldLock   *w = holds_find(ln->key, RLOCK_KIND_WRITE);

		if (r != NULL && holds_total(r) > 0 &&
			(w == NULL || holds_total(w) == 0))
			upgrade_error(ln);
	}
	attempt.ln = ln;
	attempt.kind = kind;

	if (rw_try(&attempt, &pttl))
		return true;
	if (wait_ms == 0)
	{
		stats_count(RLOCK_STAT_FAILED);
		return false;
	}
	wait_graph_next(kind == RLOCK_KIND_READ ? "read" : "write", ln, 1);
	return lock_wait(ln, channel_of(ln->key), wait_ms, honour_lock_timeout,
					 kind == RLOCK_KIND_READ, rw_try, NULL, &attempt);
}

/* rw_acquire, its wait counted in the histogram of its kind */
bool
rw_acquire(const LockName *ln, RlockKind kind, RlockScope scope,
		   int64 lease_ms, int64 wait_ms, const char *owner,
		   bool honour_lock_timeout)
{
	volatile bool result = false;

	LOCKS_TIMED_CALL(kind, result,
					 rw_acquire_untimed(ln, kind, scope, lease_ms, wait_ms,
										owner, honour_lock_timeout));
	return result;
}
