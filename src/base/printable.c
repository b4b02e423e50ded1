/*-------------------------------------------------------------------------
 *
 * printable.c
 *	  Text a server sent, made safe to show in messages and query results.
 *
 * Redis's status and error replies reach ERROR details and the server log;
 * a few of its strings (ROLE's) reach query results.  A broken or hostile
 * server may put any bytes there: a sequence that is not valid in the
 * database's encoding (a value that cannot be stored, dumped or sent to a
 * client in another encoding), or control characters.  Such a string is
 * shown with each byte that is not printable ASCII written as \xNN, and
 * cut at RLOCK_PRINTABLE_MAX bytes of the original, which makes it plain
 * ASCII, valid in every encoding PostgreSQL has; a string that is valid
 * text without control characters is left as it is.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "mb/pg_wchar.h"

#include "base/base.h"

/* Does s[0..len-1] need escaping (see above)? */
static bool
needs_escaping(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
	{
		unsigned char c = (unsigned char) s[i];

		if (c < 0x20 || c == 0x7f)
			return true;
	}
	return len > PG_INT32_MAX || !pg_verifymbstr(s, (int) len, true);
}

/*
 * s[0..len-1], shown safely, into dst (size bytes, at least 1): always
 * NUL-terminated, cut to fit.
 */
void
rlock_printable_into(char *dst, size_t size, const char *s, size_t len)
{
	size_t		o = 0;

	if (!needs_escaping(s, len))
	{
		size_t		n = Min(len, size - 1);

		/* (cut on a character's boundary) */
		if (n < len)
			n = pg_mbcliplen(s, (int) Min(len, PG_INT32_MAX), (int) n);
		memcpy(dst, s, n);
		dst[n] = '\0';
		return;
	}
	for (size_t i = 0; i < len && i < RLOCK_PRINTABLE_MAX; i++)
	{
		unsigned char c = (unsigned char) s[i];

		if (c >= 0x20 && c < 0x7f)
		{
			if (o + 1 >= size)
				break;
			dst[o++] = (char) c;
		}
		else
		{
			if (o + 4 >= size)
				break;
			snprintf(dst + o, 5, "\\x%02x", c);
			o += 4;
		}
	}
	dst[o] = '\0';
}

/* The same, palloc'd in the current memory context. */
char *
rlock_printable(const char *s, size_t len)
{
	size_t		size;
	char	   *dst;

	if (!needs_escaping(s, len))
		return pnstrdup(s, len);
	size = Min(len, RLOCK_PRINTABLE_MAX) * 4 + 1;
	dst = palloc(size);
	rlock_printable_into(dst, size, s, len);
	return dst;
}
