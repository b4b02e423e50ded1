/*-------------------------------------------------------------------------
 *
 * redlock_silence.c
 *	  Which Redlock masters this server's processes found silent, shared
 *	  among them.
 *
 * A master whose round trip timed out (stopped, a stalled link) is silent
 * to the connection that saw it (rconn_silent): later round trips wait for
 * it only a short grace once the other masters are done (redlock.c).  That
 * knowledge was each process's own, so every new backend (a pool's, a
 * scheduler's job) paid a full rlock.command_timeout on its first Redlock
 * call to learn it again.  Here it is shared: after each round trip over
 * the masters, a process records which of them are silent to it and which
 * it heard; before one, a master that another process found silent
 * recently (SILENCE_KEEP_MS) is taken as silent here too.
 *
 * A master taken as silent is still sent the commands and is heard the
 * moment it answers (within the grace), and its answers never count while
 * it is not heard, so sharing costs no safety: at worst, a master that
 * answers slower than the grace is not waited for (as in the process that
 * found it silent).  Masters are told apart by their scheme, host and port.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/timestamp.h"

#include "redis/redis.h"
#include "route/route.h"
#include "route/route_int.h"
#include "base/base.h"

/* Masters remembered (several settings over time: more than one's 16). */
#define SILENCE_SLOTS		64

/*
 * How long a master found silent is taken as silent by the other
 * processes, unless one hears it: a process that still finds it silent
 * records that again at each round trip.
 */
#define SILENCE_KEEP_MS		60000

typedef struct SilenceEntry
{
	uint64		key;			/* of the master's scheme, host, port; 0 free */
	TimestampTz silent_at;		/* last found silent; 0: heard since */
} SilenceEntry;

typedef struct SilenceShared
{
	slock_t		mutex;
	uint32		nsilent;		/* entries with silent_at set (written under
								 * mutex; read without it, as a hint that
								 * spares the round trips of a server with
								 * no silent master the mutex) */
	SilenceEntry e[SILENCE_SLOTS];	/* under mutex */
} SilenceShared;

static SilenceShared *silence = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void
silence_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(SilenceShared)));
}

static void
silence_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	silence = ShmemInitStruct("rlock redlock silence", sizeof(SilenceShared),
							  &found);
	if (!found)
	{
		SpinLockInit(&silence->mutex);
		silence->nsilent = 0;
		memset(silence->e, 0, sizeof(silence->e));
	}
	LWLockRelease(AddinShmemInitLock);
}

void
redlock_silence_shmem_install(void)
{
	RLOCK_SHMEM_REQUEST(prev_shmem_request_hook, silence_shmem_request);
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = silence_shmem_startup;
}

/* The keys of the setting's masters, for its generation. */
static uint64 master_keys[REDLOCK_MAX_MASTERS];
static uint64 keys_generation = 0;

/*
 * Which masters this process takes as silent only because another one
 * found them so (until it hears them): it does not record them silent in
 * its turn, so that the silence lasts as long as some process still sees
 * its own round trips time out, and no longer.
 */
static bool inherited[REDLOCK_MAX_MASTERS];

/* The key of master k of the setting: its scheme, port and host (never 0). */
static uint64
master_key(int k)
{
	if (keys_generation != redlock_conf_generation())
	{
		memset(inherited, 0, sizeof(inherited));
		for (int i = 0; i < redlock_num_masters(); i++)
		{
			const RedisUrl *u = redlock_master_url(i);
			char		buf[300];
			int			len;
			uint64		h;

			len = snprintf(buf, sizeof(buf), "%d|%d|%s", (int) u->scheme,
						   u->port, u->host);
			h = hash_bytes_extended((const unsigned char *) buf,
									Min(len, (int) sizeof(buf) - 1), 0);
			master_keys[i] = h != 0 ? h : 1;
		}
		keys_generation = redlock_conf_generation();
	}
	Assert(k >= 0 && k < redlock_num_masters());
	return master_keys[k];
}

/* key's entry, or NULL (under the mutex). */
static SilenceEntry *
find_entry(uint64 key)
{
	for (int i = 0; i < SILENCE_SLOTS; i++)
		if (silence->e[i].key == key)
			return &silence->e[i];
	return NULL;
}

