/*-------------------------------------------------------------------------
 *
 * holds_strand.c
 *	  A release that could not reach Redis, handed to the background
 *	  worker: the session lets the lock go, its registry entry stays,
 *	  marked stranded (registry_strand.c), and the worker releases it once
 *	  Redis answers, or drops it when its lease has run out
 *	  (src/worker/stranded.c).  Also the refusal of a name whose release
 *	  is still stranded.
 *
 * Every release goes through the batch (holds_batch.c): an explicit
 * rlock_release (or a semaphore's), the releases at transaction end and at
 * session exit.  When its round trip gets no answer for a hold that leaves
 * the session nothing of the name, the batch calls holds_strand instead of
 * leaving the entry uncertain: before, a transaction end or an exit let the
 * lock sit in Redis for its whole lease, logged nowhere, and an explicit
 * release failed while the session still seemed to hold the name.  Now a
 * LOG line names the lock, its holder and how long it may stay in Redis at
 * most, the session (if it is still there) gets a WARNING saying that the
 * worker finishes the release, and rlock_release returns true: the lock is
 * no longer the session's (README, "Releases that meet an outage").
 *
 * Only kinds that live on rlock.redis_url strand (a Redlock's settle never
 * leaves a lock uncertain), and only with rlock preloaded (the worker).
 * Marking the entry is shared memory only, so it is safe in commit, abort
 * and exit callbacks; nothing here waits or raises an ERROR, but the
 * refusal of a name called from an acquisition.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "storage/ipc.h"

#include "holds/holds.h"
#include "holds/holds_int.h"
#include "base/base.h"

/*
 * Could h's release be left to the worker, should its round trip fail?
 * (The session then holds nothing of the name.)
 */
bool
holds_can_strand(const HeldLock *h)
{
	return registry_available() && kind_is_local(h->kind) &&
		holds_total(h) == 0;
}

/*
 * h's release (or reconcile down to nothing) got no answer: hand it to the
 * worker, say so, and take h out of the table.  Returns false, changing
 * nothing, when it cannot be handed over (the caller leaves h uncertain,
 * as before).  The session, unless it is exiting, hears a WARNING.
 */
bool
holds_strand(HeldLock *h)
{
	int64		left_ms;
	bool		sem = (h->kind == RLOCK_KIND_SEMAPHORE);

	if (!holds_can_strand(h))
		return false;
	left_ms = registry_strand(h->key, h->kind);
	if (left_ms < 0)
		return false;

	if (left_ms > 0)
	{
		const char *msg;

		msg = rlock_event_record(RLOCK_EVENT_STRANDED_RELEASE,
								 rlock_kind_name(h->kind), h->key,
								 rlock_backend_holder(),
								 "rlock: release of %s \"%s\" held by %s could not reach Redis; the background worker will finish it",
								 sem ? "the permits of semaphore" : "lock",
								 h->key, rlock_backend_holder());
		ereport(LOG_SERVER_ONLY,
				(errmsg_internal("%s", msg),
				 errdetail("It stays in Redis for at most %lld ms (the rest of its lease) unless the worker releases it sooner.",
						   (long long) left_ms)));
		if (!proc_exit_inprogress)
			ereport(WARNING,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("%s \"%s\" could not be released in Redis now",
							sem ? "semaphore" : "lock", h->key),
					 errdetail("Redis could not be reached.  The %s no longer this session's: the background worker releases it once Redis answers, or its lease ends it within %lld ms.",
							   sem ? "permits are" : "lock is",
							   (long long) left_ms),
					 errhint("rlock_locks shows it as \"stranded\" until then.")));
	}

	/* the session no longer holds it; the entry stays the worker's */
	holds_clear_xact(h);
	h->session_count = 0;
	holds_set_uncertain(h, false);
	holds_drop_if_unused(h);
	return true;
}

/*
 * An acquisition of ln by this session while its release is stranded:
 * refused (55P03), for the worker's release would end the new hold too
 * (the same holder's field) and the registry has one entry per name.
 */
void
holds_refuse_stranded(const LockName *ln)
{
	if (!registry_is_stranded(ln->key))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
			 errmsg("lock \"%s\" is still being released by the background worker",
					ln->name),
			 errdetail("This session's earlier release of it could not reach Redis; the worker finishes it once Redis answers, or when its lease runs out."),
			 errhint("Try again later; rlock_locks shows it as \"stranded\" until then.")));
}
