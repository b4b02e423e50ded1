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

/* What a node is to rlock. */
typedef enum RedisNodeKind
{
	NODE_DIRECT = 0,			/* a Redis server, at host:port (or socket) */
	NODE_SENTINEL,				/* a sentinel, asked where the master is */
	NODE_SENTINEL_MASTER,		/* the master of master_name, wherever the
								 * sentinels say it is now (host and port
								 * are filled in when it is located) */
	NODE_CLUSTER				/* a Redis Cluster: each command goes to the
								 * master of its key's slot (cluster.c) */
} RedisNodeKind;

/* A parsed Redis URL, or one node of a deployment. */
typedef struct RedisUrl
{
	RedisUrlScheme scheme;
	RedisNodeKind kind;
	char		host[256];		/* unix://: the socket's path */
	int			port;
	char		user[256];
	char		password[256];
	int			db;
	char		master_name[256];	/* NODE_SENTINEL_MASTER */
} RedisUrl;

/* Sentinels or cluster seeds a URL may name. */
#define RLOCK_MAX_HOSTS		16
#define RLOCK_SENTINEL_PORT		26379
#define RLOCK_REDIS_PORT		6379

typedef struct RedisHostAddr
{
	char		host[256];
	int			port;
} RedisHostAddr;

/*
 * The current rlock.redis_url, as the GUC's assign hook left it: parsed,
 * and in full (password included) for telling whether it changed.  The GUC
 * variable itself only ever holds the URL with its password masked.
 */
typedef struct RedisUrlConf
{
	RedisUrl	url;			/* the node locks live on (for Sentinel: its
								 * master, located through the sentinels;
								 * for a Cluster: the nodes' scheme and
								 * credentials) */
	int			nhosts;
	RedisHostAddr hosts[RLOCK_MAX_HOSTS];	/* sentinels, or cluster seeds */
	char		full[FLEXIBLE_ARRAY_MEMBER];
} RedisUrlConf;

extern const RedisUrlConf *rlock_redis_conf;

extern bool rconn_parse_url(const char *url, RedisUrl *out, char **errmsg);
extern bool rconn_parse_deployment(const char *url, RedisUrl *out,
								   RedisHostAddr *hosts,
								   int *nhosts, char **errmsg);

/* GUC hooks of rlock.redis_url. */
extern bool rlock_check_redis_url(char **newval, void **extra,
								  GucSource source);
extern void rlock_assign_redis_url(const char *newval, void *extra);
extern const char *rlock_show_redis_url(void);

#endif							/* RLOCK_URL_H */
