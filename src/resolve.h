/*-------------------------------------------------------------------------
 *
 * resolve.h
 *	  Host name resolution within a deadline, interruptibly.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_RESOLVE_H
#define RLOCK_RESOLVE_H

#include "datatype/timestamp.h"

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

#endif							/* RLOCK_RESOLVE_H */
