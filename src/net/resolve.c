/*-------------------------------------------------------------------------
 *
 * resolve.c
 *	  Host name resolution within a deadline, interruptibly.
 *
 * This file owns turning the host of rlock.redis_url into an address.
 * hiredis would resolve it with a plain getaddrinfo(), which blocks the
 * backend for as long as the DNS server takes to answer or the resolver to
 * give up (its timeout times its attempts: 10 s with glibc's defaults),
 * outside rlock.connect_timeout and deaf to cancel and statement_timeout.
 * Instead, the connecting code asks resolve_host() for a numeric address
 * and hands only that to hiredis, whose getaddrinfo() then never consults
 * the resolver.
 *
 * A numeric address is parsed with AI_NUMERICHOST, which never blocks.  A
 * name is looked up with glibc's getaddrinfo_a(GAI_NOWAIT): a glibc helper
 * thread runs getaddrinfo() while the backend sleeps on its latch in short
 * steps and polls gai_error(), so the deadline and CHECK_FOR_INTERRUPTS()
 * can end the wait.  glibc creates its helper threads with every signal
 * blocked, so PostgreSQL's signal handlers (and, where latches use a
 * signalfd, SIGURG) keep going to the backend's own thread; the helpers
 * touch only the request and glibc's own state, never PostgreSQL's.  Only
 * backends and background workers may call this, never the postmaster,
 * which must not fork children while a helper thread might hold a glibc
 * lock.
 *
 * A request the backend stops waiting for (the deadline passed, or an ERROR
 * escaped the wait) cannot always be cancelled: gai_cancel() only removes a
 * request that no helper has picked up yet, and a running one will write
 * its result into the request whenever the DNS server answers or the
 * resolver gives up.  So every request (the gaicb, and the name and hints
 * it points to) lives in malloc'd memory, which an ERROR does not reset,
 * and sits on pending_requests from submission until glibc no longer knows
 * it.  Nothing runs at ERROR time (no PG_TRY): every call first cancels or
 * frees whatever earlier calls left on the list, and a call for a name whose
 * abandoned lookup is still running waits for that lookup instead of
 * starting another.
 *
 * glibc >= 2.34 has getaddrinfo_a in libc itself; older versions need
 * -lanl (newer ones keep libanl.so as an empty library).
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/timestamp.h"

#include "net/net.h"
#include "base/base.h"

/* Longest sleep between two looks at a request in progress. */
#define RESOLVE_POLL_MAX_MS		50

/*
 * One getaddrinfo_a() request.  glibc holds a pointer to cb, and cb points
 * at hints and name, until the request is settled (see request_settled).
 */
typedef struct ResolveRequest
{
	struct ResolveRequest *next;	/* in pending_requests */
	struct gaicb cb;
	struct addrinfo hints;		/* cb.ar_request */
	char		name[FLEXIBLE_ARRAY_MEMBER];	/* cb.ar_name */
} ResolveRequest;

/* Every request not yet settled: the one being waited for and leftovers. */
static ResolveRequest *pending_requests = NULL;

/*
 * Is glibc done with req, so that it may be freed and its result read?
 * gai_cancel() removes a request no helper thread has started (it will
 * never run), reports EAI_NOTCANCELED for one a helper is running, and
 * EAI_ALLDONE once glibc no longer knows it.  A helper stores the result and
 * then, under the mutex gai_cancel() takes, forgets the request, so after
 * EAI_ALLDONE the whole result is visible here.  (EAI_ALLDONE also covers a
 * request that getaddrinfo_a() failed to queue.)
 *
 * Cancels req if it has not started: call it only for a request nobody
 * waits for any more, or for one gai_error() says has finished.
 */
static bool
request_settled(ResolveRequest *req)
{
	int			rc = gai_cancel(&req->cb);

	return rc == EAI_CANCELED || rc == EAI_ALLDONE;
}

/* Take req off pending_requests and free it with its result. */
static void
request_free(ResolveRequest *req)
{
	ResolveRequest **link;

	for (link = &pending_requests; *link != NULL; link = &(*link)->next)
	{
		if (*link == req)
		{
			*link = req->next;
			break;
		}
	}
	if (req->cb.ar_result != NULL)
		freeaddrinfo(req->cb.ar_result);
	free(req);
}

/*
 * Cancel or free the requests earlier calls abandoned (timed out, or left
 * by an ERROR); those still running stay for a later call.
 */
static void
reap_abandoned(void)
{
	ResolveRequest *req = pending_requests;

	while (req != NULL)
	{
		ResolveRequest *next = req->next;

		if (request_settled(req))
			request_free(req);
		req = next;
	}
}

/*
 * Write the numeric form of one of ai's addresses into out: the first IPv4
 * one if there is one (as hiredis tries IPv4 first: "localhost" must reach
 * a Redis that listens on 127.0.0.1 only), else the first.
 */
