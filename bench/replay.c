/*
 * bench/replay.c -- the bare client of the benchmark's floors (bench/run,
 * bench/nodes.sh, bench/sync.sh): replays the commands rlock sent for an
 * acquire and for a release (caught with MONITOR), as a bare C client
 * would, with nothing of rlock's own.  bench/run compiles it with cc
 * (libhiredis for its reply reader, libpq for SELECT 1).
 *
 *   replay [-c CLIENTS] [-j THREADS] [-n PAIRS | -T SECONDS] [-k NAME]
 *          [-d CONNINFO] [-h HOST] ACQUIRE_FILE RELEASE_FILE PORT...
 *
 * A file holds one command per paragraph, one argument a line, as MONITOR
 * shows it (quotes removed, its escapes \" \\ \n \r \t \a \b \xHH kept: they
 * are undone here).  Each of CLIENTS clients (default 1) has a connection
 * to every Redis of PORT... (on HOST, default 127.0.0.1) and repeats:
 *
 *   [SELECT 1]  with -d: a prepared SELECT 1 on a connection of its own to
 *               PostgreSQL (as pgbench -M prepared), its result awaited;
 *   acquire     the acquire commands as one pipeline, sent to every Redis
 *               at once (non-blocking), then every reply of every Redis
 *               awaited;
 *   release     the same with the release commands.
 *
 * so that a Redlock's floor asks its masters at once, and with -d a client
 * does what a pgbench client and its backend do for `SELECT
 * rlock_try_acquire(n), rlock_release(n)`, one part after the other.  The
 * clients are spread over THREADS threads (default 1), each waiting in
 * poll() for all of its clients' sockets.
 *
 * As rlock does, an unlock latch key (redisson_unlock_latch:...:<hex id>:
 * a release's, or the request latch of an acquire that has one) is new
 * each time, and the latches of one pair are deleted (one DEL) in front of
 * the next acquire, those of the last pair at the end.  The ids start with this process's id and start time and the
 * client's number: a later replay of the same calls must not find a latch
 * of this one (its release would answer from the latch and leave the lock
 * held).  With -k NAME, every occurrence of NAME in an argument becomes
 * NAME-<client> (clients numbered from 0): each client on a lock of its own.
 *
 * -n PAIRS (default 5000): each client does a tenth more pairs first,
 * uncounted (warm-up), then PAIRS counted.  -T SECONDS: the clients run for
 * SECONDS; what completes in the first tenth (at most 1 s) is not counted.
 *
 * Prints one line: the mean milliseconds of SELECT 1 (0 without -d), of an
 * acquire and of a release, the counted pairs per second (all clients, over
 * the counted time), and the counted pairs.  Any error reply ends it (exit
 * status 1, the reply on stderr).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <libpq-fe.h>

typedef struct Arg
{
	char	   *s;
	size_t		len;
} Arg;

typedef struct Cmd
{
	int			argc;
	Arg		   *argv;
} Cmd;

typedef struct Buf
{
	char	   *data;
	size_t		len,
				cap;
} Buf;

enum Phase
{
	PH_SELECT, PH_ACQUIRE, PH_RELEASE, PH_DONE
};

typedef struct Node				/* a client's connection to one Redis */
{
	int			fd;
	redisReader *reader;
	size_t		sent;			/* bytes of the client's pipeline sent */
	int			pending;		/* replies still awaited */
} Node;

typedef struct Client
{
	int			id;
	Cmd		   *acq;			/* this client's commands (-k applied) */
	Cmd		   *rel;
	Node	   *nodes;
	PGconn	   *pg;
	enum Phase	phase;
	double		started;		/* when the phase began */
	Buf			out;			/* the phase's pipeline */
	int			ncmds;			/* commands in it */
	char	  **latches;		/* latches of the last release */
	int			nlatches;
	unsigned long long seq;
	long		done;			/* pairs completed (-n) */
} Client;

typedef struct Totals
{
	double		ms[3];			/* SELECT 1, acquire, release */
	long		n[3];
	long		pairs;
} Totals;

