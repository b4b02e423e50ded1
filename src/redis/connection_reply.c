/*-------------------------------------------------------------------------
 *
 * connection_reply.c
 *	  Bounded replies: the reply parser of every Redis connection, which
 *	  refuses a reply past RCONN_REPLY_MAX_* (a broken or hostile server
 *	  costs an ERROR, never the backend's or the worker's memory).
 *
 * hiredis' reader builds replies through a table of functions; ours wraps
 * the table's array and string makers to count, for the reply being
 * parsed (on a commands connection: for the replies of the round trip),
 * its elements, the bytes of its strings and how deeply its arrays nest,
 * and refuses (a NULL object: hiredis stops with an error) what passes
 * the bounds, before hiredis allocates anything for it (it would allocate
 * an array of the announced size at once).  What is buffered of a reply's
 * unfinished part, and of a line, is checked as it is fed
 * (rconn_read_some, connection_io.c).  This works alike on hiredis
 * 0.14 and 1.x.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <stdint.h>

#include "base/base.h"
#include "redis/redis.h"
#include "redis/redis_int.h"

static redisReplyObjectFunctions base_fns;
static redisReplyObjectFunctions bounded_fns;
static bool bounded_fns_made = false;
static RedisConn *parsing = NULL;	/* whose reply is being parsed */

static void *
bounded_string(const redisReadTask *task, char *str, size_t len)
{
	RedisConn  *conn = parsing;

	if (conn != NULL)
	{
		if (len > RCONN_REPLY_MAX_BYTES - conn->reply_bytes)
		{
			snprintf(conn->reply_refusal, sizeof(conn->reply_refusal),
					 "a reply exceeded %d MB",
					 RCONN_REPLY_MAX_BYTES / (1024 * 1024));
			return NULL;
		}
		conn->reply_bytes += len;
	}
	return base_fns.createString(task, str, len);
}

#if HIREDIS_MAJOR >= 1
static void *
bounded_array(const redisReadTask *task, size_t elements)
#else
static void *
bounded_array(const redisReadTask *task, int elements)
#endif
{
	RedisConn  *conn = parsing;
#if HIREDIS_MAJOR >= 1
	size_t		n = elements;
#else
	size_t		n = elements < 0 ? SIZE_MAX : (size_t) elements;
#endif

	if (conn != NULL)
	{
		int			depth = 1;

		for (const redisReadTask *t = task->parent; t != NULL; t = t->parent)
			depth++;
		if (depth > RCONN_REPLY_MAX_DEPTH)
		{
			snprintf(conn->reply_refusal, sizeof(conn->reply_refusal),
					 "a reply nests arrays more than %d deep",
					 RCONN_REPLY_MAX_DEPTH);
			return NULL;
		}
		if (n > RCONN_REPLY_MAX_ELEMENTS - conn->reply_elements)
		{
			snprintf(conn->reply_refusal, sizeof(conn->reply_refusal),
					 "a reply announced %lld array elements, more than %d in all",
					 (long long) elements + (long long) conn->reply_elements,
					 RCONN_REPLY_MAX_ELEMENTS);
			return NULL;
		}
		if (n > (RCONN_REPLY_MAX_BYTES - conn->reply_bytes) /
			RCONN_REPLY_ELEMENT_COST)
		{
			snprintf(conn->reply_refusal, sizeof(conn->reply_refusal),
					 "a reply exceeded %d MB (its %lld array elements count %d bytes each)",
					 RCONN_REPLY_MAX_BYTES / (1024 * 1024),
					 (long long) elements + (long long) conn->reply_elements,
					 RCONN_REPLY_ELEMENT_COST);
			return NULL;
		}
		conn->reply_elements += n;
		conn->reply_bytes += n * RCONN_REPLY_ELEMENT_COST;
	}
	return base_fns.createArray(task, elements);
}

/* A reply parser for conn whose replies are bounded (NULL: out of memory). */
redisReader *
rconn_reader_create(RedisConn *conn)
{
	redisReader *reader = redisReaderCreate();

	if (reader == NULL)
		return NULL;
	if (!bounded_fns_made)
	{
		base_fns = *reader->fn;
		bounded_fns = base_fns;
		bounded_fns.createString = bounded_string;
		bounded_fns.createArray = bounded_array;
		bounded_fns_made = true;
	}
	reader->fn = &bounded_fns;
	conn->reply_bytes = 0;
	conn->reply_elements = 0;
	conn->reply_refusal[0] = '\0';
	return reader;
}

/*
 * The next reply that conn's parser has complete (*reply NULL if none yet).
 * False, with conn's failure set, on a protocol error or a reply past the
 * bounds; the connection must then be dropped.
 */
bool
rconn_get_reply(RedisConn *conn, void **reply)
{
	int			rc;

	*reply = NULL;
	parsing = conn;
	conn->reply_refusal[0] = '\0';
	rc = redisReaderGetReply(conn->reader, reply);
	parsing = NULL;
	if (rc != REDIS_OK)
	{
		rconn_set_failure(conn, RF_PROTOCOL,
						  conn->reply_refusal[0] ? conn->reply_refusal :
						  conn->reader->errstr);
		return false;
	}
	/*
	 * A commands connection counts the replies of a round trip together (a
	 * pipeline of many replies each within the bounds is no way around
	 * them): rconn_reset_replies starts it afresh.  A subscriber counts each
	 * reply (its messages come for as long as it waits).
	 */
	if (*reply != NULL && conn->role != RCONN_COMMANDS)
	{
		conn->reply_bytes = 0;
		conn->reply_elements = 0;
	}
	return true;
}
