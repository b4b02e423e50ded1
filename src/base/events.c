/*-------------------------------------------------------------------------
 *
 * events.c
 *	  The ring of this server's recent events behind the rlock_events view
 *	  (SPEC.md section 12): locks lost, renewals failing and recovering,
 *	  force releases, deadlocks, stranded releases, reconnects, crash
 *	  clean-ups, waits that rode out an outage.
 *
 * It lives at the bottom so that every layer, and the worker, can record:
 * what happened is found where it happens (a renewal cycle, a deadlock
 * check, a release at COMMIT or at exit).  Each event is also a LOG line
 * (or the WARNING a user already saw) with the same words as the ring's
 * detail: rlock_event() does both, rlock_event_record() only the ring, for
 * a caller whose own ereport says the words it returns.
 *
 * Recording is called from transaction and exit callbacks, the worker and
 * error paths, so it never ERRORs, never waits for more than a spinlock
 * held for one memcpy, and never allocates: the entry is built on the
 * stack, the text cut to fixed sizes (on a character's boundary, or
 * escaped as printable.c does), then copied into the slot of the next
 * sequence number under the spinlock.  The ring keeps the newest
 * rlock.events_max entries; a reader copies it under the same spinlock
 * (one entry at a time, so writers are never held up for long).
 *
 * The ring is in shared memory only when rlock is preloaded (its size is
 * fixed when shared memory is made: rlock.events_max is a postmaster
 * setting); loaded later by a backend, an event is only its LOG line.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/timestamp.h"

#include "base/base.h"

int			rlock_events_max = 1000;

typedef struct RlockEventsShared
{
	slock_t		mutex;			/* protects next_seq and the entries */
	uint64		next_seq;		/* the next event's sequence number (from 1) */
	int			size;			/* entries in the ring */
	RlockEventEntry entries[FLEXIBLE_ARRAY_MEMBER];
} RlockEventsShared;

static RlockEventsShared *events_shared = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* The text of the last event this process recorded (rlock_event_record). */
static char event_text[RLOCK_EVENT_DETAIL_LEN];

static const char *const event_names[RLOCK_NUM_EVENTS] = {
	[RLOCK_EVENT_LOST] = "lost",
	[RLOCK_EVENT_RENEW_FAILING] = "renew_failing",
	[RLOCK_EVENT_RENEW_RECOVERED] = "renew_recovered",
	[RLOCK_EVENT_FORCE_RELEASE] = "force_release",
	[RLOCK_EVENT_DEADLOCK] = "deadlock",
	[RLOCK_EVENT_STRANDED_RELEASE] = "stranded_release",
	[RLOCK_EVENT_STRANDED_SETTLED] = "stranded_settled",
	[RLOCK_EVENT_RECONNECT] = "reconnect",
	[RLOCK_EVENT_CRASH_CLEANUP] = "crash_cleanup",
	[RLOCK_EVENT_OUTAGE_WAIT] = "outage_wait",
	[RLOCK_EVENT_OUTAGE_RIDDEN_OUT] = "outage_ridden_out",
	[RLOCK_EVENT_FAILOVER] = "failover",
};

const char *
rlock_event_name(RlockEventType ev)
{
	if ((int) ev < 0 || ev >= RLOCK_NUM_EVENTS || event_names[ev] == NULL)
		return "unknown";
	return event_names[ev];
}

static Size
events_size(void)
{
	return add_size(offsetof(RlockEventsShared, entries),
					mul_size(rlock_events_max, sizeof(RlockEventEntry)));
}

static void
events_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(events_size());
}

static void
events_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	events_shared = ShmemInitStruct("rlock events", events_size(), &found);
	if (!found)
	{
		SpinLockInit(&events_shared->mutex);
		events_shared->next_seq = 1;
		events_shared->size = rlock_events_max;
		memset(events_shared->entries, 0,
			   mul_size(rlock_events_max, sizeof(RlockEventEntry)));
	}
	LWLockRelease(AddinShmemInitLock);
}

void
events_install_hooks(void)
{
	RLOCK_SHMEM_REQUEST(prev_shmem_request_hook, events_shmem_request);
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = events_shmem_startup;
}

