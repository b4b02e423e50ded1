/*-------------------------------------------------------------------------
 *
 * transport.c
 *	  The byte stream under a Redis connection: a non-blocking socket (TCP
 *	  or Unix), with TLS on top for rediss:// (transport_tls.c).
 *
 * rlock owns its sockets rather than letting hiredis open them: hiredis
 * 0.14 (Debian bookworm) reads and writes its socket itself and has no TLS,
 * and a socket of our own is one the connection layer can wait on with
 * WaitLatchOrSocket.  hiredis is left with what is the same in every
 * version, its reply parser.  Every call here does what it can without
 * blocking and says which readiness it needs to go on.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "net/net.h"
#include "net/transport_int.h"

struct Transport
{
	TransportKind kind;
	int			fd;
	bool		connecting;		/* the socket's connect is in progress */
	char		server_name[256];	/* TLS: the name to send and verify */
	TlsSession *tls;			/* TLS: once the socket is connected */
};

static void
set_error(TransportError *err, TransportErrorKind kind, const char *detail)
{
	err->kind = kind;
	strlcpy(err->detail, detail ? detail : "", sizeof(err->detail));
}

Transport *
transport_open(TransportKind kind, const char *addr, int port,
			   const char *server_name, TransportError *err)
{
	struct sockaddr_storage sa;
	socklen_t	salen;
	int			family;
	int			fd;
	Transport  *t;

	memset(&sa, 0, sizeof(sa));
	if (kind == TRANSPORT_UNIX)
	{
		struct sockaddr_un *un = (struct sockaddr_un *) &sa;

		if (strlen(addr) >= sizeof(un->sun_path))
		{
			set_error(err, TE_CONNECT, "the socket path is too long");
			return NULL;
		}
		un->sun_family = AF_UNIX;
		strcpy(un->sun_path, addr);
		salen = sizeof(*un);
		family = AF_UNIX;
	}
	else
	{
		struct sockaddr_in *in4 = (struct sockaddr_in *) &sa;
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) &sa;

		if (inet_pton(AF_INET, addr, &in4->sin_addr) == 1)
		{
			in4->sin_family = AF_INET;
			in4->sin_port = htons(port);
			salen = sizeof(*in4);
			family = AF_INET;
		}
		else if (inet_pton(AF_INET6, addr, &in6->sin6_addr) == 1)
		{
			in6->sin6_family = AF_INET6;
			in6->sin6_port = htons(port);
			salen = sizeof(*in6);
			family = AF_INET6;
		}
		else
		{
			set_error(err, TE_CONNECT, "not a numeric address");
			return NULL;
		}
	}

	fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
	{
		set_error(err, TE_CONNECT, strerror(errno));
		return NULL;
	}
	if (family != AF_UNIX)
	{
		int			one = 1;

		(void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}

	t = calloc(1, sizeof(Transport));
	if (t == NULL)
	{
		close(fd);
		set_error(err, TE_CONNECT, "out of memory");
		return NULL;
	}
	t->kind = kind;
	t->fd = fd;
	strlcpy(t->server_name, server_name ? server_name : addr,
			sizeof(t->server_name));

	if (connect(fd, (struct sockaddr *) &sa, salen) == 0)
		t->connecting = false;
	else if (errno == EINPROGRESS || errno == EINTR)
		t->connecting = true;
	else
	{
		set_error(err, TE_CONNECT, strerror(errno));
		transport_close(t);
		return NULL;
	}
	return t;
}

int
transport_socket(const Transport *t)
{
	return t->fd;
}

TransportStatus
transport_connect_step(Transport *t, TransportError *err)
{
	if (t->connecting)
	{
		int			soerr = 0;
		socklen_t	len = sizeof(soerr);
		struct sockaddr_storage peer;
		socklen_t	peerlen = sizeof(peer);

		if (getsockopt(t->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
			soerr = errno;
		if (soerr != 0)
		{
			set_error(err, TE_CONNECT, strerror(soerr));
			return TS_ERROR;
		}
		/* not writable yet, or writable because connected? */
		if (getpeername(t->fd, (struct sockaddr *) &peer, &peerlen) < 0)
		{
			if (errno == ENOTCONN)
				return TS_WANT_WRITE;
			set_error(err, TE_CONNECT, strerror(errno));
			return TS_ERROR;
		}
		t->connecting = false;
	}
	if (t->kind != TRANSPORT_TLS)
		return TS_DONE;
	if (t->tls == NULL)
	{
		t->tls = tls_session_start(t->fd, t->server_name, err);
		if (t->tls == NULL)
			return TS_ERROR;
	}
	return tls_session_handshake(t->tls, err);
}

TransportStatus
transport_write(Transport *t, const char *buf, size_t len, size_t *nbytes,
				TransportError *err)
{
	ssize_t		n;

	*nbytes = 0;
	if (t->tls != NULL)
		return tls_session_write(t->tls, buf, len, nbytes, err);
	n = send(t->fd, buf, len, MSG_NOSIGNAL);
	if (n >= 0)
	{
		*nbytes = n;
		return TS_DONE;
	}
	if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
		return TS_WANT_WRITE;
	set_error(err, TE_IO, strerror(errno));
	return TS_ERROR;
}

TransportStatus
transport_read(Transport *t, char *buf, size_t len, size_t *nbytes,
			   TransportError *err)
{
	ssize_t		n;

	*nbytes = 0;
	if (t->tls != NULL)
		return tls_session_read(t->tls, buf, len, nbytes, err);
	n = recv(t->fd, buf, len, 0);
	if (n > 0)
	{
		*nbytes = n;
		return TS_DONE;
	}
	if (n == 0)
		return TS_CLOSED;
	if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
		return TS_WANT_READ;
	set_error(err, TE_IO, strerror(errno));
	return TS_ERROR;
}

bool
transport_pending(const Transport *t)
{
	return t->tls != NULL && tls_session_pending(t->tls);
}

bool
transport_tls_unanswered(const Transport *t)
{
	return t->tls != NULL && tls_session_unanswered(t->tls);
}

void
transport_close(Transport *t)
{
	if (t == NULL)
		return;
	if (t->tls != NULL)
		tls_session_free(t->tls);
	if (t->fd >= 0)
		close(t->fd);
	free(t);
}

void
transport_shutdown(const Transport *t)
{
	if (t != NULL && t->fd >= 0)
		(void) shutdown(t->fd, SHUT_RDWR);
}
