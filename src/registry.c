/*-------------------------------------------------------------------------
 *
 * registry.c
 *	  rlock's shared memory, reserved when rlock is preloaded.
 *
 * It holds the instance UUID, generated each time shared memory is
 * initialised: so it differs between servers and changes after a
 * crash-restart, and a backend pid reused after a crash can never re-enter a
 * stale lock.  A backend's holder identity is "<uuid>:<pid>" (SPEC.md
 * section 3), the shape of Redisson's "<client uuid>:<thread id>".
 *
 * Without shared_preload_libraries there is no shared memory; each backend
 * then makes up a UUID of its own, which is just as unique.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "registry.h"
#include "rlock.h"

typedef struct RlockShared
{
	char		instance_uuid[37];
} RlockShared;

static RlockShared *rlock_shared = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static char backend_holder[64];

static void
format_uuid(char *out, const uint8 *b)
{
	static const char hex[] = "0123456789abcdef";
	int			o = 0;

	for (int i = 0; i < 16; i++)
	{
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[o++] = '-';
		out[o++] = hex[b[i] >> 4];
		out[o++] = hex[b[i] & 0x0f];
	}
	out[o] = '\0';
}

static void
generate_uuid(char *out)
{
	uint8		b[16];

	if (!pg_strong_random(b, sizeof(b)))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate random rlock instance identity")));
	b[6] = (b[6] & 0x0f) | 0x40;	/* version 4 */
	b[8] = (b[8] & 0x3f) | 0x80;	/* variant 1 */
	format_uuid(out, b);
}

static void
registry_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(RlockShared)));
}

static void
registry_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	rlock_shared = NULL;
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	rlock_shared = ShmemInitStruct("rlock", sizeof(RlockShared), &found);
	if (!found)
		generate_uuid(rlock_shared->instance_uuid);
	LWLockRelease(AddinShmemInitLock);
}

void
registry_install_hooks(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = registry_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = registry_shmem_startup;
}

bool
registry_available(void)
{
	return rlock_shared != NULL;
}

/* This backend's holder identity, "<instance uuid>:<pid>". */
const char *
rlock_backend_holder(void)
{
	if (backend_holder[0] == '\0')
	{
		char		uuid[37];

		if (rlock_shared != NULL)
			memcpy(uuid, rlock_shared->instance_uuid, sizeof(uuid));
		else
			generate_uuid(uuid);
		snprintf(backend_holder, sizeof(backend_holder), "%s:%d",
				 uuid, MyProcPid);
	}
	return backend_holder;
}
