/*-------------------------------------------------------------------------
 *
 * net.h
 *	  The door of src/net/, the bottom of the network: how bytes reach a
 *	  Redis server.  OpenSSL stays in this folder (and hiredis in redis/).
 *
 *	  Its files, lowest first:
 *	  url.c				rlock.redis_url: parsing, the password kept out of
 *						sight, the generation of "how to reach Redis"
 *	  resolve.c			host names resolved within a deadline
 *	  digest.c			SHA-1 and SHA-256 (libcrypto)
 *	  transport_tls.c	TLS over a socket (OpenSSL), rlock.tls_*
 *	  transport.c		the non-blocking socket (TCP or Unix), TLS on top
 *	  transport_int.h	the TLS sessions, shared by the two transport files
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_NET_H
#define RLOCK_NET_H

#include <sys/types.h>

#include "utils/guc.h"
#include "datatype/timestamp.h"

/*
 * url: rlock.redis_url: parsing, and keeping its password out of sight.
 */

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
								 * master of its key's slot
								 * (cluster_route.c) */
} RedisNodeKind;

/*
 * Which setting a URL (or a node found through it) comes from, so that a
 * secret goes only where it belongs (SPEC 8): rlock.redis_password_file
 * and rlock.sentinel_password_file are rlock.redis_url's deployment's (its
 * master, the nodes of its Cluster, its sentinels), never another
 * server's.  A URL of no setting (the zero value) gets only its own
 * credentials.
 */
typedef enum RedisUrlOrigin
{
	URL_OF_NOTHING = 0,			/* its own credentials only */
	URL_OF_REDIS_URL,			/* rlock.redis_url's deployment */
	URL_OF_REDLOCK				/* a master of rlock.redlock_urls (its own
								 * credentials only) */
} RedisUrlOrigin;

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
	RedisUrlOrigin origin;		/* whose setting: whose secrets it gets */
	int			master;			/* URL_OF_REDLOCK: which master (from 0) */
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

/* GUC hooks of rlock.redis_url. */
extern bool rlock_check_redis_url(char **newval, void **extra,
								  GucSource source);
extern void rlock_assign_redis_url(const char *newval, void *extra);
extern const char *rlock_show_redis_url(void);

/*
 * resolve: Host name resolution within a deadline, interruptibly.
 */

/*
 * Resolve host (a name or a numeric IPv4/IPv6 address) to one numeric address
 * string, within deadline (a TimestampTz; DT_NOEND = no limit).  Numeric
 * addresses never touch the resolver.  Waits on the process latch, so
 * CHECK_FOR_INTERRUPTS() (cancel, statement_timeout, termination) can end the
 * wait with an ERROR; nothing is leaked or left dangling when that happens.
 * Returns true and writes the address into out (outlen >= 64); on failure
 * returns false with *timed_out set when the deadline passed, else *errmsg
 * (palloc'd, e.g. gai_strerror) set.
 */
extern bool resolve_host(const char *host, TimestampTz deadline,
						 char *out, size_t outlen,
						 bool *timed_out, char **errmsg);

/*
 * transport: The byte stream under a Redis connection: a non-blocking TCP or Unix
 *	  socket, optionally carrying TLS.  For the connection layer only.
 *
 * Nothing here ever blocks: every call does what it can now and says what
 * the socket must become (readable or writable) before it can go on; the
 * connection layer waits for that with its interruptible wait primitive.
 */

typedef enum TransportKind
{
	TRANSPORT_TCP,
	TRANSPORT_TLS,				/* TCP carrying TLS */
	TRANSPORT_UNIX
} TransportKind;

/* What a call achieved, or what it waits for. */
typedef enum TransportStatus
{
	TS_DONE,					/* finished (or moved some bytes) */
	TS_WANT_READ,				/* call again once the socket is readable */
	TS_WANT_WRITE,				/* ... once it is writable */
	TS_CLOSED,					/* the peer closed the connection */
	TS_ERROR					/* failed: see the TransportError */
} TransportStatus;

/* Why a transport call failed. */
typedef enum TransportErrorKind
{
	TE_NONE = 0,
	TE_CONNECT,					/* the socket could not connect */
	TE_TLS,						/* the TLS handshake or a TLS alert */
	TE_CONFIG,					/* the TLS settings are unusable */
	TE_IO						/* a read or write failed */
} TransportErrorKind;

typedef struct TransportError
{
	TransportErrorKind kind;
	char		detail[300];
} TransportError;

typedef struct Transport Transport;

/*
 * Start connecting to addr (a numeric IP address for TCP and TLS, a socket
 * path for Unix) and port.  Returns NULL with *err filled on immediate
 * failure.  server_name is the TLS peer name to send (SNI) and verify.
 */
extern Transport *transport_open(TransportKind kind, const char *addr,
								 int port, const char *server_name,
								 TransportError *err);
extern int	transport_socket(const Transport *t);

/* Go on connecting (TCP, then the TLS handshake) until TS_DONE. */
extern TransportStatus transport_connect_step(Transport *t,
											  TransportError *err);

/*
 * Move bytes.  *nbytes is what was moved (possibly 0 with a TS_WANT_*
 * status).  transport_read returns TS_DONE with nbytes > 0 only.
 */
extern TransportStatus transport_write(Transport *t, const char *buf,
									   size_t len, size_t *nbytes,
									   TransportError *err);
extern TransportStatus transport_read(Transport *t, char *buf, size_t len,
									  size_t *nbytes, TransportError *err);

/* Does the transport hold received bytes not read yet (TLS buffers)? */
extern bool transport_pending(const Transport *t);

/*
 * Is a TLS handshake under way to which the server has sent nothing yet?
 * (A plain Redis takes the ClientHello for the start of an inline command
 * that never ends, and never answers.)
 */
extern bool transport_tls_unanswered(const Transport *t);

/* Close (no I/O: safe in commit and exit callbacks). */
extern void transport_close(Transport *t);

/*
 * Shut the socket down both ways (shutdown(2), not close(2): the socket
 * stays allocated, so its number cannot be reused by another file until
 * transport_close).  The peer sees the connection closed; every later
 * read or write fails or reads end-of-file.  Async-signal-safe: it only
 * reads t's socket number and makes one system call, so a signal handler
 * may call it on a transport the interrupted code is not touching (TLS:
 * the session is left alone; transport_close frees it later without a
 * close_notify).
 */
extern void transport_shutdown(const Transport *t);

/*
 * Bumped whenever a setting that says how to reach Redis changes
 * (rlock.redis_url, rlock.tls_*, rlock.redis_password_file): connections
 * made before are reconnected on their next use.
 */
extern uint64 net_settings_generation;
extern void net_assign_string_setting(const char *newval, void *extra);
extern void net_assign_enum_setting(int newval, void *extra);

/*
 * digest: SHA-1 and SHA-256 as hex digits (out: the length below, plus a
 * NUL), from libcrypto; false when libcrypto could not.
 */
#define NET_SHA1_HEX_LEN	40
#define NET_SHA256_HEX_LEN	64
extern bool net_sha1_hex(const char *data, size_t len, char *out);
extern bool net_sha256_hex(const char *data, size_t len, char *out);

#endif							/* RLOCK_NET_H */
