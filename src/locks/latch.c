/*-------------------------------------------------------------------------
 *
 * latch.c
 *	  The count-down latch, on Redisson's RCountDownLatch layout: a string
 *	  key at the latch's name holding its count (absent: zero), the
 *	  messages "1" (a new count was set) and "0" (zero was reached) on
 *	  redisson_countdownlatch__channel__{name}.
 *
 * A latch has no holders, so nothing of it enters the held-lock table:
 * setting a count, counting down and reading it are one script each
 * (scripts_sync.c), and awaiting it is a wait on its channel (event_wait,
 * lock_wait.c) that reads the count on every message ("0" or "1": a
 * message is a hint, anyone may publish) and when it looks on its own
 * (every few seconds, or after the connection broke), and ends when the
 * count is zero.  Only a count rlock set (marked) is counted down by a
 * role without rlock_latch_adopt's grant.  A latch shares the space of names with
 * the locks and the semaphores: its scripts refuse a name used by either
 * (a semaphore once rlock set or added its permits, or once it has
 * permits out: before that, its key is a count like a latch's), setting a
 * count marks the name a latch ({N}:rlock_latch, deleted with the count at
 * zero) for the semaphore's scripts to refuse, and lockname.c refuses the
 * keys derived from names.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>

#include "utils/builtins.h"

#include "redis/redis.h"
#include "holds/holds.h"
#include "locks/locks.h"
#include "locks/locks_int.h"
#include "base/base.h"

/*
 * The latch's channel: Redisson names it "redisson_countdownlatch__channel__"
 * followed by the name in braces, whether or not the name has a hash tag of
 * its own (not the prefixName rule of the locks' channels).
 */
static char *
latch_channel(const char *key)
{
	return psprintf("redisson_countdownlatch__channel__{%s}", key);
}

/* A latch script refused the name: it is another kind of object. */
static void
latch_wrong_kind(const LockName *ln, const char *found)
{
	if (found == NULL)
		found = "value";
	if (strcmp(found, "unmarked") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("latch \"%s\" was not set through rlock", ln->name),
				 errdetail("Redis key \"%s\" holds a count without rlock's marker \"%s\": it may be an application's counter or a latch a Redisson client set, and this role may not count it down.",
						   ln->key,
						   lockname_suffixed(ln->key, LATCH_MARKER_SUFFIX)),
				 errhint("A role allowed to run rlock_latch_adopt adopts it: SELECT rlock_latch_adopt(%s).",
						 quote_literal_cstr(ln->name))));
	if (strcmp(found, "lock") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("latch \"%s\" is a lock, not a count-down latch",
						ln->name),
				 errhint("Use the lock functions for it, or another name.")));
	if (strcmp(found, "semaphore") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("latch \"%s\" is a semaphore, not a count-down latch",
						ln->name),
				 errdetail("Redis key \"%s\" (its permits out) or \"%s\" (its permits set or added through rlock) shows a semaphore of that name.",
						   lockname_suffixed(ln->key, "timeout"),
						   lockname_suffixed(ln->key, SEM_MARKER_SUFFIX)),
				 errhint("Use the rlock_semaphore_* functions for it, or another name.")));
	ereport(ERROR,
			(errcode(ERRCODE_WRONG_OBJECT_TYPE),
			 errmsg("Redis key of latch \"%s\" is not a count-down latch",
					ln->name),
			 errdetail("Another kind of Redis value already uses that key; a latch's is a positive decimal integer."),
			 errhint("Choose another latch name, or set rlock.key_prefix.")));
}

/*
 * Run one of the latch's scripts; returns its integer answer.  arg: set
 * count's count, count down's adopt flag; arg2: set count's expiry (ms).
 * A script that changes the latch carries a request latch of its own
 * (KEYS[6]), which a replay after a lost reply finds (scripts_sync.c), and
 * which is deleted in front of the next round trip once the answer is here.
 */
