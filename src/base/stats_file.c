/*-------------------------------------------------------------------------
 *
 * stats_file.c
 *	  The rlock_stats counters and histograms kept across a clean restart:
 *	  written to pg_stat/rlock_stats.stat when the postmaster shuts down
 *	  cleanly, read back (and removed) when it next initialises shared
 *	  memory, as pg_stat_statements keeps its statistics.
 *
 * The file is a fixed header (a magic number, the format's version, the
 * number of cells), when the counters were last reset, the cells, and a
 * CRC-32C of all of that.  It is written under a temporary name and
 * renamed into place, so a crash while writing leaves the old file or
 * none.  Reading trusts nothing in it: the file must have exactly the size
 * this build writes, the header and the CRC must match, or it is ignored
 * with a LOG line and the counters start at zero.  It is removed once
 * read, so that a crash restart (which writes nothing) starts from zero
 * rather than from a stale file; nothing here throws: this runs in the
 * postmaster, at its start and at its exit.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/stat.h>
#include <unistd.h>

#include "pgstat.h"
#include "port/pg_crc32c.h"
#include "storage/fd.h"

#include "base/base.h"

#define STATS_FILE			PGSTAT_STAT_PERMANENT_DIRECTORY "/rlock_stats.stat"
#define STATS_FILE_TMP		STATS_FILE ".tmp"
#define STATS_FILE_MAGIC	0x524C5354	/* "RLST" */
#define STATS_FILE_VERSION	1

typedef struct StatsFileHeader
{
	uint32		magic;
	uint32		version;
	uint32		ncells;
	uint32		pad;			/* (zero) */
	int64		reset_at;
} StatsFileHeader;

static size_t
file_size(int ncells)
{
	return sizeof(StatsFileHeader) + sizeof(uint64) * ncells +
		sizeof(pg_crc32c);
}

static pg_crc32c
file_crc(const StatsFileHeader *h, const uint64 *cells, int ncells)
{
	pg_crc32c	crc;

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, h, sizeof(*h));
	COMP_CRC32C(crc, cells, sizeof(uint64) * ncells);
	FIN_CRC32C(crc);
	return crc;
}

/* Save the counters (the postmaster, at a clean shutdown). */
void
stats_file_write(const uint64 *cells, int ncells, TimestampTz reset_at)
{
	StatsFileHeader h;
	pg_crc32c	crc;
	FILE	   *f;

	memset(&h, 0, sizeof(h));
	h.magic = STATS_FILE_MAGIC;
	h.version = STATS_FILE_VERSION;
	h.ncells = (uint32) ncells;
	h.reset_at = (int64) reset_at;
	crc = file_crc(&h, cells, ncells);

	f = AllocateFile(STATS_FILE_TMP, PG_BINARY_W);
	if (f == NULL)
		goto fail;
	if (fwrite(&h, sizeof(h), 1, f) != 1 ||
		fwrite(cells, sizeof(uint64), ncells, f) != (size_t) ncells ||
		fwrite(&crc, sizeof(crc), 1, f) != 1)
		goto fail;
	if (FreeFile(f) != 0)
	{
		f = NULL;
		goto fail;
	}
	/* (durable_rename reports its own failure, at LOG) */
	(void) durable_rename(STATS_FILE_TMP, STATS_FILE, LOG);
	return;

fail:
	ereport(LOG,
			(errcode_for_file_access(),
			 errmsg("rlock: could not write file \"%s\": %m", STATS_FILE_TMP),
			 errdetail("The rlock_stats counters start from zero at the next start.")));
	if (f != NULL)
		FreeFile(f);
	unlink(STATS_FILE_TMP);
}

static void
ignored(const char *why)
{
	ereport(LOG,
			(errmsg("rlock: ignoring file \"%s\": %s", STATS_FILE, why),
			 errdetail("The rlock_stats counters start from zero.")));
}

/*
 * Read the counters saved at the last clean shutdown into cells, and
 * remove the file.  False (cells untouched) when there is none, or none
 * this build can trust.
 */
bool
stats_file_read(uint64 *cells, int ncells, TimestampTz *reset_at)
{
	StatsFileHeader h;
	uint64	   *buf;
	pg_crc32c	crc;
	struct stat st;
	FILE	   *f;
	bool		ok = false;

	f = AllocateFile(STATS_FILE, PG_BINARY_R);
	if (f == NULL)
	{
		if (errno != ENOENT)
			ereport(LOG,
					(errcode_for_file_access(),
					 errmsg("rlock: could not read file \"%s\": %m",
							STATS_FILE)));
		return false;
	}
	buf = malloc(sizeof(uint64) * ncells);
	if (buf == NULL)
		ignored("out of memory");
	else if (fstat(fileno(f), &st) != 0 ||
			 (size_t) st.st_size != file_size(ncells))
		ignored("it does not have the size of rlock's counters");
	else if (fread(&h, sizeof(h), 1, f) != 1 ||
			 fread(buf, sizeof(uint64), ncells, f) != (size_t) ncells ||
			 fread(&crc, sizeof(crc), 1, f) != 1)
		ignored("it could not be read whole");
	else if (h.magic != STATS_FILE_MAGIC || h.version != STATS_FILE_VERSION ||
			 h.ncells != (uint32) ncells)
		ignored("it was not written by this version of rlock");
	else if (!EQ_CRC32C(crc, file_crc(&h, buf, ncells)))
		ignored("its checksum does not match");
	else
	{
		memcpy(cells, buf, sizeof(uint64) * ncells);
		*reset_at = (TimestampTz) h.reset_at;
		ok = true;
	}
	if (buf != NULL)
		free(buf);
	FreeFile(f);
	/* read once: a crash restart writes nothing, and must not reread it */
	unlink(STATS_FILE);
	return ok;
}
