/*-------------------------------------------------------------------------
 *
 * crash_cleanup.c
 *	  After a crash restart, release the holds of the dead instance (SPEC.md
 *	  section 6: a crashed server's locks do not wait for their lease).
 *
 * A backend killed by a signal makes the postmaster reinitialise shared
 * memory: a new instance UUID, an empty registry.  The dead instance's
 * holds stay in Redis until their lease runs out (30 s by default, and a
 * fixed lease may be hours), and nobody left can release them: their
 * holder fields name a UUID no session has any more.  The worker of the
 * new instance reads the holds file the old one wrote (holds_file.c) and,
 * when it is this server's (same host, same data directory; a different
 * UUID: a worker restarted within one instance finds its own file),
 * lowers each listed holder's count to zero with the kind's reconcile
 * script: only fields "<dead uuid>:<pid>" (a read/write lock's, a
 * semaphore's permits of that holder), so nothing another holder has is
 * touched, and the waiters are told as by a release.  A Redlock's holds
 * are settled on its own masters.  One LOG line says what was released.
 *
 * The reconcile calls go in round trips of CLEANUP_BATCH holds, none
 * waiting past the worker's next renewal cycle (what is left goes on at
 * the next pass, a second later at most).
 *
 * Until that is done (Redis may be down: retried every second) the file
 * is kept and not overwritten with the new instance's holds; once every
 * listed lease has run out, there is nothing left to release and it gives
 * up.  A file of another server (a copied data directory) is left alone.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "redis/redis.h"
#include "route/route.h"
#include "holds/holds.h"
#include "base/base.h"
#include "worker/worker.h"

/* Wait between attempts while Redis cannot be reached, ms. */
#define RETRY_MS			1000
/* Margin past the last lease before giving up, ms. */
#define GIVE_UP_MARGIN_MS	5000
/* Names listed in the LOG line, at most. */
#define LOG_NAMES_MAX		50
/* Holds released per round trip, at most. */
#define CLEANUP_BATCH		1000

static MemoryContext cleanup_cxt = NULL;
static HoldsFile pending;
static bool *done = NULL;
static bool have_pending = false;
static TimestampTz next_try = 0;
static int64 give_up_ms = 0;
static bool reported_failure = false;
/* what was released so far (in cleanup_cxt) */
static int	nreleased = 0,
			ngone = 0,
			nrefused = 0,
			nnamed = 0;
static StringInfo names = NULL;
static const HoldsFileEntry *first_named = NULL;	/* names' first */
static char previous_uuid[64] = "";

static int64
now_epoch_ms(void)
{
	return (GetCurrentTimestamp() - SetEpochTimestamp()) / 1000;
}

static void
at_exit(int code, Datum arg)
{
	/* a clean exit: the sessions release their holds themselves */
	if (!have_pending)
		holds_file_remove();
}

/* The UUID of this server's previous run ("" when none is known). */
const char *
crash_cleanup_previous_uuid(void)
{
	return previous_uuid;
}

bool
crash_cleanup_pending(void)
{
	return have_pending;
}

/*
 * At the worker's start: read the holds file and keep the dead instance's
 * holds for crash_cleanup_run, when the file is this server's and not this
 * instance's.
 */