static int64
latch_run(const LockName *ln, RlockScriptId id, int64 arg, int64 arg2)
{
	RedisCmd	cmd;
	RReply	   *r;
	RedisConn  *conn = route_backend();
	char	   *request = NULL;
	int64		v;

	if (id == RLOCK_SCRIPT_LATCH_COUNT_DOWN ||
		id == RLOCK_SCRIPT_LATCH_SET_COUNT ||
		id == RLOCK_SCRIPT_LATCH_DELETE)
		request = lockname_unlock_latch(ln->key);
	rcmd_script(&cmd, id, request != NULL ? 6 : 5);
	rcmd_arg(&cmd, ln->key, ln->keylen);
	rcmd_str(&cmd, latch_channel(ln->key));
	rcmd_str(&cmd, lockname_suffixed(ln->key, "timeout"));
	rcmd_str(&cmd, lockname_suffixed(ln->key, SEM_MARKER_SUFFIX));
	rcmd_str(&cmd, lockname_suffixed(ln->key, LATCH_MARKER_SUFFIX));
	if (request != NULL)
		rcmd_str(&cmd, request);
	if (id == RLOCK_SCRIPT_LATCH_SET_COUNT ||
		id == RLOCK_SCRIPT_LATCH_COUNT_DOWN)
		rcmd_int(&cmd, arg);
	if (id == RLOCK_SCRIPT_LATCH_SET_COUNT)
		rcmd_int(&cmd, arg2);
	if (request != NULL)
		rcmd_int(&cmd, lockname_latch_ttl_ms());
	r = route_run1(conn, &cmd, ln->name);
	if (rconn_reply_is(r, "RLOCKKIND"))
		latch_wrong_kind(ln, rconn_error_word(r, "RLOCKKIND"));
	if (rconn_reply_is(r, "RLOCKRANGE"))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("count of latch \"%s\" is out of range for bigint",
						ln->name),
				 errdetail("Redis key \"%s\" holds a number beyond a latch's count.",
						   ln->key),
				 errhint("Nothing was changed.")));
	if (r->type == RREPLY_ERROR)
		rconn_reply_error(r, ERROR, ln->name);
	if (r->type == RREPLY_STRING)
	{
		/* a count above 0: the stored text (or a replay's recorded answer) */
		char	   *end;

		errno = 0;
		v = strtoll(r->str, &end, 10);
		if (r->len == 0 || *end != '\0' || errno != 0 || v < -1)
			latch_wrong_kind(ln, "value");
	}
	else if (r->type == RREPLY_INTEGER)
		v = r->integer;
	else
	{
		rconn_unexpected_reply(r, ln->name);
		v = 0;					/* keep compiler quiet */
	}
	/* answered: nothing will replay this request now */
	if (request != NULL)
		route_defer_del(conn, request);
	return v;
}

/*
 * trySetCount: set the count of a latch at zero (or absent); false when it
 * is counting.  A count of 0 leaves it at zero.  expire_ms > 0: the latch
 * (and its marker) disappear after it, whether or not it reached zero.
 */
bool
latch_set_count(const LockName *ln, int64 count, int64 expire_ms)
{
	Assert(count >= 0);
	return latch_run(ln, RLOCK_SCRIPT_LATCH_SET_COUNT, count, expire_ms) == 1;
}

/*
 * Count down once; returns the count after it (never below 0).  An absent
 * latch is not a latch at zero to the caller (SPEC.md 5.5, "Absent is not
 * done"): it gets 0 and a WARNING naming the latch.
 */
int64
latch_count_down(const LockName *ln, bool adopt)
{
	int64		v = latch_run(ln, RLOCK_SCRIPT_LATCH_COUNT_DOWN, adopt ? 1 : 0, 0);

	if (v < 0)
	{
		ereport(WARNING,
				(errcode(ERRCODE_WARNING),
				 errmsg("latch \"%s\" does not exist: nothing was counted down",
						ln->name),
				 errdetail("Redis has no count at key \"%s\": the latch was never set, already reached zero, was deleted or expired, or Redis lost it.",
						   ln->key)));
		return 0;
	}
	return v;
}

bool
latch_adopt(const LockName *ln)
{
	return latch_run(ln, RLOCK_SCRIPT_LATCH_ADOPT, 0, 0) == 1;
}

/* The count, -1 when the latch is absent. */
static int64
latch_count_or_absent(const LockName *ln)
{
	return latch_run(ln, RLOCK_SCRIPT_LATCH_COUNT, 0, 0);
}

int64
latch_count(const LockName *ln)
{
	return Max(latch_count_or_absent(ln), 0);
}

bool
latch_delete(const LockName *ln)
{
	return latch_run(ln, RLOCK_SCRIPT_LATCH_DELETE, 0, 0) == 1;
}

/*
 * The await's check: a message ("0" zero reached, "1" a new count), or
 * none, is a reason to read the count, never the answer itself: anyone
 * may PUBLISH on the channel, so true only when the count is zero (or the
 * latch absent), as Redisson's await does.
 */
static bool
latch_reached_zero(void *arg, const char *message)
{
	return latch_count((const LockName *) arg) == 0;
}

static bool
latch_await_untimed(const LockName *ln, int64 wait_ms, bool honour_lock_timeout,
					bool must_exist)
{
	int64		count = latch_count_or_absent(ln);

	if (count < 0 && must_exist)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("latch \"%s\" does not exist", ln->name),
				 errdetail("Redis has no count at key \"%s\": the latch was never set, already reached zero, was deleted or expired, or Redis lost it (a restart without persistence).",
						   ln->key),
				 errhint("Set its count with rlock_latch_set_count before awaiting it; without must_exist an absent latch counts as reached zero.")));
	if (count <= 0)
		return true;
	if (wait_ms == 0)
		return false;
	return event_wait(ln, "latch", latch_channel(ln->key),
					  wait_ms, honour_lock_timeout, latch_reached_zero,
					  (void *) ln);
}

/* latch_await, its wait counted in the histogram of its kind */
bool
latch_await(const LockName *ln, int64 wait_ms, bool honour_lock_timeout,
			bool must_exist)
{
	volatile bool result = false;

	LOCKS_TIMED_CALL(RLOCK_HIST_LATCH, result,
					 latch_await_untimed(ln, wait_ms, honour_lock_timeout,
										 must_exist));
	return result;
}
