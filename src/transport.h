/*-------------------------------------------------------------------------
 *
 * transport.h
 *	  The byte stream under a Redis connection: a non-blocking TCP or Unix
 *	  socket, optionally carrying TLS.  For the connection layer only.
 *
 * Nothing here ever blocks: every call does what it can now and says what
 * the socket must become (readable or writable) before it can go on; the
 * connection layer waits for that with its interruptible wait primitive.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_TRANSPORT_H
#define RLOCK_TRANSPORT_H

#include <sys/types.h>

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
extern bool transport_is_tls(const Transport *t);

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

/* transport_tls.c: TLS sessions over a connected socket. */
typedef struct TlsSession TlsSession;

extern TlsSession *tls_session_start(int fd, const char *server_name,
									 TransportError *err);
extern TransportStatus tls_session_handshake(TlsSession *s,
											 TransportError *err);
extern TransportStatus tls_session_write(TlsSession *s, const char *buf,
										 size_t len, size_t *nbytes,
										 TransportError *err);
extern TransportStatus tls_session_read(TlsSession *s, char *buf,
										size_t len, size_t *nbytes,
										TransportError *err);
extern bool tls_session_pending(const TlsSession *s);
extern bool tls_session_unanswered(const TlsSession *s);
extern void tls_session_free(TlsSession *s);

#endif							/* RLOCK_TRANSPORT_H */