void
crash_cleanup_load(void)
{
	MemoryContext old;
	const char *uuid = registry_instance_uuid();

	before_shmem_exit(at_exit, (Datum) 0);
	/* the previous run of this server, however it ended */
	strlcpy(previous_uuid, holds_file_swap_instance(), sizeof(previous_uuid));
	cleanup_cxt = AllocSetContextCreate(TopMemoryContext,
										"rlock crash clean-up",
										ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cleanup_cxt);
	if (uuid == NULL || !holds_file_read(&pending) ||
		strcmp(pending.uuid, uuid) == 0)
	{
		/* none, or this instance's own (a restarted worker) */
		MemoryContextSwitchTo(old);
		MemoryContextReset(cleanup_cxt);
		return;
	}
	if (strcmp(pending.host, holds_file_host()) != 0 ||
		strcmp(pending.datadir, DataDir) != 0)
	{
		ereport(LOG,
				(errmsg("rlock watchdog: not releasing the %d locks listed in \"pg_stat_tmp/rlock_holds\": another server wrote it",
						pending.nholds),
				 errdetail("Instance %s wrote it on host \"%s\" for data directory \"%s\"; this is host \"%s\", data directory \"%s\".",
						   pending.uuid, pending.host, pending.datadir,
						   holds_file_host(), DataDir)));
		MemoryContextSwitchTo(old);
		MemoryContextReset(cleanup_cxt);
		return;
	}
	strlcpy(previous_uuid, pending.uuid, sizeof(previous_uuid));
	if (pending.nholds == 0)
	{
		MemoryContextSwitchTo(old);
		MemoryContextReset(cleanup_cxt);
		return;
	}

	/*
	 * Past the last lease, Redis has let them all go by itself.  The dead
	 * instance renewed its watchdog leases until it died, before now (not
	 * only until the file was last written: it is rewritten on changes,
	 * not on renewals); a fixed lease ends when the file says.
	 */
	give_up_ms = 0;
	for (int i = 0; i < pending.nholds; i++)
	{
		HoldsFileEntry *e = &pending.holds[i];
		int64		until = e->renew_lease_ms > 0 ?
			now_epoch_ms() + e->renew_lease_ms : e->until_ms;

		give_up_ms = Max(give_up_ms, until);
	}
	give_up_ms += GIVE_UP_MARGIN_MS;
	done = palloc0(pending.nholds * sizeof(bool));
	names = makeStringInfo();
	nreleased = ngone = nrefused = nnamed = 0;
	have_pending = true;
	MemoryContextSwitchTo(old);
	ereport(LOG,
			(errmsg("rlock watchdog: releasing the %d locks instance %s of this server held when it ended",
					pending.nholds, pending.uuid)));
}

/* One LOG line naming what was released (and what was already gone). */
static void
report(void)
{
	char		msg[256];
	char		holder[RLOCK_EVENT_HOLDER_LEN] = "";
	const HoldsFileEntry *e = nnamed > 0 ? first_named : NULL;
	const char *released = names->data[0] != '\0' ? names->data : "none";

	/* one event for the run: the first lock released, its holder */
	snprintf(msg, sizeof(msg),
			 "rlock watchdog: crash clean-up released %d locks of instance %s",
			 nreleased, pending.uuid);
	if (e != NULL)
		snprintf(holder, sizeof(holder), "%s:%d", pending.uuid, e->pid);
	(void) rlock_event_record(RLOCK_EVENT_CRASH_CLEANUP,
							  e ? rlock_kind_name(e->kind) : NULL,
							  e ? e->key : NULL, e ? holder : NULL,
							  "%s: Released: %s.  Already gone: %d.  Taken by another kind since: %d.",
							  msg, released, ngone, nrefused);
	ereport(LOG,
			(errmsg_internal("%s", msg),
			 errdetail("Released: %s.  Already gone: %d.  Taken by another kind since: %d.",
					   released, ngone, nrefused)));
}

static void
name_one(StringInfo list, int *named, const HoldsFileEntry *e)
{
	if (*named == 0)
		first_named = e;
	if (*named == LOG_NAMES_MAX)
		appendStringInfoString(list, ", ...");
	if (*named >= LOG_NAMES_MAX)
	{
		(*named)++;
		return;
	}
	appendStringInfo(list, "%s%s \"%s\" (pid %d)",
					 *named > 0 ? ", " : "", rlock_kind_name(e->kind),
					 e->key, e->pid);
	(*named)++;
}

/*
 * The Redlock's holds: settled on its masters by the kind, one holder at
 * a time (what a master that does not answer keeps expires with its
 * lease).
 */
