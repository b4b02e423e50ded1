/*-------------------------------------------------------------------------
 *
 * url.h
 *	  rlock.redis_url: parsing, and keeping its password out of sight.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_URL_H
#define RLOCK_URL_H

#include "utils/guc.h"

/* How a URL reaches its server. */
typedef enum RedisUrlScheme
{
	URL_REDIS,					/* redis:// plain TCP */
	URL_REDISS,					/* rediss:// TLS over TCP */
	URL_UNIX					/* unix:// a Unix-domain socket */
} RedisUrlScheme;

/* A parsed Redis URL. */
typedef struct RedisUrl
{
	RedisUrlScheme scheme;
	char		host[256];		/* unix://: the socket's path */
	int			port;
	char		user[256];
	char		password[256];
	int			db;
} RedisUrl;

/*
 * The current rlock.redis_url, as the GUC's assign hook left it: parsed,
 * and in full (password included) for telling whether it changed.  The GUC
 * variable itself only ever holds the URL with its password masked.
 */
typedef struct RedisUrlConf
{
	RedisUrl	url;
	char		full[FLEXIBLE_ARRAY_MEMBER];
} RedisUrlConf;

extern const RedisUrlConf *rlock_redis_conf;

extern bool rconn_parse_url(const char *url, RedisUrl *out, char **errmsg);

/* GUC hooks of rlock.redis_url. */
extern bool rlock_check_redis_url(char **newval, void **extra,
								  GucSource source);
extern void rlock_assign_redis_url(const char *newval, void *extra);
extern const char *rlock_show_redis_url(void);

#endif							/* RLOCK_URL_H */
