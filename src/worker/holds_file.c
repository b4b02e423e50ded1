/*-------------------------------------------------------------------------
 *
 * holds_file.c
 *	  The holds file, pg_stat_tmp/rlock_holds: what this server's sessions
 *	  hold, kept where a crash restart finds it (crash_cleanup.c reads it).
 *
 * A crash restart initialises shared memory afresh, with a new instance
 * UUID: the registry of the dead instance is gone, and with it every way
 * of telling which holds in Redis were its own.  So the worker copies the
 * registry to this file, at most once a second and only when what it
 * would write changed: the instance UUID, the postmaster's pid, the host
 * and the data directory (whose file it is), and per hold its kind,
 * backend pid, holds, lease and key.  Written atomically (a temporary
 * file renamed over it), never from the acquire path: a lock taken in the
 * second before a crash may be missing, and then only waits for its lease.
 * Nothing here fsyncs: a crash restart keeps the operating system, and
 * after a reboot the leases have long run out.  pg_stat_tmp is the
 * directory base backups leave empty, so a copy of the data directory
 * starts without it (and crash_cleanup.c checks host and path besides).
 *
 * Failures to write are logged once, never raised: the file only makes a
 * crash cheaper.
 *
 * Beside it, pg_stat_tmp/rlock_instance names the instance that last ran
 * on this data directory, so that a server announces the UUID of its
 * previous run after a clean restart too (announce.c).
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "holds/holds.h"
#include "base/base.h"
#include "worker/worker.h"

#define HOLDS_FILE			"pg_stat_tmp/rlock_holds"
#define HOLDS_FILE_MAGIC	"rlock holds 1"
#define INSTANCE_FILE		"pg_stat_tmp/rlock_instance"

/* what was written last (TopMemoryContext), to write only a change */
static char *last_written = NULL;
static size_t last_len = 0;
static bool write_failed = false;

/* This host's name ("" when it has none to tell). */
const char *
holds_file_host(void)
{
	static char host[256];

	if (host[0] == '\0' && gethostname(host, sizeof(host) - 1) != 0)
		strlcpy(host, "", sizeof(host));
	host[sizeof(host) - 1] = '\0';
	return host;
}

static void
append_header(StringInfo buf)
{
	appendStringInfo(buf, "%s\nuuid %s\npostmaster %d\nhost %s\ndatadir %s\n",
					 HOLDS_FILE_MAGIC, registry_instance_uuid(),
					 (int) PostmasterPid, holds_file_host(), DataDir);
}

static bool
write_file(const char *path, const char *data, size_t len)
{
	char		tmp[MAXPGPATH];
	FILE	   *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = AllocateFile(tmp, PG_BINARY_W);

	if (f == NULL)
		return false;
	if (fwrite(data, 1, len, f) != len)
	{
		FreeFile(f);
		unlink(tmp);
		return false;
	}
	if (FreeFile(f) != 0)
	{
		unlink(tmp);
		return false;
	}
	if (rename(tmp, path) != 0)
	{
		unlink(tmp);
		return false;
	}
	return true;
}

/*
 * Write the file if what the registry holds changed since the last write
 * (in the caller's memory context, which it resets).  A watchdog lease's
 * expiry changes at each renewal and is left out; a fixed lease's is kept
 * (crash_cleanup.c gives up on a hold that has expired anyway).
 */
void
holds_file_refresh(void)
{
	RenewItem  *items;
	int			n = registry_renewal_snapshot(&items);
	StringInfoData buf;

	initStringInfo(&buf);
	append_header(&buf);
	for (int i = 0; i < n; i++)
	{
		int64		until_ms = 0;

		if (items[i].renew_lease_ms == 0 && items[i].expires_at != 0)
			until_ms = (items[i].expires_at - SetEpochTimestamp()) / 1000;
		appendStringInfo(&buf, "%d %d %d " INT64_FORMAT " " INT64_FORMAT " %d ",
						 (int) items[i].kind, items[i].pid, items[i].holds,
						 items[i].renew_lease_ms, until_ms,
						 (int) strlen(items[i].key));
		appendBinaryStringInfo(&buf, items[i].key, strlen(items[i].key));
		appendStringInfoChar(&buf, '\n');
	}
	if (last_written != NULL && last_len == (size_t) buf.len &&
		memcmp(last_written, buf.data, buf.len) == 0)
		return;
	if (!write_file(HOLDS_FILE, buf.data, buf.len))
	{
		if (!write_failed)
			ereport(LOG,
					(errcode_for_file_access(),
					 errmsg("rlock watchdog: could not write \"%s\": %m", HOLDS_FILE),
					 errdetail("After a crash restart, the locks held now will wait for their lease instead of being released at once.")));
		write_failed = true;
		return;
	}
	write_failed = false;
	if (last_written != NULL)
		pfree(last_written);
	last_written = MemoryContextAlloc(TopMemoryContext, Max(buf.len, 1));
	memcpy(last_written, buf.data, buf.len);
	last_len = buf.len;
}

/* Remove the file (a clean shutdown releases the holds by itself). */
void
holds_file_remove(void)
{
	if (unlink(HOLDS_FILE) != 0 && errno != ENOENT)
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("rlock watchdog: could not remove \"%s\": %m", HOLDS_FILE)));
	if (last_written != NULL)
		pfree(last_written);
	last_written = NULL;
	last_len = 0;
}

