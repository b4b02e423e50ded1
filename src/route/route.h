/*-------------------------------------------------------------------------
 *
 * route/route.h
 *	  DOOR-DESCRIPTION
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_ROUTE_H
#define RLOCK_ROUTE_H

#include "utils/guc.h"

#include "redis/redis.h"

/* The most masters rlock.redlock_urls may name. */
#define REDLOCK_MAX_MASTERS		16

/* GUC hooks of rlock.redlock_urls. */
extern bool rlock_check_redlock_urls(char **newval, void **extra,
									 GucSource source);
extern void rlock_assign_redlock_urls(const char *newval, void *extra);
extern const char *rlock_show_redlock_urls(void);

extern int	redlock_num_masters(void);
extern void redlock_require_configured(const char *name);
extern int	redlock_masters(RedisConn **conns, const char *name);
extern RedisConn *redlock_subscriber(int master);

/* How many masters make a majority of n. */
static inline int
redlock_quorum(int n)
{
	return n / 2 + 1;
}

/*
 * The same commands on every master at once: one op per master, each with
 * ok set and its replies (owned by its connection) when it answered.
 */
extern RconnOp *redlock_run(RedisConn **conns, int n, RedisCmd *cmds,
							int ncmds, TimestampTz cap);

extern RconnOp *redlock_run_identified(RedisConn **conns, int n,
									   RedisCmd *cmd, int *dup_a,
									   int *dup_b);

extern bool redlock_failed_silently(RedisConn *conn);

#endif							/* RLOCK_ROUTE_H */
