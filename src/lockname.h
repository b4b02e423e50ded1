/*-------------------------------------------------------------------------
 *
 * lockname.h
 *	  Lock names: validation, key prefix, Redisson's derived key names.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_LOCKNAME_H
#define RLOCK_LOCKNAME_H

#include "rlock.h"

typedef struct LockName
{
	const char *name;			/* the user's name, for messages */
	char		key[RLOCK_MAX_KEY_LEN + 1]; /* rlock.key_prefix || name */
	int			keylen;
} LockName;

extern void lockname_init(LockName *ln, text *name);
extern char *lockname_derive(const char *key, const char *prefix);
extern char *lockname_unlock_latch(const char *key);
extern const char *lockname_holder_field(RlockKind kind, const char *holder);
extern int64 lockname_latch_ttl_ms(void);
extern char *lockname_owner_field(const char *token);
extern bool lockname_is_holder_identity(const char *field);

/* The fixed part of an owner token's holder field: "rlock-owner:<digest>". */
#define RLOCK_OWNER_FIELD_PREFIX	"rlock-owner:"

#endif							/* RLOCK_LOCKNAME_H */
