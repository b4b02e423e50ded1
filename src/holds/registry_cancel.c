/*-------------------------------------------------------------------------
 *
 * registry_cancel.c
 *	  rlock.cancel_on_lost's cancel names the lost lock: the watchdog
 *	  leaves a note for the backend it cancels, and the backend's
 *	  "canceling statement due to user request" becomes "canceling
 *	  statement: rlock lock "x" was lost (lease expired)".
 *
 * PostgreSQL's cancel message is fixed, and a scheduler (pg_cron) records
 * only the error its job ended with: without the lock's name there, no
 * one can tell a lost lock from a DBA's pg_cancel_backend.  So, before it
 * sends SIGINT, the watchdog writes the lock and the cause into a note of
 * the backend's own (one per PGPROC slot, found through the registry
 * entry, which records its backend's slot), and the backend's
 * emit_log_hook, seeing its statement cancelled "due to user request"
 * while a note is pending, rewrites the message (and DETAIL) before it
 * goes to the log and to the client.  The hook takes no LWLock (the error
 * may have been raised holding one), only the note's spinlock, and cannot
 * ERROR: its one allocation is asked not to fail.  A note that no cancel
 * consumed (the statement had ended) is dropped when the transaction
 * ends, so that it never names a lock for a later, unrelated cancel.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "postmaster/autovacuum.h"
#include "replication/walsender.h"
#include "access/twophase.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/elog.h"

#include "holds/holds.h"
#include "holds/holds_int.h"

typedef struct CancelNote
{
	slock_t		mutex;
	bool		pending;
	int			pid;			/* the backend it is for */
	RlockKind	kind;
	RenewOutcome cause;
	char		key[RLOCK_MAX_KEY_LEN + 1];
} CancelNote;

typedef struct CancelNotes
{
	int			nslots;
	CancelNote	notes[FLEXIBLE_ARRAY_MEMBER];
} CancelNotes;

static CancelNotes *cancel_notes = NULL;
static emit_log_hook_type prev_emit_log_hook = NULL;

/* One note per PGPROC (the count proc.c gives them), at most. */
static int
cancel_nslots(void)
{
	return MaxConnections + autovacuum_max_workers + 1 +
		max_worker_processes + max_wal_senders + NUM_AUXILIARY_PROCS +
		max_prepared_xacts;
}

Size
registry_cancel_shmem_size(void)
{
	return add_size(offsetof(CancelNotes, notes),
					mul_size(cancel_nslots(), sizeof(CancelNote)));
}

/* At shared memory startup (the caller holds AddinShmemInitLock). */
void
registry_cancel_shmem_init(void)
{
	bool		found;

	cancel_notes = ShmemInitStruct("rlock cancel notes",
								   registry_cancel_shmem_size(), &found);
	if (!found)
	{
		cancel_notes->nslots = cancel_nslots();
		for (int i = 0; i < cancel_notes->nslots; i++)
		{
			SpinLockInit(&cancel_notes->notes[i].mutex);
			cancel_notes->notes[i].pending = false;
			cancel_notes->notes[i].pid = 0;
		}
	}
}

/* This backend's note slot, or -1. */
int
registry_cancel_slot(void)
{
	int			slot;

	if (cancel_notes == NULL || MyProc == NULL || ProcGlobal == NULL)
		return -1;
	slot = (int) (MyProc - ProcGlobal->allProcs);
	if (slot < 0 || slot >= cancel_notes->nslots)
		return -1;
	return slot;
}

/*
 * The watchdog is about to cancel pid's statement for its lock key (kind),
 * lost for cause: leave the note (the first one stays while pending).
 * Only a spinlock: the caller holds the registry's lock.
 */
void
registry_cancel_note(int slot, int pid, RlockKind kind, const char *key,
					 RenewOutcome cause)
{
	CancelNote *n;

	if (cancel_notes == NULL || slot < 0 || slot >= cancel_notes->nslots)
		return;
	n = &cancel_notes->notes[slot];
	SpinLockAcquire(&n->mutex);
	if (!n->pending || n->pid != pid)
	{
		n->pending = true;
		n->pid = pid;
		n->kind = kind;
		n->cause = cause;
		strlcpy(n->key, key, sizeof(n->key));
	}
	SpinLockRelease(&n->mutex);
}

