/*-------------------------------------------------------------------------
 *
 * lockname.c
 *	  Lock names: validation, the rlock.key_prefix, and the names Redisson
 *	  derives from a lock's key (channels, latches, queues).
 *
 * A lock's main key N is rlock.key_prefix || name.  Every other key or
 * channel of the lock is "p:{N}" (or "p:N" when N already contains a '{'),
 * so that all of a lock's keys share N's Redis Cluster hash slot, exactly
 * as Redisson names them (PROTOCOL.md, "Names").
 *
 * It also owns the hash field an explicit owner token's holds are stored
 * under (lockname_owner_field): never the token itself, which is a bearer
 * secret and could name any field of any hash.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"

#include "mb/pg_wchar.h"
#include "utils/builtins.h"

#include "holds/holds.h"

/*
 * Prefixes of the keys and channels Redisson derives from a lock's key
 * (each begins with "redisson_": check_derived_collision relies on it).
 */
static const char *const derived_prefixes[] = {
	"redisson_lock__channel:",
	"redisson_lock_token:",
	"redisson_unlock_latch:",
	"redisson_lock_queue:",
	"redisson_lock_timeout:",
	"redisson_rwlock:",
	"redisson_sc:",				/* a semaphore's channel */
	"redisson_countdownlatch__channel__",	/* a latch's channel */
};

/*
 * Refuse a key that is, or may be, one of the keys rlock derives from some
 * lock's key (a fencing token counter, a fair queue, a read hold's timeout
 * key...): locking it would corrupt that other lock, or make its scripts
 * fail half way.
 */
static void
check_derived_collision(const LockName *ln, const char *noun)
{
	bool		collides = false;

	/* (they all begin with "redisson_": most names are done at once) */
	if (strncmp(ln->key, "redisson_", 9) == 0)
	{
		for (int i = 0; i < lengthof(derived_prefixes); i++)
			if (strncmp(ln->key, derived_prefixes[i],
						strlen(derived_prefixes[i])) == 0)
				collides = true;
	}
	if (strstr(ln->key, ":rwlock_timeout:") != NULL)
		collides = true;
	/*
	 * a semaphore's permits, {N}:timeout, its marker, {N}:rlock_semaphore,
	 * and a latch's marker, {N}:rlock_latch (N:... when N has a '{')
	 */
	if (strchr(ln->key, '{') != NULL &&
		((ln->keylen >= 8 &&
		  strcmp(ln->key + ln->keylen - 8, ":timeout") == 0) ||
		 (ln->keylen >= 16 &&
		  strcmp(ln->key + ln->keylen - 16, ":rlock_semaphore") == 0) ||
		 (ln->keylen >= 12 &&
		  strcmp(ln->key + ln->keylen - 12, ":rlock_latch") == 0)))
		collides = true;
	/*
	 * "{X}" (X without '{'): Redisson's rule (derive_with_room) gives it the
	 * channels, queue, token and timeout keys of "X" itself, so the two
	 * locks would share them.
	 */
	if (ln->keylen >= 2 && ln->key[0] == '{' && ln->key[ln->keylen - 1] == '}' &&
		memchr(ln->key + 1, '{', ln->keylen - 2) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s name \"%s\" collides with the keys rlock derives from lock names",
						noun, ln->name),
				 errdetail("A key that is one hash tag, {X}, shares every key derived from it (channels, queues, timeout keys) with the key X."),
				 errhint("Add to the name outside the braces, as in {X}:lock.")));
	if (collides)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s name \"%s\" collides with the keys rlock derives from lock names",
						noun, ln->name),
				 errdetail("Keys starting with redisson_lock__channel:, redisson_lock_token:, redisson_unlock_latch:, redisson_lock_queue:, redisson_lock_timeout:, redisson_rwlock:, redisson_sc: or redisson_countdownlatch__channel__, keys containing :rwlock_timeout:, and keys with a '{' that end in :timeout, :rlock_semaphore or :rlock_latch belong to other locks, semaphores and latches."),
				 errhint("Choose another %s name.", noun)));
}

/*
 * Validate a user's lock name and build its key.  ERROR on a NULL, empty or
 * over-long name.
 */
void
lockname_init(LockName *ln, text *name)
{
	lockname_init_as(ln, name, "lock");
}

/*
 * The same for a name of another kind of object: noun ("semaphore",
 * "latch") names it in the errors.  Semaphores and latches share the
 * space of names with locks (a name is one kind of object), so the same
 * derived keys are refused.
 */
void
lockname_init_as(LockName *ln, text *name, const char *noun)
{
	int			plen = strlen(rlock_key_prefix ? rlock_key_prefix : "");
	int			nlen;

	if (name == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s name must not be NULL", noun)));
	nlen = VARSIZE_ANY_EXHDR(name);
	ln->name = text_to_cstring(name);
	if (nlen == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s name must not be empty", noun)));
	if (plen + nlen > RLOCK_MAX_KEY_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s name \"%.*s...\" is too long", noun,
						pg_mbcliplen(ln->name, nlen, 40), ln->name),
				 errdetail("The name is %d bytes with rlock.key_prefix; the limit is %d bytes.",
						   plen + nlen, RLOCK_MAX_KEY_LEN)));
	memcpy(ln->key, rlock_key_prefix, plen);
	memcpy(ln->key + plen, VARDATA_ANY(name), nlen);
	ln->keylen = plen + nlen;
	ln->key[ln->keylen] = '\0';
	check_derived_collision(ln, noun);
}

/*
 * lockname_derive, with room for "extra" more bytes after it.  (Copied by
 * hand, not by psprintf: a try+release derives four names.)
 */