static bool
read_field(char **p, char *end, const char *word, char **value)
{
	size_t		wl = strlen(word);
	char	   *nl;

	if ((size_t) (end - *p) <= wl || strncmp(*p, word, wl) != 0 ||
		(*p)[wl] != ' ')
		return false;
	nl = memchr(*p + wl + 1, '\n', end - (*p + wl + 1));
	if (nl == NULL)
		return false;
	*nl = '\0';
	*value = *p + wl + 1;
	*p = nl + 1;
	return true;
}

/*
 * Read the file (in the current memory context).  Returns false when there
 * is none; a file that cannot be parsed is reported and counts as none.
 * The holds are parsed up to the first malformed line.
 */
bool
holds_file_read(HoldsFile *hf)
{
	FILE	   *f;
	StringInfoData buf;
	char		chunk[8192];
	size_t		got;
	char	   *p;
	char	   *end;
	char	   *v;
	int			max;

	memset(hf, 0, sizeof(*hf));
	f = AllocateFile(HOLDS_FILE, PG_BINARY_R);
	if (f == NULL)
	{
		if (errno != ENOENT)
			ereport(LOG,
					(errcode_for_file_access(),
					 errmsg("rlock watchdog: could not read \"%s\": %m", HOLDS_FILE)));
		return false;
	}
	initStringInfo(&buf);
	while ((got = fread(chunk, 1, sizeof(chunk), f)) > 0)
		appendBinaryStringInfo(&buf, chunk, got);
	FreeFile(f);

	p = buf.data;
	end = buf.data + buf.len;
	if (buf.len <= (int) strlen(HOLDS_FILE_MAGIC) ||
		strncmp(p, HOLDS_FILE_MAGIC "\n", strlen(HOLDS_FILE_MAGIC) + 1) != 0)
		goto bad;
	p += strlen(HOLDS_FILE_MAGIC) + 1;
	if (!read_field(&p, end, "uuid", &v))
		goto bad;
	hf->uuid = v;
	if (!read_field(&p, end, "postmaster", &v))
		goto bad;
	hf->postmaster_pid = atoi(v);
	if (!read_field(&p, end, "host", &v))
		goto bad;
	hf->host = v;
	if (!read_field(&p, end, "datadir", &v))
		goto bad;
	hf->datadir = v;

	max = 16;
	hf->holds = palloc(max * sizeof(HoldsFileEntry));
	while (p < end)
	{
		int			kind,
					pid,
					holds,
					keylen,
					used = 0;
		int64		renew_ms,
					until_ms;
		HoldsFileEntry *e;

		/*
		 * The numbers and one space, up to the key's first byte (the
		 * buffer ends with a NUL: sscanf stops there at the latest).
		 */
		if (sscanf(p, "%d %d %d " INT64_FORMAT " " INT64_FORMAT " %d%n",
				   &kind, &pid, &holds, &renew_ms, &until_ms, &keylen,
				   &used) != 6 || used == 0 || p + used >= end ||
			p[used++] != ' ' ||
			kind < 0 || kind >= RLOCK_NUM_KINDS || holds <= 0 ||
			keylen <= 0 || keylen > RLOCK_MAX_KEY_LEN ||
			end - (p + used) < keylen + 1 || p[used + keylen] != '\n')
		{
			ereport(LOG,
					(errmsg("rlock watchdog: \"%s\" ends with a malformed line", HOLDS_FILE)));
			break;
		}
		if (hf->nholds == max)
		{
			max *= 2;
			hf->holds = repalloc(hf->holds, max * sizeof(HoldsFileEntry));
		}
		e = &hf->holds[hf->nholds++];
		e->kind = (RlockKind) kind;
		e->pid = pid;
		e->holds = holds;
		e->renew_lease_ms = renew_ms;
		e->until_ms = until_ms;
		e->key = pnstrdup(p + used, keylen);
		p += used + keylen + 1;
	}
	return true;

bad:
	ereport(LOG,
			(errmsg("rlock watchdog: ignoring \"%s\": it is not a file of holds", HOLDS_FILE)));
	return false;
}

/*
 * The instance file, pg_stat_tmp/rlock_instance: "<uuid> <host>\n<data
 * directory>", written by each instance's worker when it starts (a clean
 * shutdown removes the holds file, not this one).  Returns the UUID the
 * previous instance of this server (same host and data directory) wrote,
 * or "" (none, this instance's own: a restarted worker, or another
 * server's: a copied data directory), and then records this instance.
 */
const char *
holds_file_swap_instance(void)
{
	static char previous[64];
	const char *uuid = registry_instance_uuid();
	FILE	   *f;
	char		line[1024];
	StringInfoData buf;

	previous[0] = '\0';
	f = AllocateFile(INSTANCE_FILE, PG_BINARY_R);
	if (f != NULL)
	{
		char		old[64];
		char		host[256];
		char		dir[MAXPGPATH];

		if (fgets(line, sizeof(line), f) != NULL &&
			sscanf(line, "%63s %255s", old, host) == 2 &&
			fgets(dir, sizeof(dir), f) != NULL &&
			strcmp(host, holds_file_host()) == 0 &&
			strcmp(dir, DataDir) == 0 &&
			(uuid == NULL || strcmp(old, uuid) != 0))
			strlcpy(previous, old, sizeof(previous));
		FreeFile(f);
	}
	if (uuid == NULL)
		return previous;
	initStringInfo(&buf);
	appendStringInfo(&buf, "%s %s\n%s", uuid, holds_file_host(), DataDir);
	if (!write_file(INSTANCE_FILE, buf.data, buf.len))
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("rlock watchdog: could not write \"%s\": %m", INSTANCE_FILE)));
	pfree(buf.data);
	return previous;
}