bool
rlock_events_available(void)
{
	return events_shared != NULL;
}

/* s, shown safely, cut to fit dst ("" for NULL). */
static void
copy_text(char *dst, size_t size, const char *s)
{
	if (s == NULL)
	{
		dst[0] = '\0';
		return;
	}
	rlock_printable_into(dst, size, s, strlen(s));
}

static const char *event_vrecord(RlockEventType ev, const char *kind,
								 const char *lock, const char *holder,
								 const char *fmt, va_list args)
			pg_attribute_printf(5, 0);

static const char *
event_vrecord(RlockEventType ev, const char *kind, const char *lock,
			  const char *holder, const char *fmt, va_list args)
{
	RlockEventEntry e;
	char		raw[RLOCK_EVENT_DETAIL_LEN];

	/* cut on a character's boundary (else copy_text would escape it all) */
	if (vsnprintf(raw, sizeof(raw), fmt, args) >= (int) sizeof(raw))
		raw[pg_mbcliplen(raw, (int) strlen(raw), (int) sizeof(raw) - 1)] = '\0';
	/* (one line: a multi-line DETAIL's lines run on) */
	for (char *p = raw; *p; p++)
		if (*p == '\n')
			*p = ' ';
	copy_text(event_text, sizeof(event_text), raw);

	if (events_shared == NULL)
		return event_text;

	memset(&e, 0, sizeof(e));
	e.at = GetCurrentTimestamp();
	e.pid = MyProcPid;
	e.dboid = MyDatabaseId;
	e.event = ev;
	copy_text(e.kind, sizeof(e.kind), kind);
	copy_text(e.lock, sizeof(e.lock), lock);
	copy_text(e.holder, sizeof(e.holder), holder);
	strlcpy(e.detail, event_text, sizeof(e.detail));

	SpinLockAcquire(&events_shared->mutex);
	e.seq = events_shared->next_seq++;
	memcpy(&events_shared->entries[e.seq % events_shared->size], &e,
		   sizeof(e));
	SpinLockRelease(&events_shared->mutex);
	return event_text;
}

/*
 * Record an event in the ring only, and return its text (this process's
 * buffer, good until its next event) for the caller's own report to say.
 * kind (as rlock_locks names it), lock, holder: NULL when none.
 */
const char *
rlock_event_record(RlockEventType ev, const char *kind, const char *lock,
				   const char *holder, const char *fmt,...)
{
	va_list		args;
	const char *text;

	va_start(args, fmt);
	text = event_vrecord(ev, kind, lock, holder, fmt, args);
	va_end(args);
	return text;
}

/* Record an event and report it at elevel (LOG, WARNING...) in its words. */
void
rlock_event(int elevel, RlockEventType ev, const char *kind, const char *lock,
			const char *holder, const char *fmt,...)
{
	va_list		args;
	const char *text;

	va_start(args, fmt);
	text = event_vrecord(ev, kind, lock, holder, fmt, args);
	va_end(args);
	ereport(elevel, (errmsg_internal("%s", text)));
}

/*
 * Copy the ring's entries, oldest first, into out (room for
 * rlock_events_max entries); returns how many.  The caller has made sure
 * the ring exists (rlock_events_available).
 */
int
rlock_events_read(RlockEventEntry *out)
{
	uint64		next;
	uint64		first;
	int			n = 0;

	Assert(events_shared != NULL);
	SpinLockAcquire(&events_shared->mutex);
	next = events_shared->next_seq;
	SpinLockRelease(&events_shared->mutex);
	first = next > (uint64) events_shared->size ?
		next - events_shared->size : 1;

	for (uint64 seq = first; seq < next; seq++)
	{
		RlockEventEntry *slot = &events_shared->entries[seq % events_shared->size];

		SpinLockAcquire(&events_shared->mutex);
		/* (skipped if a newer event took its slot meanwhile) */
		if (slot->seq == seq)
			memcpy(&out[n++], slot, sizeof(RlockEventEntry));
		SpinLockRelease(&events_shared->mutex);
	}
	return n;
}