static void
settle_elsewhere(StringInfo list, int *named, int *released)
{
	for (int i = 0; i < pending.nholds; i++)
	{
		HoldsFileEntry *e = &pending.holds[i];
		const char *keys[1];
		int			target[1] = {0};
		int			before[1];
		bool		held[1];

		if (done[i] || kind_is_local(e->kind))
			continue;
		keys[0] = e->key;
		before[0] = e->holds;
		holds_kind_ops(e->kind)->settle(keys, target, before, 1,
										psprintf("%s:%d", pending.uuid, e->pid),
										held, LOG);
		done[i] = true;
		name_one(list, named, e);
		(*released)++;
	}
}

/*
 * One round trip: the reconcile calls of up to CLEANUP_BATCH holds not yet
 * done.  Returns false when Redis did not answer them all.
 */
static bool
cleanup_batch(TimestampTz cap)
{
	RedisCmd   *cmds = palloc(CLEANUP_BATCH * sizeof(RedisCmd));
	int		   *which = palloc(CLEANUP_BATCH * sizeof(int));
	int			n = 0;
	RReply	  **replies = NULL;
	RedisConn  *conn = route_backend();
	bool		ok;

	for (int i = 0; i < pending.nholds && n < CLEANUP_BATCH; i++)
	{
		HoldsFileEntry *e = &pending.holds[i];

		if (done[i])
			continue;
		/* lower "<dead uuid>:<pid>"'s count to nothing */
		holds_kind_ops(e->kind)->build_reconcile(&cmds[n], e->kind, e->key,
												 psprintf("%s:%d", pending.uuid,
														  e->pid),
												 0);
		which[n++] = i;
	}
	if (n == 0)
		return true;
	rconn_set_deadline_cap(conn, cap);
	ok = route_run(conn, cmds, n, &replies,
				   reported_failure ? DEBUG1 : LOG, NULL);
	rconn_set_deadline_cap(conn, DT_NOEND);
	for (int j = 0; j < n && replies != NULL; j++)
	{
		RReply	   *r = replies[j];
		HoldsFileEntry *e = &pending.holds[which[j]];

		if (r == NULL)
		{
			ok = false;			/* a node that did not answer: again */
			continue;
		}
		done[which[j]] = true;
		if (r->type == RREPLY_INTEGER && r->integer > 0)
		{
			nreleased++;
			name_one(names, &nnamed, e);
		}
		else if (r->type == RREPLY_INTEGER)
			ngone++;
		else
		{
			/* another kind of value under that name now: not ours to touch */
			if (r->type != RREPLY_ERROR)
				rconn_distrust(r);
			nrefused++;
		}
	}
	return ok && replies != NULL;
}

/* Forget the dead instance's holds (and what was said of them). */
static void
finish(void)
{
	have_pending = false;
	done = NULL;
	names = NULL;
	MemoryContextReset(cleanup_cxt);
}

/*
 * Release what the dead instance held, if anything is left to: returns
 * true when nothing is (any more), false while it must be tried again (at
 * most every RETRY_MS after a failure).  Waits for Redis no later than
 * cap, and goes on next time with what is left.  One LOG line says what
 * was released, once it is all done.
 */
bool
crash_cleanup_run(TimestampTz cap)
{
	if (!have_pending)
		return true;
	if (GetCurrentTimestamp() < next_try || cap <= GetCurrentTimestamp())
		return false;
	if (now_epoch_ms() > give_up_ms)
	{
		ereport(LOG,
				(errmsg("rlock watchdog: gave up releasing the locks of instance %s: their leases have run out",
						pending.uuid)));
		if (nreleased + ngone + nrefused > 0)
			report();
		finish();
		return true;
	}

	/* (names grows in its own context; the rest is the caller's) */
	settle_elsewhere(names, &nnamed, &nreleased);
	for (;;)
	{
		bool		all = true;

		if (!cleanup_batch(cap))
		{
			reported_failure = true;
			next_try = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												   RETRY_MS);
			return false;
		}
		for (int i = 0; i < pending.nholds && all; i++)
			all = done[i];
		if (all)
			break;
		if (cap <= GetCurrentTimestamp())
			return false;		/* the rest next time */
	}
	report();
	finish();
	return true;
}