/* The transaction ended: a note no cancel consumed goes.  Never throws. */
void
registry_cancel_note_reset(void)
{
	int			slot = registry_cancel_slot();
	CancelNote *n;

	if (slot < 0)
		return;
	n = &cancel_notes->notes[slot];
	if (!n->pending)			/* (an unlocked peek: the common case) */
		return;
	SpinLockAcquire(&n->mutex);
	n->pending = false;
	SpinLockRelease(&n->mutex);
}

static const char *
cause_words(RenewOutcome cause)
{
	switch (cause)
	{
		case RENEW_EXPIRED:
			return "lease expired";
		case RENEW_NOT_RENEWED:
			return "not renewed in time";
		default:
			return "gone from Redis";
	}
}

static const char *
cause_detail(RenewOutcome cause)
{
	switch (cause)
	{
		case RENEW_EXPIRED:
			return "Its fixed lease ran out while the statement ran; rlock.cancel_on_lost cancelled it.";
		case RENEW_NOT_RENEWED:
			return "Its lease could not be renewed for too long (Redis unreachable or slow); rlock.cancel_on_lost cancelled the statement.";
		default:
			return "Redis no longer had it: it expired, was force-released, or Redis restarted; rlock.cancel_on_lost cancelled the statement.";
	}
}

/* palloc'd printf that fails softly (NULL), for the hook. */
static char *
soft_printf(MemoryContext cxt, const char *fmt,...) pg_attribute_printf(2, 3);

static char *
soft_printf(MemoryContext cxt, const char *fmt,...)
{
	va_list		ap;
	size_t		len = RLOCK_MAX_KEY_LEN + 256;
	char	   *buf = MemoryContextAllocExtended(cxt, len, MCXT_ALLOC_NO_OOM);

	if (buf == NULL)
		return NULL;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	return buf;
}

/*
 * emit_log_hook: this backend's statement is being cancelled "due to user
 * request" while the watchdog's note is pending: say which lock was lost.
 */
static void
registry_cancel_emit(ErrorData *edata)
{
	static char key[RLOCK_MAX_KEY_LEN + 1];
	int			slot;
	bool		have = false;
	RlockKind	kind = RLOCK_KIND_EXCLUSIVE;
	RenewOutcome cause = RENEW_GONE;

	if (edata->elevel == ERROR &&
		edata->sqlerrcode == ERRCODE_QUERY_CANCELED &&
		edata->message_id != NULL &&
		strcmp(edata->message_id, "canceling statement due to user request") == 0 &&
		(slot = registry_cancel_slot()) >= 0 &&
		cancel_notes->notes[slot].pending)
	{
		CancelNote *n = &cancel_notes->notes[slot];

		SpinLockAcquire(&n->mutex);
		if (n->pending && n->pid == MyProcPid)
		{
			have = true;
			kind = n->kind;
			cause = n->cause;
			strlcpy(key, n->key, sizeof(key));
		}
		n->pending = false;
		SpinLockRelease(&n->mutex);
	}
	if (have)
	{
		MemoryContext cxt = edata->assoc_context ? edata->assoc_context :
		ErrorContext;
		char	   *msg;

		msg = kind == RLOCK_KIND_SEMAPHORE ?
			soft_printf(cxt, "canceling statement: permits of rlock semaphore \"%s\" were lost (%s)",
						key, cause_words(cause)) :
			soft_printf(cxt, "canceling statement: rlock %slock \"%s\" was lost (%s)",
						kind == RLOCK_KIND_READ ? "read " :
						kind == RLOCK_KIND_WRITE ? "write " : "",
						key, cause_words(cause));
		if (msg != NULL)
		{
			edata->message = msg;
			if (edata->detail == NULL)
				edata->detail = soft_printf(cxt, "%s", cause_detail(cause));
		}
	}
	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
}

void
registry_cancel_install_hook(void)
{
	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = registry_cancel_emit;
}
