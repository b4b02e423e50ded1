/*-------------------------------------------------------------------------
 *
 * transport_tls.c
 *	  TLS for rediss:// connections, through OpenSSL (as PostgreSQL itself
 *	  uses): the client context built from rlock.tls_*, non-blocking
 *	  handshakes, and failures named by their cause.
 *
 * The context (CA, client certificate and key, verification mode) is built
 * on first use and rebuilt when the settings change (a reload); sessions
 * made with the old one are closed by the connection layer, which compares
 * settings generations.  With rlock.tls_verify = full the peer's
 * certificate must chain to the CA and name the server (the URL's host, or
 * rlock.tls_server_name), which is also sent as SNI when it is a name.
 *
 * OpenSSL keeps a per-thread error queue that PostgreSQL's own SSL code
 * shares in a backend serving an SSL client: every call here clears it
 * first and leaves nothing in it.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <arpa/inet.h>
#include <errno.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "base/base.h"
#include "net/net.h"
#include "net/transport_int.h"

struct TlsSession
{
	SSL		   *ssl;
	bool		cert_requested; /* the server asked for a certificate we
								 * do not have */
	bool		got_data;		/* the server has answered since */
};

static SSL_CTX *tls_ctx = NULL;
static char *tls_ctx_key = NULL;	/* the settings tls_ctx was built with */

static void
set_error(TransportError *err, TransportErrorKind kind, const char *fmt,...)
	pg_attribute_printf(3, 4);

static void
set_error(TransportError *err, TransportErrorKind kind, const char *fmt,...)
{
	va_list		ap;

	err->kind = kind;
	va_start(ap, fmt);
	vsnprintf(err->detail, sizeof(err->detail), fmt, ap);
	va_end(ap);
}

/* OpenSSL's text for the oldest queued error (or what errno says); clears. */
static const char *
ssl_error_text(char *buf, size_t size)
{
	unsigned long e = ERR_get_error();

	if (e == 0)
		strlcpy(buf, errno ? strerror(errno) : "connection closed", size);
	else
		ERR_error_string_n(e, buf, size);
	ERR_clear_error();
	return buf;
}

static const char *
setting(const char *s)
{
	return s ? s : "";
}

/*
 * Called when the server asks for a client certificate and none is
 * configured: remember it, so that the server's refusal (with TLS 1.3 it
 * comes after the handshake, often as a reset that loses its alert) is
 * named for what it is.
 */
static int
client_cert_cb(SSL *ssl, X509 **x509, EVP_PKEY **pkey)
{
	TlsSession *s = SSL_get_app_data(ssl);

	if (s != NULL)
		s->cert_requested = true;
	return 0;					/* no certificate */
}

/* Build (or reuse) the client context for the current settings. */
static SSL_CTX *
tls_context(TransportError *err)
{
	char		key[4 * MAXPGPATH + 16];
	SSL_CTX    *ctx;
	char		buf[256];

	snprintf(key, sizeof(key), "%s|%s|%s|%d",
			 setting(rlock_tls_ca_file), setting(rlock_tls_cert_file),
			 setting(rlock_tls_key_file), rlock_tls_verify);
	if (tls_ctx != NULL && strcmp(key, tls_ctx_key) == 0)
		return tls_ctx;
	if (tls_ctx != NULL)
	{
		SSL_CTX_free(tls_ctx);
		tls_ctx = NULL;
		free(tls_ctx_key);
		tls_ctx_key = NULL;
	}

	ERR_clear_error();
	ctx = SSL_CTX_new(TLS_client_method());
	if (ctx == NULL)
	{
		set_error(err, TE_CONFIG, "could not create a TLS context: %s",
				  ssl_error_text(buf, sizeof(buf)));
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
					 SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_set_client_cert_cb(ctx, client_cert_cb);
	/* read whole records at once: one read() per reply, not two */
	SSL_CTX_set_read_ahead(ctx, 1);

	if (rlock_tls_verify != RLOCK_TLS_VERIFY_NONE)
	{
		int			ok;

		if (rlock_tls_ca_file && rlock_tls_ca_file[0])
			ok = SSL_CTX_load_verify_locations(ctx, rlock_tls_ca_file, NULL);
		else
			ok = SSL_CTX_set_default_verify_paths(ctx);
		if (ok != 1)
		{
			set_error(err, TE_CONFIG, "could not load the CA certificates of rlock.tls_ca_file \"%s\": %s",
					  setting(rlock_tls_ca_file), ssl_error_text(buf, sizeof(buf)));
			SSL_CTX_free(ctx);
			return NULL;
		}
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	}
	else
		SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);

	if (rlock_tls_cert_file && rlock_tls_cert_file[0])
	{
		const char *keyfile = (rlock_tls_key_file && rlock_tls_key_file[0])
			? rlock_tls_key_file : rlock_tls_cert_file;

		if (SSL_CTX_use_certificate_chain_file(ctx, rlock_tls_cert_file) != 1)
		{
			set_error(err, TE_CONFIG, "could not load the client certificate of rlock.tls_cert_file \"%s\": %s",
					  rlock_tls_cert_file, ssl_error_text(buf, sizeof(buf)));
			SSL_CTX_free(ctx);
			return NULL;
		}
		/*
		 * rlock.tls_key_file is hidden from plain roles, whose calls connect
		 * too: its failure names the setting, not the path.
		 */
		if (SSL_CTX_use_PrivateKey_file(ctx, keyfile, SSL_FILETYPE_PEM) != 1 ||
			SSL_CTX_check_private_key(ctx) != 1)
		{
			if (keyfile == rlock_tls_cert_file)
				set_error(err, TE_CONFIG, "could not load the client key from rlock.tls_cert_file \"%s\" (rlock.tls_key_file is empty): %s",
						  keyfile, ssl_error_text(buf, sizeof(buf)));
			else
				set_error(err, TE_CONFIG, "could not load the client key of rlock.tls_key_file: %s",
						  ssl_error_text(buf, sizeof(buf)));
			SSL_CTX_free(ctx);
			return NULL;
		}
	}

	tls_ctx_key = strdup(key);
	if (tls_ctx_key == NULL)
	{
		SSL_CTX_free(ctx);
		set_error(err, TE_CONFIG, "out of memory");
		return NULL;
	}
	tls_ctx = ctx;
	return ctx;
}

