/*-------------------------------------------------------------------------
 *
 * transport_int.h
 *	  What transport.c and transport_tls.c share, for them only: the TLS
 *	  sessions transport.c puts over its socket for rediss://.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_TRANSPORT_INT_H
#define RLOCK_TRANSPORT_INT_H

#include "net/net.h"

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

#endif							/* RLOCK_TRANSPORT_INT_H */