static char *
derive_with_room(const char *key, const char *prefix, size_t extra)
{
	size_t		plen = strlen(prefix);
	size_t		klen = strlen(key);
	bool		tagged = strchr(key, '{') != NULL;
	char	   *out = palloc(plen + klen + (tagged ? 1 : 3) + extra + 1);
	char	   *p = out;

	memcpy(p, prefix, plen);
	p += plen;
	*p++ = ':';
	if (!tagged)
		*p++ = '{';
	memcpy(p, key, klen);
	p += klen;
	if (!tagged)
		*p++ = '}';
	*p = '\0';
	return out;
}

/*
 * Redisson's prefixName(prefix, key): "prefix:{key}", or "prefix:key" when
 * key already has a hash tag.  Returns a palloc'd string.
 */
char *
lockname_derive(const char *key, const char *prefix)
{
	return derive_with_room(key, prefix, 0);
}

/*
 * Redisson's suffixName(key, suffix): "{key}:suffix", or "key:suffix" when
 * key already has a hash tag (a semaphore's {N}:timeout).  palloc'd.
 */
char *
lockname_suffixed(const char *key, const char *suffix)
{
	if (strchr(key, '{') != NULL)
		return psprintf("%s:%s", key, suffix);
	return psprintf("{%s}:%s", key, suffix);
}

/*
 * A fresh unlock latch for one release request:
 * redisson_unlock_latch:{key}:<32 hex digits>.  A release replayed after a
 * lost reply finds it and answers as the first time.
 */
char *
lockname_unlock_latch(const char *key)
{
	static uint32 counter = 0;
	static const char hex[] = "0123456789abcdef";
	char	   *latch = derive_with_room(key, "redisson_unlock_latch", 33);
	char	   *p = latch + strlen(latch);
	uint64		r = rlock_random_uint64();
	uint32		pid = (uint32) MyProcPid;
	uint32		n = ++counter;

	/* ":" and 32 hex digits: 64 random bits, the pid, a counter */
	*p++ = ':';
	for (int i = 15; i >= 0; i--)
		*p++ = hex[(r >> (4 * i)) & 0xf];
	for (int i = 7; i >= 0; i--)
		*p++ = hex[(pid >> (4 * i)) & 0xf];
	for (int i = 7; i >= 0; i--)
		*p++ = hex[(n >> (4 * i)) & 0xf];
	*p = '\0';
	return latch;
}

/*
 * TTL of an unlock latch: long enough to outlast our one retry, which may
 * reconnect first: a round trip, a new connection and the round trip
 * again, plus a second.  (Once the release is answered the latch is
 * deleted: route.c's route_defer_del.)
 */
int64
lockname_latch_ttl_ms(void)
{
	return (int64) RLOCK_MAX_USER_TIMEOUT_MS * 3 + 1000;
}

/*
 * A holder's field in the lock's hash: "<holder>", or "<holder>:write" for
 * the write side of a read/write lock.
 */
const char *
lockname_holder_field(RlockKind kind, const char *holder)
{
	return kind == RLOCK_KIND_WRITE ? psprintf("%s:write", holder) : holder;
}

/*
 * The holder field of an explicit owner token (SPEC.md section 8):
 * "rlock-owner:<SHA-256 of the token, 64 hex digits>".
 *
 * The token itself is never stored, so:
 *	- no token can name a field of an application hash in the lock's
 *	  database (rlock_release('cart:99', owner => 'item_sku_1') finds no
 *	  field "rlock-owner:<digest>" in cart:99, and so touches nothing), nor
 *	  "mode" or another holder's field: holder identities are "<uuid>:...",
 *	  and the digest has no ':' for a ":write" suffix to hide behind;
 *	- whoever reads the lock's hash (rlock_status, a Redis client) learns
 *	  a digest, which releases nothing: a release digests what it is given.
 * The field depends on the token alone, so a hand-off to another session,
 * database or server naming the same token finds the same field; it has
 * Redisson's "<id>:<thread>" shape, so a read/write lock's write field
 * ("<field>:write") and read timeout keys are derived from it as from any
 * holder.  Returns a palloc'd string.
 */
char *
lockname_owner_field(const char *token)
{
	char	   *input = psprintf("rlock owner token:%s", token);
	char		hex[NET_SHA256_HEX_LEN + 1];

	if (!net_sha256_hex(input, strlen(input), hex))
		elog(ERROR, "could not compute the SHA-256 digest of an owner token");
	pfree(input);
	return psprintf("%s%s", RLOCK_OWNER_FIELD_PREFIX, hex);
}

/* Does s start as a holder identity does, "<uuid>:"? */
bool
lockname_has_holder_prefix(const char *s)
{
	for (int i = 0; i < 36; i++)
	{
		bool		dash = (i == 8 || i == 13 || i == 18 || i == 23);

		if (s[i] == '\0')
			return false;
		if (dash ? s[i] != '-' : !isxdigit((unsigned char) s[i]))
			return false;
	}
	return s[36] == ':';
}

/*
 * Is field (of a lock's hash) a holder identity, "<uuid>:<digits>" (a
 * semaphore's permit: "<uuid>:<digits>:<digits>"): a session of some
 * PostgreSQL server, or a Redisson client's thread?  Those are not
 * secrets.  Any other field is an owner token's (or, in a hash that is not
 * a lock, the application's own, which may be any bytes), and
 * introspection shows it masked.
 */
bool
lockname_is_holder_identity(const char *field)
{
	if (!lockname_has_holder_prefix(field) ||
		!isdigit((unsigned char) field[37]))
		return false;
	for (const char *p = field + 37; *p; p++)
		if (!isdigit((unsigned char) *p) &&
			!(*p == ':' && isdigit((unsigned char) p[1])))
			return false;
	return true;
}
