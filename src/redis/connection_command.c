/*-------------------------------------------------------------------------
 *
 * connection_command.c
 *	  Building Redis commands as argument vectors (RedisCmd), for every
 *	  caller of the connection layer.  Arguments are not copied; numbers are
 *	  formatted into the command's own buffers.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "redis/redis.h"

void
rcmd_init(RedisCmd *cmd)
{
	cmd->argc = 0;
	cmd->maxargs = RCMD_INLINE_ARGS;
	cmd->argv = cmd->inline_argv;
	cmd->argvlen = cmd->inline_len;
	cmd->script = NULL;
	cmd->request_id = false;
	cmd->nnum = 0;
	cmd->block_ms = 0;
}

/*
 * Copy src into dst (another place in memory): arguments that point into
 * src's own buffers are made to point into dst's.
 */
void
rcmd_copy(RedisCmd *dst, const RedisCmd *src)
{
	const char *lo = (const char *) src;
	const char *hi = lo + sizeof(RedisCmd);

	memcpy(dst, src, sizeof(RedisCmd));
	if (src->argv == src->inline_argv)
	{
		dst->argv = dst->inline_argv;
		dst->argvlen = dst->inline_len;
	}
	for (int i = 0; i < dst->argc; i++)
		if (dst->argv[i] >= lo && dst->argv[i] < hi)
			dst->argv[i] = (const char *) dst + (dst->argv[i] - lo);
}

/*
 * WAIT replicas timeout_ms: the round trip it ends may take that much
 * longer than rlock.command_timeout.
 */
void
rcmd_wait(RedisCmd *cmd, int replicas, int timeout_ms)
{
	rcmd_init(cmd);
	rcmd_str(cmd, "WAIT");
	rcmd_int(cmd, replicas);
	rcmd_int(cmd, timeout_ms);
	cmd->block_ms = timeout_ms;
}

void
rcmd_arg(RedisCmd *cmd, const char *s, size_t len)
{
	if (cmd->argc >= cmd->maxargs)
	{
		int			newmax = cmd->maxargs * 2;
		const char **argv = palloc(newmax * sizeof(char *));
		size_t	   *lens = palloc(newmax * sizeof(size_t));

		memcpy(argv, cmd->argv, cmd->argc * sizeof(char *));
		memcpy(lens, cmd->argvlen, cmd->argc * sizeof(size_t));
		if (cmd->argv != cmd->inline_argv)
		{
			pfree(cmd->argv);
			pfree(cmd->argvlen);
		}
		cmd->argv = argv;
		cmd->argvlen = lens;
		cmd->maxargs = newmax;
	}
	cmd->argv[cmd->argc] = s;
	cmd->argvlen[cmd->argc] = len;
	cmd->argc++;
}

void
rcmd_str(RedisCmd *cmd, const char *s)
{
	rcmd_arg(cmd, s, strlen(s));
}

/*
 * v in decimal into buf (room for 21 bytes), not terminated (arguments are
 * read with their lengths); returns the length.  (snprintf costs more than
 * the rest of building a command.)
 */
static int
rcmd_format_int(char *buf, int64 v)
{
	char		tmp[24];
	char	   *p = tmp + sizeof(tmp);
	uint64		u = v < 0 ? (uint64) 0 - (uint64) v : (uint64) v;
	int			len;

	do
	{
		*--p = '0' + (char) (u % 10);
		u /= 10;
	} while (u > 0);
	if (v < 0)
		*--p = '-';
	len = tmp + sizeof(tmp) - p;
	memcpy(buf, p, len);
	return len;
}

void
rcmd_int(RedisCmd *cmd, int64 v)
{
	char	   *buf;
	int			len;

	if (cmd->nnum < RCMD_NUMBUFS)
		buf = cmd->numbuf[cmd->nnum++];
	else
		buf = palloc(24);
	len = rcmd_format_int(buf, v);
	rcmd_arg(cmd, buf, len);
}

/* May cmd be sent again after it may have run (it cannot apply twice)? */
bool
rcmd_resendable(const RedisCmd *cmd)
{
	return cmd->script == NULL || !cmd->script->once || cmd->request_id;
}

/* Are all of cmds resendable? */
bool
rcmd_all_resendable(const RedisCmd *cmds, int ncmds)
{
	for (int i = 0; i < ncmds; i++)
		if (!rcmd_resendable(&cmds[i]))
			return false;
	return true;
}
