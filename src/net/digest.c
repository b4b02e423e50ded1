/*-------------------------------------------------------------------------
 *
 * digest.c
 *	  The two digests rlock computes: SHA-1 (a Lua script's name for
 *	  EVALSHA) and SHA-256 (an owner token's field, SPEC.md section 8).
 *
 * They come from libcrypto, which TLS (transport_tls.c) links already; it
 * stays in this folder, with OpenSSL's other uses.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <openssl/evp.h>

#include "net/net.h"

/*
 * Digest len bytes of data with md into outlen hex digits and a NUL.
 * False if libcrypto could not (the caller says what failed).
 */
static bool
digest_hex(const EVP_MD *md, const char *data, size_t len, char *out,
		   int outlen)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char digest[EVP_MAX_MD_SIZE];
	unsigned int dlen = 0;

	if (EVP_Digest(data, len, digest, &dlen, md, NULL) != 1 ||
		(int) dlen * 2 != outlen)
		return false;
	for (unsigned int i = 0; i < dlen; i++)
	{
		out[2 * i] = hex[digest[i] >> 4];
		out[2 * i + 1] = hex[digest[i] & 0x0f];
	}
	out[outlen] = '\0';
	return true;
}

bool
net_sha1_hex(const char *data, size_t len, char *out)
{
	return digest_hex(EVP_sha1(), data, len, out, NET_SHA1_HEX_LEN);
}

bool
net_sha256_hex(const char *data, size_t len, char *out)
{
	return digest_hex(EVP_sha256(), data, len, out, NET_SHA256_HEX_LEN);
}