static bool
format_address(const struct addrinfo *ai, char *out, size_t outlen,
			   char **errdesc)
{
	int			rc;

	for (const struct addrinfo *a = ai; a != NULL; a = a->ai_next)
	{
		if (a->ai_family == AF_INET && a->ai_addr != NULL)
		{
			ai = a;
			break;
		}
	}

	if (ai == NULL || ai->ai_addr == NULL)
	{
		*errdesc = pstrdup("the resolver returned no address");
		return false;
	}
	rc = getnameinfo(ai->ai_addr, ai->ai_addrlen, out, outlen, NULL, 0,
					 NI_NUMERICHOST);
	if (rc != 0)
	{
		*errdesc = pstrdup(gai_strerror(rc));
		return false;
	}
	return true;
}

/*
 * Start looking up host.  On success *reqp is the request, on
 * pending_requests.
 */
static bool
request_start(const char *host, ResolveRequest **reqp, char **errdesc)
{
	size_t		len = strlen(host);
	ResolveRequest *req;
	struct gaicb *list[1];
	int			rc;

	req = malloc(offsetof(ResolveRequest, name) + len + 1);
	if (req == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	memset(req, 0, offsetof(ResolveRequest, name));
	memcpy(req->name, host, len + 1);
	req->hints.ai_family = AF_UNSPEC;
	req->hints.ai_socktype = SOCK_STREAM;
	req->cb.ar_name = req->name;
	req->cb.ar_request = &req->hints;

	/* On the list before glibc sees it: whatever happens, it is not lost. */
	req->next = pending_requests;
	pending_requests = req;

	list[0] = &req->cb;
	rc = getaddrinfo_a(GAI_NOWAIT, list, 1, NULL);
	if (rc != 0)
	{
		int			save_errno = errno;

		/* It may be queued all the same: free it only if glibc is done. */
		if (request_settled(req))
			request_free(req);
		*errdesc = psprintf("could not start resolving the host name: %s",
						   rc == EAI_SYSTEM ? strerror(save_errno) :
						   gai_strerror(rc));
		return false;
	}
	*reqp = req;
	return true;
}

bool
resolve_host(const char *host, TimestampTz deadline,
			 char *out, size_t outlen,
			 bool *timed_out, char **errdesc)
{
	struct addrinfo hints;
	struct addrinfo *res = NULL;
	ResolveRequest *req;
	long		step_ms = 1;
	int			rc;
	bool		ok;

	Assert(host != NULL && out != NULL && outlen >= 64);
	*timed_out = false;
	*errdesc = NULL;

	reap_abandoned();

	/* A numeric address: parsed here, without the resolver. */
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICHOST;
	rc = getaddrinfo(host, NULL, &hints, &res);
	if (rc == 0)
	{
		ok = format_address(res, out, outlen, errdesc);
		freeaddrinfo(res);
		return ok;
	}
	if (rc != EAI_NONAME)
	{
		*errdesc = pstrdup(gai_strerror(rc));
		return false;
	}

	/*
	 * A name.  A lookup of it that an earlier call gave up on may still be
	 * running (reap_abandoned() cancelled those not started): wait for that
	 * one rather than start another, so that a DNS server that never answers
	 * ties up one of glibc's helper threads (at most 20 per process) per
	 * name, not one per attempt.
	 */
	for (req = pending_requests; req != NULL; req = req->next)
	{
		if (strcmp(req->name, host) == 0)
			break;
	}
	if (req == NULL && !request_start(host, &req, errdesc))
		return false;

	for (;;)
	{
		TimestampTz now;
		long		sleep_ms = step_ms;

		/* Finished (and forgotten by glibc, so its result is complete)? */
		rc = gai_error(&req->cb);
		if (rc != EAI_INPROGRESS && request_settled(req))
			break;

		now = GetCurrentTimestamp();
		if (!TIMESTAMP_IS_NOEND(deadline))
		{
			int64		left_us = deadline - now;

			if (left_us <= 0)
			{
				/* Cancel it if no helper has started it, else leave it. */
				if (request_settled(req))
					request_free(req);
				*timed_out = true;
				return false;
			}
			if (left_us < (int64) sleep_ms * 1000)
				sleep_ms = (long) ((left_us + 999) / 1000);
		}

		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 sleep_ms, RLOCK_WAIT_EVENT);
		ResetLatch(MyLatch);

		/*
		 * An ERROR escaping here leaves req on pending_requests, where the
		 * next call cancels or frees it.
		 */
		CHECK_FOR_INTERRUPTS();

		step_ms = Min(step_ms * 2, RESOLVE_POLL_MAX_MS);
	}

	if (rc == 0)
		ok = format_address(req->cb.ar_result, out, outlen, errdesc);
	else
	{
		*errdesc = pstrdup(gai_strerror(rc));
		ok = false;
	}
	request_free(req);
	return ok;
}