static bool
is_ip_address(const char *name)
{
	unsigned char buf[sizeof(struct in6_addr)];

	return inet_pton(AF_INET, name, buf) == 1 ||
		inet_pton(AF_INET6, name, buf) == 1;
}

TlsSession *
tls_session_start(int fd, const char *server_name, TransportError *err)
{
	SSL_CTX    *ctx = tls_context(err);
	TlsSession *s;
	SSL		   *ssl;
	char		buf[256];

	if (ctx == NULL)
		return NULL;
	ERR_clear_error();
	ssl = SSL_new(ctx);
	if (ssl == NULL || SSL_set_fd(ssl, fd) != 1)
	{
		set_error(err, TE_TLS, "could not create a TLS session: %s",
				  ssl_error_text(buf, sizeof(buf)));
		if (ssl)
			SSL_free(ssl);
		return NULL;
	}
	if (!is_ip_address(server_name))
		SSL_set_tlsext_host_name(ssl, server_name);
	if (rlock_tls_verify == RLOCK_TLS_VERIFY_FULL)
	{
		X509_VERIFY_PARAM *param = SSL_get0_param(ssl);
		int			ok;

		X509_VERIFY_PARAM_set_hostflags(param,
										X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
		if (is_ip_address(server_name))
			ok = X509_VERIFY_PARAM_set1_ip_asc(param, server_name);
		else
			ok = X509_VERIFY_PARAM_set1_host(param, server_name, 0);
		if (ok != 1)
		{
			set_error(err, TE_TLS, "could not set the host name to verify: %s",
					  ssl_error_text(buf, sizeof(buf)));
			SSL_free(ssl);
			return NULL;
		}
	}
	SSL_set_connect_state(ssl);

	s = calloc(1, sizeof(TlsSession));
	if (s == NULL)
	{
		SSL_free(ssl);
		set_error(err, TE_TLS, "out of memory");
		return NULL;
	}
	s->ssl = ssl;
	SSL_set_app_data(ssl, s);
	return s;
}

/*
 * Name why the handshake (or a read just after it: with TLS 1.3 the
 * server's verdict on our certificate comes then) failed.
 */
static void
describe_failure(TlsSession *s, int ret, TransportError *err)
{
	long		vr = SSL_get_verify_result(s->ssl);
	unsigned long e = ERR_peek_error();
	char		buf[256];
	const char *cause = NULL;

	if (vr != X509_V_OK)
	{
		switch (vr)
		{
			case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
			case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
			case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
			case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
			case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
			case X509_V_ERR_CERT_UNTRUSTED:
			case X509_V_ERR_CERT_SIGNATURE_FAILURE:
				cause = "unknown certificate authority";
				break;
			case X509_V_ERR_HOSTNAME_MISMATCH:
			case X509_V_ERR_IP_ADDRESS_MISMATCH:
				cause = "host name mismatch";
				break;
			case X509_V_ERR_CERT_HAS_EXPIRED:
				cause = "certificate expired";
				break;
			case X509_V_ERR_CERT_NOT_YET_VALID:
				cause = "certificate not yet valid";
				break;
			default:
				cause = "certificate verification failed";
				break;
		}
		set_error(err, TE_TLS, "%s: %s", cause,
				  X509_verify_cert_error_string(vr));
		ERR_clear_error();
		return;
	}
	if (e != 0 && ERR_GET_LIB(e) == ERR_LIB_SSL)
	{
		switch (ERR_GET_REASON(e))
		{
#ifdef SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED
			case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
#endif
			case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
				cause = "no client certificate";
				break;
			case SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE:
				if (rlock_tls_cert_file == NULL || rlock_tls_cert_file[0] == '\0')
					cause = "no client certificate";
				break;
			case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
			case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
				cause = "client certificate rejected";
				break;
			case SSL_R_WRONG_VERSION_NUMBER:
			case SSL_R_PACKET_LENGTH_TOO_LONG:
				cause = "the server does not speak TLS";
				break;
			default:
				break;
		}
	}
	if (cause == NULL && s->cert_requested && !s->got_data)
		cause = "no client certificate";

	/*
	 * Once the handshake is done and the server has answered, a failure is
	 * a broken connection (Redis restarted, the link cut), not a TLS one.
	 */
	if (cause == NULL && vr == X509_V_OK && s->got_data)
	{
		if (SSL_get_error(s->ssl, ret) == SSL_ERROR_SYSCALL && e == 0)
			set_error(err, TE_IO, "%s",
					  errno ? strerror(errno) : "the server closed the connection");
		else
			set_error(err, TE_IO, "%s", ssl_error_text(buf, sizeof(buf)));
		ERR_clear_error();
		return;
	}
	if (cause != NULL && strcmp(cause, "no client certificate") == 0)
		set_error(err, TE_TLS, "%s: the server requires one (set rlock.tls_cert_file and rlock.tls_key_file)",
				  cause);
	else if (SSL_get_error(s->ssl, ret) == SSL_ERROR_SYSCALL && e == 0)
		set_error(err, TE_TLS, "%s",
				  errno ? strerror(errno) : "the server closed the connection");
	else if (cause)
		set_error(err, TE_TLS, "%s: %s", cause, ssl_error_text(buf, sizeof(buf)));
	else
		set_error(err, TE_TLS, "%s", ssl_error_text(buf, sizeof(buf)));
	ERR_clear_error();
}

TransportStatus
tls_session_handshake(TlsSession *s, TransportError *err)
{
	int			r;

	ERR_clear_error();
	errno = 0;
	r = SSL_do_handshake(s->ssl);
	if (r == 1)
		return TS_DONE;
	switch (SSL_get_error(s->ssl, r))
	{
		case SSL_ERROR_WANT_READ:
			return TS_WANT_READ;
		case SSL_ERROR_WANT_WRITE:
			return TS_WANT_WRITE;
		default:
			describe_failure(s, r, err);
			return TS_ERROR;
	}
}

/*
 * Empty OpenSSL's error queue before an SSL_read or SSL_write, so that
 * SSL_get_error judges that call alone.  It is almost always empty
 * already: looking costs far less than ERR_clear_error, which clears every
 * slot (a tenth of the instructions TLS adds to a round trip).
 */
static inline void
clear_errors(void)
{
	if (ERR_peek_error() != 0)
		ERR_clear_error();
}

/*
 * What an SSL_read or SSL_write that moved nothing (ret <= 0) means: go on
 * when the socket is ready, the server closed the connection (refused us,
 * if it asked for a certificate we lack and never answered), or failed.
 */
static TransportStatus
io_status(TlsSession *s, int ret, TransportError *err)
{
	switch (SSL_get_error(s->ssl, ret))
	{
		case SSL_ERROR_WANT_READ:
			return TS_WANT_READ;
		case SSL_ERROR_WANT_WRITE:
			return TS_WANT_WRITE;
		case SSL_ERROR_ZERO_RETURN:
		case SSL_ERROR_SYSCALL:
			if (ERR_peek_error() == 0 && errno == 0 &&
				!(s->cert_requested && !s->got_data))
				return TS_CLOSED;
			/* FALLTHROUGH */
		default:
			describe_failure(s, ret, err);
			return TS_ERROR;
	}
}

TransportStatus
tls_session_write(TlsSession *s, const char *buf, size_t len, size_t *nbytes,
				  TransportError *err)
{
	int			r;

	*nbytes = 0;
	if (len == 0)
		return TS_DONE;
	clear_errors();
	errno = 0;
	r = SSL_write(s->ssl, buf, (int) Min(len, (size_t) INT_MAX));
	if (r > 0)
	{
		*nbytes = r;
		return TS_DONE;
	}
	return io_status(s, r, err);
}

TransportStatus
tls_session_read(TlsSession *s, char *buf, size_t len, size_t *nbytes,
				 TransportError *err)
{
	int			r;

	*nbytes = 0;
	clear_errors();
	errno = 0;
	r = SSL_read(s->ssl, buf, (int) Min(len, (size_t) INT_MAX));
	if (r > 0)
	{
		*nbytes = r;
		s->got_data = true;
		return TS_DONE;
	}
	return io_status(s, r, err);
}

/* Has OpenSSL received bytes we have not read yet (read-ahead)? */
bool
tls_session_pending(const TlsSession *s)
{
	return SSL_has_pending(s->ssl) == 1;
}

/* Is the handshake under way with not one byte from the server yet? */
bool
tls_session_unanswered(const TlsSession *s)
{
	return !SSL_is_init_finished(s->ssl) &&
		BIO_number_read(SSL_get_rbio(s->ssl)) == 0;
}

/* Free the session without a close_notify (no I/O here). */
void
tls_session_free(TlsSession *s)
{
	SSL_free(s->ssl);
	ERR_clear_error();
	free(s);
}