typedef struct Thread
{
	pthread_t	tid;
	Client	  **clients;
	int			nclients;
	Totals		t;
} Thread;

static int	nclients = 1, nthreads = 1, nports;
static long npairs = 5000;
static double seconds = 0;
static const char *name, *conninfo, *host = "127.0.0.1";
static int *ports;
static Cmd *acq_cmds, *rel_cmds;
static int nacq, nrel;
static char run_id[17];
static double t_start, t_window, t_end;	/* -T: counted from t_window to t_end */

static void
die(const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	fputs("replay: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static void *
xmalloc(size_t n)
{
	void	   *p = calloc(1, n ? n : 1);

	if (p == NULL)
		die("out of memory");
	return p;
}

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void
buf_add(Buf *b, const char *s, size_t n)
{
	if (b->len + n > b->cap)
	{
		b->cap = (b->len + n) * 2 + 256;
		b->data = realloc(b->data, b->cap);
		if (b->data == NULL)
			die("out of memory");
	}
	memcpy(b->data + b->len, s, n);
	b->len += n;
}

static void
buf_fmt(Buf *b, const char *fmt,...)
{
	char		tmp[64];
	va_list		ap;
	int			n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	buf_add(b, tmp, n);
}

/* one command in RESP */
static void
resp(Buf *b, int argc, const Arg *argv)
{
	buf_fmt(b, "*%d\r\n", argc);
	for (int i = 0; i < argc; i++)
	{
		buf_fmt(b, "$%zu\r\n", argv[i].len);
		buf_add(b, argv[i].s, argv[i].len);
		buf_add(b, "\r\n", 2);
	}
}

/* Undo MONITOR's escapes of one argument (in place). */
static size_t
unescape(char *s)
{
	char	   *o = s;

	for (char *p = s; *p; p++)
	{
		if (*p != '\\' || p[1] == '\0')
		{
			*o++ = *p;
			continue;
		}
		p++;
		switch (*p)
		{
			case 'n': *o++ = '\n'; break;
			case 'r': *o++ = '\r'; break;
			case 't': *o++ = '\t'; break;
			case 'a': *o++ = '\a'; break;
			case 'b': *o++ = '\b'; break;
			case 'x':
				if (p[1] && p[2])
				{
					char		hex[3] = {p[1], p[2], 0};

					*o++ = (char) strtol(hex, NULL, 16);
					p += 2;
					break;
				}
				/* FALLTHROUGH */
			default: *o++ = *p; break;
		}
	}
	*o = '\0';
	return o - s;
}

/* The commands of FILE: paragraphs of arguments, one a line. */
static Cmd *
read_commands(const char *file, int *ncmds)
{
	FILE	   *f = fopen(file, "r");
	Cmd		   *cmds = NULL;
	int			n = 0,
				in_cmd = 0;
	char	   *line = NULL;
	size_t		cap = 0;
	ssize_t		len;

	if (f == NULL)
		die("%s: %s", file, strerror(errno));
	while ((len = getline(&line, &cap, f)) >= 0)
	{
		Cmd		   *c;

		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = '\0';
		if (len == 0)
		{
			in_cmd = 0;
			continue;
		}
		if (!in_cmd)
		{
			cmds = realloc(cmds, (n + 1) * sizeof(Cmd));
			if (cmds == NULL)
				die("out of memory");
			cmds[n].argc = 0;
			cmds[n].argv = NULL;
			n++;
			in_cmd = 1;
		}
		c = &cmds[n - 1];
		c->argv = realloc(c->argv, (c->argc + 1) * sizeof(Arg));
		if (c->argv == NULL)
			die("out of memory");
		c->argv[c->argc].s = strdup(line);
		c->argv[c->argc].len = unescape(c->argv[c->argc].s);
		c->argc++;
	}
	free(line);
	fclose(f);
	if (n == 0)
		die("%s: no command", file);
	*ncmds = n;
	return cmds;
}

/* CMDS with every NAME in an argument made NAME-<id> (-k). */
static Cmd *
client_commands(const Cmd *cmds, int n, int id)
{
	Cmd		   *out = xmalloc(n * sizeof(Cmd));

	for (int i = 0; i < n; i++)
	{
		out[i].argc = cmds[i].argc;
		out[i].argv = xmalloc(cmds[i].argc * sizeof(Arg));
		for (int a = 0; a < cmds[i].argc; a++)
		{
			const Arg  *in = &cmds[i].argv[a];
			Buf			b = {0};
			const char *p = in->s,
					   *end = in->s + in->len,
					   *hit;

			while (name != NULL &&
				   (hit = memmem(p, end - p, name, strlen(name))) != NULL)
			{
				buf_add(&b, p, hit - p);
				buf_fmt(&b, "%s-%d", name, id);
				p = hit + strlen(name);
			}
			buf_add(&b, p, end - p);
			out[i].argv[a].s = b.data;
			out[i].argv[a].len = b.len;
		}
	}
	return out;
}

/* Is A an unlock latch, redisson_unlock_latch:...:<hex>?  Sets *stem. */
static int
is_latch(const Arg *a, size_t *stem)
{
	static const char pfx[] = "redisson_unlock_latch:";
	const char *colon;
	size_t		i;

	if (a->len < sizeof(pfx) || memcmp(a->s, pfx, sizeof(pfx) - 1) != 0)
		return 0;
	colon = memrchr(a->s, ':', a->len);
	if (colon == NULL || colon == a->s + a->len - 1)
		return 0;
	for (i = colon + 1 - a->s; i < a->len; i++)
		if (!strchr("0123456789abcdef", a->s[i]))
			return 0;
	*stem = colon + 1 - a->s;
	return 1;
}

static int
connect_redis(int port)
{
	struct sockaddr_in sa = {0};
	int			fd = socket(AF_INET, SOCK_STREAM, 0),
				one = 1;

	sa.sin_family = AF_INET;
	sa.sin_port = htons(port);
	if (fd < 0 || inet_pton(AF_INET, host, &sa.sin_addr) != 1 ||
		connect(fd, (struct sockaddr *) &sa, sizeof(sa)) != 0)
		die("%s:%d: %s", host, port, strerror(errno));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	return fd;
}

/* Counting?  (-T: within the window; -n: past the warm-up) */
static int
counted(Client *c, double t)
{
	if (seconds > 0)
		return t >= t_window && t <= t_end;
	return c->done >= npairs / 10;
}

/* Send what is left of the phase's pipeline to node (non-blocking). */
static void
send_some(Node *nd, Buf *out)
{
	while (nd->sent < out->len)
	{
		ssize_t		w = write(nd->fd, out->data + nd->sent, out->len - nd->sent);

		if (w < 0)
		{
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			if (errno == EINTR)
				continue;
			die("write: %s", strerror(errno));
		}
		nd->sent += w;
	}
}

/* Append a DEL of the latches of c's last release to its pipeline. */
static int
add_del(Client *c)
{
	Arg		   *del;

	if (c->nlatches == 0)
		return 0;
	del = xmalloc((c->nlatches + 1) * sizeof(Arg));
	del[0].s = "DEL";
	del[0].len = 3;
	for (int i = 0; i < c->nlatches; i++)
	{
		del[i + 1].s = c->latches[i];
		del[i + 1].len = strlen(c->latches[i]);
	}
	resp(&c->out, c->nlatches + 1, del);
	for (int i = 0; i < c->nlatches; i++)
		free(c->latches[i]);
	free(del);
	c->nlatches = 0;
	return 1;
}

/* Begin the next phase of c at time t: build it and send it to all nodes. */
/*
 * Append cmd to c's pipeline with each unlock latch in it (a release's, or
 * the request latch of an acquire that has one: a fenced lock's, a
 * semaphore's, a latch's) made new, and remembered, to be deleted in front
 * of the next acquire: a replayed acquire must not find the latch of the
 * one it copies and answer from it without doing the work.
 */
static void
add_cmd(Client *c, const Cmd *cmd)
{
	Arg		   *args = xmalloc(cmd->argc * sizeof(Arg));

	for (int a = 0; a < cmd->argc; a++)
	{
		size_t		stem;

		args[a] = cmd->argv[a];
		if (is_latch(&cmd->argv[a], &stem))
		{
			Buf			b = {0};

			buf_add(&b, cmd->argv[a].s, stem);
			buf_fmt(&b, "%s%04x%012llx", run_id, c->id & 0xffff,
					++c->seq & 0xffffffffffffULL);
			buf_add(&b, "", 1);
			c->latches = realloc(c->latches,
								 (c->nlatches + 1) * sizeof(char *));
			if (c->latches == NULL)
				die("out of memory");
			c->latches[c->nlatches++] = b.data;
			args[a].s = b.data;
			args[a].len = b.len - 1;
		}
	}
	resp(&c->out, cmd->argc, args);
	free(args);
}

static void
start_phase(Client *c, enum Phase ph, double t)
{
	c->phase = ph;
	c->started = t;
	if (ph == PH_DONE)
		return;
	if (ph == PH_SELECT)
	{
		if (!PQsendQueryPrepared(c->pg, "s1", 0, NULL, NULL, NULL, 0))
			die("SELECT 1: %s", PQerrorMessage(c->pg));
		for (int r; (r = PQflush(c->pg)) != 0;)	/* (a few bytes: at once) */
			if (r < 0)
				die("SELECT 1: %s", PQerrorMessage(c->pg));
		return;
	}
	c->out.len = 0;
	c->ncmds = 0;
	if (ph == PH_ACQUIRE)
	{
		c->ncmds += add_del(c);
		for (int i = 0; i < nacq; i++)
			add_cmd(c, &c->acq[i]);
		c->ncmds += nacq;
	}
	else
	{
		for (int i = 0; i < nrel; i++)
			add_cmd(c, &c->rel[i]);
		c->ncmds = nrel;
	}
	for (int i = 0; i < nports; i++)
	{
		c->nodes[i].sent = 0;
		c->nodes[i].pending = c->ncmds;
		send_some(&c->nodes[i], &c->out);
	}
}

/* The phase of c ended at time t: count it, and go on (or stop). */
static void
end_phase(Client *c, double t, Totals *tot)
{
	int			k = c->phase == PH_SELECT ? 0 : c->phase == PH_ACQUIRE ? 1 : 2;
	int			count = counted(c, t);
	enum Phase	next;

	if (count)
	{
		tot->ms[k] += 1000 * (t - c->started);
		tot->n[k]++;
	}
	if (c->phase == PH_RELEASE)
	{
		if (count)
			tot->pairs++;
		c->done++;
		if (seconds > 0 ? t >= t_end : c->done >= npairs + npairs / 10)
		{
			start_phase(c, PH_DONE, t);
			return;
		}
		next = c->pg ? PH_SELECT : PH_ACQUIRE;
	}
	else
		next = c->phase + 1;
	start_phase(c, next, t);
}

/* Read what node nd has; true once every reply of the phase is in. */
static int
read_node(Node *nd)
{
	char		buf[16384];
	ssize_t		r;
	void	   *reply;

	for (;;)
	{
		r = read(nd->fd, buf, sizeof(buf));
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			die("read: %s", r == 0 ? "Redis closed the connection" : strerror(errno));
		if (redisReaderFeed(nd->reader, buf, r) != REDIS_OK)
			die("reader: %s", nd->reader->errstr);
		if (r < (ssize_t) sizeof(buf))
			break;
	}
	while (nd->pending > 0)
	{
		if (redisReaderGetReply(nd->reader, &reply) != REDIS_OK)
			die("bad reply: %s", nd->reader->errstr);
		if (reply == NULL)
			break;
		if (((redisReply *) reply)->type == REDIS_REPLY_ERROR)
			die("Redis answered: %s", ((redisReply *) reply)->str);
		freeReplyObject(reply);
		nd->pending--;
	}
	return nd->pending == 0;
}

/* Read what PostgreSQL sent c; true once SELECT 1 is answered. */
static int
read_pg(Client *c)
{
	PGresult   *res;

	if (!PQconsumeInput(c->pg))
		die("SELECT 1: %s", PQerrorMessage(c->pg));
	while (!PQisBusy(c->pg))
	{
		res = PQgetResult(c->pg);
		if (res == NULL)
			return 1;
		if (PQresultStatus(res) != PGRES_TUPLES_OK)
			die("SELECT 1: %s", PQresultErrorMessage(res));
		PQclear(res);
	}
	return 0;
}

static void *
thread_main(void *arg)
{
	Thread	   *th = arg;
	int			maxfds = th->nclients * (nports + 1);
	struct pollfd *pfd = xmalloc(maxfds * sizeof(struct pollfd));
	Client	  **owner = xmalloc(maxfds * sizeof(Client *));
	int		   *which = xmalloc(maxfds * sizeof(int));
	double		t = now();

	for (int i = 0; i < th->nclients; i++)
		start_phase(th->clients[i], th->clients[i]->pg ? PH_SELECT : PH_ACQUIRE, t);
	for (;;)
	{
		int			n = 0,
					r;

		for (int i = 0; i < th->nclients; i++)
		{
			Client	   *c = th->clients[i];

			if (c->phase == PH_DONE)
				continue;
			if (c->phase == PH_SELECT)
			{
				pfd[n] = (struct pollfd) {PQsocket(c->pg), POLLIN, 0};
				owner[n] = c;
				which[n++] = -1;
				continue;
			}
			for (int k = 0; k < nports; k++)
			{
				Node	   *nd = &c->nodes[k];

				if (nd->pending == 0)
					continue;
				pfd[n] = (struct pollfd) {nd->fd, POLLIN | (nd->sent < c->out.len ? POLLOUT : 0), 0};
				owner[n] = c;
				which[n++] = k;
			}
		}
		if (n == 0)
			break;
		r = poll(pfd, n, 10000);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			die("poll: %s", r < 0 ? strerror(errno) : "no reply within 10 s");
		for (int i = 0; i < n; i++)
		{
			Client	   *c = owner[i];

			if (pfd[i].revents == 0)
				continue;
			if (which[i] < 0)
			{
				if (read_pg(c))
					end_phase(c, now(), &th->t);
				continue;
			}
			if (pfd[i].revents & POLLOUT)
				send_some(&c->nodes[which[i]], &c->out);
			if (pfd[i].revents & (POLLIN | POLLERR | POLLHUP))
			{
				int			all = 1;

				read_node(&c->nodes[which[i]]);
				for (int k = 0; k < nports; k++)
					if (c->nodes[k].pending > 0)
						all = 0;
				if (all)
					end_phase(c, now(), &th->t);
			}
		}
	}
	free(pfd);
	free(owner);
	free(which);
	return NULL;
}

/* DEL what the last release of c left, on every Redis (not timed). */
static void
cleanup_latches(Client *c)
{
	c->out.len = 0;
	if (!add_del(c))
		return;
	for (int k = 0; k < nports; k++)
	{
		Node	   *nd = &c->nodes[k];
		struct pollfd p = {nd->fd, 0, 0};

		nd->sent = 0;
		nd->pending = 1;
		while (nd->sent < c->out.len || nd->pending > 0)
		{
			p.events = POLLIN | (nd->sent < c->out.len ? POLLOUT : 0);
			if (poll(&p, 1, 10000) <= 0)
				die("poll: no reply within 10 s");
			if (p.revents & POLLOUT)
				send_some(nd, &c->out);
			if (p.revents & (POLLIN | POLLERR | POLLHUP))
				read_node(nd);
		}
	}
}

int
main(int argc, char **argv)
{
	int			opt;
	Thread	   *threads;
	Client	   *clients;
	Totals		tot;
	double		counted_s;

	while ((opt = getopt(argc, argv, "c:j:n:T:k:d:h:")) != -1)
	{
		switch (opt)
		{
			case 'c': nclients = atoi(optarg); break;
			case 'j': nthreads = atoi(optarg); break;
			case 'n': npairs = atol(optarg); break;
			case 'T': seconds = atof(optarg); break;
			case 'k': name = optarg; break;
			case 'd': conninfo = optarg; break;
			case 'h': host = optarg; break;
			default:
				die("usage: replay [-c CLIENTS] [-j THREADS] [-n PAIRS | -T SECONDS] "
					"[-k NAME] [-d CONNINFO] [-h HOST] ACQUIRE_FILE RELEASE_FILE PORT...");
		}
	}
	if (argc - optind < 3 || nclients < 1 || nthreads < 1 || npairs < 1)
		die("usage: replay [options] ACQUIRE_FILE RELEASE_FILE PORT...");
	if (nthreads > nclients)
		nthreads = nclients;
	acq_cmds = read_commands(argv[optind], &nacq);
	rel_cmds = read_commands(argv[optind + 1], &nrel);
	nports = argc - optind - 2;
	ports = xmalloc(nports * sizeof(int));
	for (int i = 0; i < nports; i++)
		ports[i] = atoi(argv[optind + 2 + i]);
	snprintf(run_id, sizeof(run_id), "%08x%08x", (unsigned) getpid(),
			 (unsigned) time(NULL));

	clients = xmalloc(nclients * sizeof(Client));
	for (int i = 0; i < nclients; i++)
	{
		Client	   *c = &clients[i];

		c->id = i;
		c->acq = client_commands(acq_cmds, nacq, i);
		c->rel = client_commands(rel_cmds, nrel, i);
		c->nodes = xmalloc(nports * sizeof(Node));
		for (int k = 0; k < nports; k++)
		{
			c->nodes[k].fd = connect_redis(ports[k]);
			c->nodes[k].reader = redisReaderCreate();
		}
		if (conninfo != NULL)
		{
			PGresult   *res;

			c->pg = PQconnectdb(conninfo);
			if (PQstatus(c->pg) != CONNECTION_OK)
				die("PostgreSQL: %s", PQerrorMessage(c->pg));
			res = PQprepare(c->pg, "s1", "SELECT 1", 0, NULL);
			if (PQresultStatus(res) != PGRES_COMMAND_OK)
				die("PREPARE: %s", PQresultErrorMessage(res));
			PQclear(res);
			if (PQsetnonblocking(c->pg, 1) != 0)
				die("PQsetnonblocking: %s", PQerrorMessage(c->pg));
		}
	}

	memset(&tot, 0, sizeof(tot));
	threads = xmalloc(nthreads * sizeof(Thread));
	for (int t = 0; t < nthreads; t++)
	{
		threads[t].clients = xmalloc(nclients * sizeof(Client *));
		for (int i = t; i < nclients; i += nthreads)
			threads[t].clients[threads[t].nclients++] = &clients[i];
	}
	t_start = now();
	if (seconds > 0)
	{
		t_window = t_start + (seconds / 10 < 1 ? seconds / 10 : 1);
		t_end = t_start + seconds;
	}
	for (int t = 0; t < nthreads; t++)
		if (pthread_create(&threads[t].tid, NULL, thread_main, &threads[t]) != 0)
			die("pthread_create failed");
	for (int t = 0; t < nthreads; t++)
	{
		pthread_join(threads[t].tid, NULL);
		for (int k = 0; k < 3; k++)
		{
			tot.ms[k] += threads[t].t.ms[k];
			tot.n[k] += threads[t].t.n[k];
		}
		tot.pairs += threads[t].t.pairs;
	}
	/* -n: the counted time, as the clients' mean time of their counted pairs */
	counted_s = seconds > 0 ? t_end - t_window :
		(tot.ms[0] + tot.ms[1] + tot.ms[2]) / 1000.0 / nclients;
	for (int i = 0; i < nclients; i++)
	{
		cleanup_latches(&clients[i]);
		if (clients[i].pg)
			PQfinish(clients[i].pg);
	}
	if (tot.n[1] == 0 || tot.n[2] == 0)
		die("no pair was counted");
	printf("%.4f %.4f %.4f %.1f %ld\n",
		   tot.n[0] ? tot.ms[0] / tot.n[0] : 0.0,
		   tot.ms[1] / tot.n[1], tot.ms[2] / tot.n[2],
		   counted_s > 0 ? tot.pairs / counted_s : 0.0, tot.pairs);
	return 0;
}