/* Any master found silent?  (Without the mutex: a hint.) */
static inline bool
any_silent(void)
{
	return ((volatile SilenceShared *) silence)->nsilent > 0;
}

/* Set e's silent_at, keeping nsilent right (mutex). */
static void
set_silent_at(SilenceEntry *e, TimestampTz t)
{
	if (e->silent_at == 0 && t != 0)
		silence->nsilent++;
	else if (e->silent_at != 0 && t == 0)
		silence->nsilent--;
	e->silent_at = t;
}

/* A free entry for key, else the one found silent longest ago (mutex). */
static SilenceEntry *
new_entry(uint64 key)
{
	SilenceEntry *e = &silence->e[0];

	for (int j = 0; j < SILENCE_SLOTS; j++)
	{
		if (silence->e[j].key == 0)
		{
			e = &silence->e[j];
			break;
		}
		if (silence->e[j].silent_at < e->silent_at)
			e = &silence->e[j];
	}
	set_silent_at(e, 0);
	e->key = key;
	return e;
}

/*
 * Before a round trip over the masters: conns[i], master master[i] of the
 * setting (-1: none), is taken as silent when another process found that
 * master silent within SILENCE_KEEP_MS.
 */
void
redlock_silence_apply(RedisConn **conns, const int *master, int n)
{
	TimestampTz found[REDLOCK_MAX_MASTERS];
	uint64		keys[REDLOCK_MAX_MASTERS];
	TimestampTz now;

	if (silence == NULL || !any_silent())
		return;					/* not preloaded, or nothing silent */
	Assert(n <= REDLOCK_MAX_MASTERS);
	for (int i = 0; i < n; i++)
		keys[i] = master[i] >= 0 && !rconn_silent(conns[i]) ?
			master_key(master[i]) : 0;
	SpinLockAcquire(&silence->mutex);
	for (int i = 0; i < n; i++)
	{
		SilenceEntry *e = keys[i] != 0 ? find_entry(keys[i]) : NULL;

		found[i] = e != NULL ? e->silent_at : 0;
	}
	SpinLockRelease(&silence->mutex);
	now = GetCurrentTimestamp();
	for (int i = 0; i < n; i++)
		if (found[i] != 0 &&
			!TimestampDifferenceExceeds(found[i], now, SILENCE_KEEP_MS))
		{
			rconn_mark_silent(conns[i]);
			inherited[master[i]] = true;
		}
}

/*
 * After a round trip over the masters (ops[i] on conns[i], before any
 * answer was set aside): a master silent here, by a timeout of this
 * process's own, is recorded as silent now; one that answered (ops[i].ok),
 * as heard.  A master left without an answer, or failing otherwise, or
 * silent only as another process found it, changes nothing.
 */
void
redlock_silence_record(RedisConn **conns, const int *master,
					   const RconnOp *ops, int n)
{
	uint64		keys[REDLOCK_MAX_MASTERS];
	bool		silent[REDLOCK_MAX_MASTERS];
	bool		any = false;
	bool		heard_matters;
	TimestampTz now;

	if (silence == NULL)
		return;
	Assert(n <= REDLOCK_MAX_MASTERS);
	heard_matters = any_silent();	/* else there is nothing to clear */
	for (int i = 0; i < n; i++)
	{
		silent[i] = master[i] >= 0 && rconn_silent(conns[i]);
		keys[i] = master[i] >= 0 &&
			(silent[i] || (ops[i].ok && heard_matters)) ?
			master_key(master[i]) : 0;
		if (master[i] >= 0 && !silent[i])
			inherited[master[i]] = false;	/* heard, or never silent */
		else if (silent[i] && inherited[master[i]])
			keys[i] = 0;		/* another's silence: not renewed from here */
		any |= keys[i] != 0;
	}
	if (!any)
		return;
	now = GetCurrentTimestamp();
	SpinLockAcquire(&silence->mutex);
	for (int i = 0; i < n; i++)
	{
		SilenceEntry *e = keys[i] != 0 ? find_entry(keys[i]) : NULL;

		if (silent[i])
			set_silent_at(e != NULL ? e : new_entry(keys[i]), now);
		else if (e != NULL)
			set_silent_at(e, 0);	/* heard: no longer silent */
	}
	SpinLockRelease(&silence->mutex);
}
