
# Copyright (c) 2026, rlock developers

=pod

=head1 NAME

RlockTest - helpers for rlock's TAP tests: a private Redis server and
PostgreSQL nodes that preload rlock and point at it

=head1 SYNOPSIS

  use RlockTest;

  my $redis = RlockTest::Redis->new;          # started, answers PING
  my $node  = RlockTest::new_node('main', $redis, dbs => ['postgres', 'db2']);

  $redis->cli('HGETALL', 'mylock');           # output of redis-cli, chomped
  $redis->stop;                               # SHUTDOWN NOSAVE, waits for exit
  $redis->start;                              # same port again

  # a link between PostgreSQL and Redis that can fail
  my $proxy = RlockTest::Proxy->new($redis);
  my $lnode = RlockTest::new_node('link', $proxy);   # rlock.redis_url = $proxy->url
  $proxy->stall;                              # a silent partition
  $proxy->resume;
  $proxy->cut;                                # every connection closed

Every Redis and every proxy started here is stopped at END.

=cut

package RlockTest;

use strict;
use warnings;

use Carp;
use File::Path qw(make_path);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);

our @ALL_REDIS;
our @ALL_PROXIES;

=pod

=head1 FUNCTIONS

=over

=item RlockTest::new_node($name, $redis, %opts)

Create (initdb) and start a PostgreSQL::Test::Cluster node with
shared_preload_libraries = 'rlock', rlock.redis_url = $opts{url}, or else
$redis->url ($redis may be any object with a url method: an
RlockTest::Redis, an RlockTest::Proxy in front of one), and
rlock.watchdog_timeout = $opts{watchdog_timeout} (default '2s').  Creates
each database of $opts{dbs} (default ['postgres']) that does not exist yet
and runs CREATE EXTENSION rlock in it.  $opts{extra_conf} is appended to
postgresql.conf.

=cut

sub new_node
{
	my ($name, $redis, %opts) = @_;
	my $dbs = $opts{dbs} // ['postgres'];
	my $watchdog = $opts{watchdog_timeout} // '2s';
	my $url = $opts{url} // $redis->url;

	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	my $conf = "shared_preload_libraries = 'rlock'\n"
	  . "rlock.redis_url = '$url'\n"
	  . "rlock.watchdog_timeout = '$watchdog'\n"
	  . "log_min_messages = 'debug1'\n"
	  . "log_line_prefix = '%m [%p] %q%a '\n";
	$conf .= $opts{extra_conf} . "\n" if defined $opts{extra_conf};
	$node->append_conf('postgresql.conf', $conf);
	$node->start;

	foreach my $db (@$dbs)
	{
		if ($db ne 'postgres')
		{
			$node->safe_psql('postgres', "CREATE DATABASE \"$db\"");
		}
		$node->safe_psql($db, 'CREATE EXTENSION rlock');
	}
	return $node;
}

=pod

=item RlockTest::holder_of($node, $psql_session)

Shorthand: rlock_holder_id() of a background psql session.

=cut

sub holder_of
{
	my ($session) = @_;
	my $h = $session->query_safe('SELECT rlock_holder_id()');
	chomp $h;
	return $h;
}

=pod

=item RlockTest::query_err($session, $sql)

Run $sql in a background psql session (created with on_error_stop => 0) and
return (stdout, stderr) of that query alone: the session's accumulated
stderr is cleared first, and the banner lines are removed.

=cut

sub query_err
{
	my ($session, $sql) = @_;
	$session->{stderr} = '';
	my ($out) = $session->query($sql);
	my $err = $session->{stderr};
	$session->{stderr} = '';
	return ($out, $err);
}

=pod

=item RlockTest::run_sql($session, $sql)

Run $sql in a background psql session (on_error_stop => 0); returns
(stdout, stderr, SQLSTATE of the last statement) of that query alone.

=cut

sub run_sql
{
	my ($sess, $sql) = @_;
	my ($out, $err) =
	  RlockTest::query_err($sess, "$sql\n;\n\\echo sqlstate=:SQLSTATE");
	my ($state) = $out =~ /sqlstate=(\w+)/;
	$out =~ s/\n?sqlstate=\w+//;
	return ($out, $err, $state);
}

=pod

=item RlockTest::wait_until(\&cond, $timeout_s, $what)

Poll cond() every 10 ms until it returns true or $timeout_s passes; returns
whether it became true.

=cut

sub wait_until
{
	my ($cond, $timeout_s) = @_;
	$timeout_s //= $PostgreSQL::Test::Utils::timeout_default;
	my $deadline = time() + $timeout_s;
	while (time() < $deadline)
	{
		return 1 if $cond->();
		usleep(10_000);
	}
	return $cond->() ? 1 : 0;
}

=pod

=item RlockTest::wait_for_rlock_waiters($node, $db, $n, $like)

Wait until $n backends are waiting in rlock (wait_event_type 'Extension'),
optionally only those whose query is LIKE $like.  Dies on timeout.

=cut

sub wait_for_rlock_waiters
{
	my ($node, $db, $n, $like) = @_;
	my $cond = "wait_event_type = 'Extension' AND backend_type = 'client backend'";
	if (defined $like)
	{
		$like =~ s/'/''/g;
		$cond .= " AND query LIKE '$like'";
	}
	$node->poll_query_until($db,
		"SELECT count(*) >= $n FROM pg_stat_activity WHERE $cond")
	  or croak "timed out waiting for $n rlock waiter(s) on " . $node->name;
	return;
}

=pod

=item RlockTest::redis_version()

The version of redis-server as a number, major * 10000 + minor * 100 +
patch: 60016 for 6.0.16.  Tests compare it with what a Redis version
added (ACL channel rules in 6.2, enable-debug-command in 7.0).

=cut

my $redis_version;

sub redis_version
{
	if (!defined $redis_version)
	{
		my $v = `redis-server --version`;
		$v =~ /v=(\d+)\.(\d+)\.(\d+)/
		  or BAIL_OUT("cannot tell the version of redis-server from: $v");
		$redis_version = $1 * 10000 + $2 * 100 + $3;
	}
	return $redis_version;
}

=pod

=back

=cut

#
# A private redis-server.
#
package RlockTest::Redis;

use strict;
use warnings;

use Carp;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);

=pod

=head1 RlockTest::Redis

=over

=item RlockTest::Redis->new(%opts)

Pick a free loopback port, make a temporary directory and start redis-server
there, daemonized with a pidfile, no persistence.  Waits for PING.
$opts{args} adds redis-server arguments (e.g. ['--requirepass', 'x']).

=cut

sub new
{
	my ($class, %opts) = @_;
	my $self = bless {
		port => PostgreSQL::Test::Cluster::get_free_port(),
		dir => PostgreSQL::Test::Utils::tempdir('redis'),
		args => $opts{args} // [],
		password => $opts{password},
		running => 0,
	}, $class;
	push @RlockTest::ALL_REDIS, $self;
	$self->start;
	return $self;
}

sub port { return $_[0]->{port}; }
sub dir { return $_[0]->{dir}; }
sub password { return $_[0]->{password}; }

=pod

=item RlockTest::Redis::debug_command_args()

The redis-server arguments that allow DEBUG: none before Redis 7.0, where
it is always allowed.

=cut

sub debug_command_args
{
	return RlockTest::redis_version() >= 70000
	  ? ('--enable-debug-command', 'yes')
	  : ();
}

=pod

=item $redis->url

redis://127.0.0.1:<port>/0 (with the password if one was given to new).

=cut

sub url
{
	my ($self) = @_;
	my $auth = defined $self->{password} ? ":$self->{password}@" : '';
	return "redis://${auth}127.0.0.1:$self->{port}/0";
}

sub _cli_base
{
	my ($self) = @_;
	my @cmd = ('redis-cli', '-h', '127.0.0.1', '-p', $self->{port});
	push @cmd, '--no-auth-warning', '-a', $self->{password}
	  if defined $self->{password};
	return @cmd;
}

=pod

=item $redis->start

Start redis-server on this object's port (again, after stop) and wait until
it answers PING.

=cut

sub start
{
	my ($self) = @_;
	my $d = $self->{dir};
	unlink "$d/redis.pid";
	my @cmd = (
		'redis-server', '--bind', '127.0.0.1',
		'--port', $self->{port},
		'--save', '', '--appendonly', 'no',
		'--daemonize', 'yes',
		'--dir', $d,
		'--pidfile', "$d/redis.pid",
		'--logfile', "$d/redis.log",
		@{ $self->{args} });
	push @cmd, '--requirepass', $self->{password}
	  if defined $self->{password};
	system_or_bail(@cmd);
	$self->{running} = 1;

	my $ok = RlockTest::wait_until(
		sub {
			my $out = $self->cli('PING');
			return defined $out && $out =~ /PONG/;
		},
		30);
	BAIL_OUT("redis-server on port $self->{port} did not answer PING")
	  unless $ok;
	note "redis-server started on port $self->{port}";
	return;
}

=pod

=item $redis->stop

SHUTDOWN NOSAVE and wait until the process has exited and the port is
closed.

=cut

sub stop
{
	my ($self) = @_;
	$self->_shutdown('NOSAVE');
	note "redis-server on port $self->{port} stopped";
	return;
}

# SHUTDOWN with the given mode and wait until the process has exited.
sub _shutdown
{
	my ($self, $mode) = @_;
	return unless $self->{running};
	my $pid = $self->pid;
	$self->cli('SHUTDOWN', $mode);
	if ($pid)
	{
		RlockTest::wait_until(sub { !kill(0, $pid) }, 30)
		  or do { kill 'KILL', $pid; };
	}
	$self->{running} = 0;
	return;
}

=pod

=item $redis->stop_save

SHUTDOWN SAVE: the keys (with their expiry times) survive in dump.rdb and
come back at the next start, as with a persistent Redis.

=cut

sub stop_save
{
	my ($self) = @_;
	$self->_shutdown('SAVE');
	return;
}

=pod

=item $redis->pid

Pid of the running redis-server (from its pidfile), or undef.

=cut

sub pid
{
	my ($self) = @_;
	my $f = "$self->{dir}/redis.pid";
	return undef unless -f $f;
	open my $fh, '<', $f or return undef;
	my $pid = <$fh>;
	close $fh;
	return undef unless defined $pid;
	chomp $pid;
	return $pid =~ /^\d+$/ ? $pid : undef;
}

=pod

=item $redis->cli(@args)

Run one redis-cli command (arguments passed as a list, no shell) and return
its standard output, chomped.  In list context returns (stdout, stderr,
exit status).

=cut

sub cli
{
	my ($self, @args) = @_;
	my ($stdout, $stderr);
	my @cmd = ($self->_cli_base, @args);
	IPC::Run::run(\@cmd, '<', \undef, '>', \$stdout, '2>', \$stderr);
	my $rc = $? >> 8;
	chomp $stdout if defined $stdout;
	return wantarray ? ($stdout, $stderr, $rc) : $stdout;
}

=pod

=item $redis->cli_bg(@args)

Start redis-cli with @args in the background (e.g. SUBSCRIBE); returns an
IPC::Run harness and a reference to its stdout buffer.  Finish it with
$h->kill_kill.

=cut

sub cli_bg
{
	my ($self, @args) = @_;
	my $out = '';
	my $err = '';
	my @cmd = ($self->_cli_base, @args);
	my $h = IPC::Run::start(\@cmd, '<', \undef, '>', \$out, '2>', \$err);
	return ($h, \$out);
}

=pod

=item $redis->eval($script, \@keys, @args)

EVAL a Lua script; returns redis-cli's output (chomped).  Integer replies
come back as plain digits, nil as the empty string (redis-cli without a tty
prints raw replies).

=cut

sub eval
{
	my ($self, $script, $keys, @args) = @_;
	return scalar $self->cli('EVAL', $script, scalar(@$keys), @$keys, @args);
}

=pod

=back

=cut

#
# A TCP proxy between PostgreSQL and Redis whose link can fail on command.
#
package RlockTest::Proxy;

use strict;
use warnings;

use Carp;
use File::Basename qw(dirname);
use File::Spec;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# tcp_proxy.pl lives beside this file.
my $PROXY_SCRIPT =
  File::Spec->catfile(dirname(File::Spec->rel2abs(__FILE__)), 'tcp_proxy.pl');

=pod

=head1 RlockTest::Proxy

A loopback TCP proxy in front of a Redis, run as a separate process
(test/perl/tcp_proxy.pl, core Perl only), through which a node can be
pointed to cut, stall and restore its link to Redis.  Every control method
returns only once the proxy has acknowledged that the change took effect:
after $p->stall returns, not one more byte passes.

Held data is held, not dropped: the proxy stops reading it (it waits in the
kernel's socket buffers, like segments retransmitted across a partition)
and passes it on when forwarding resumes.  So a command sent during a stall
reaches Redis after $p->resume, even if its client has given up and closed
the connection meanwhile.

=over

=item RlockTest::Proxy->new($redis)

Start a proxy listening on a free loopback port
(PostgreSQL::Test::Cluster::get_free_port) that forwards every accepted
connection to 127.0.0.1:$redis->port.  $redis is an RlockTest::Redis (or
anything with port and password methods).  Waits until it listens.

=cut

sub new
{
	my ($class, $redis) = @_;
	my $self = bless {
		redis => $redis,
		port => PostgreSQL::Test::Cluster::get_free_port(),
		in => '',
		out => '',
		seq => 0,
		timer => IPC::Run::timer($PostgreSQL::Test::Utils::timeout_default),
	}, $class;
	# stderr is inherited: the proxy's diagnostics go to the test's log
	$self->{h} = IPC::Run::start(
		[ $^X, $PROXY_SCRIPT, $self->{port}, $redis->port ],
		'<', \$self->{in}, '>', \$self->{out}, $self->{timer});
	push @RlockTest::ALL_PROXIES, $self;
	$self->{timer}->start($PostgreSQL::Test::Utils::timeout_default);
	pump_until($self->{h}, $self->{timer}, \$self->{out}, qr/^ready\n/m)
	  or BAIL_OUT("tcp_proxy.pl on port $self->{port} did not start");
	$self->{out} =~ s/^ready\n//m;
	$self->{running} = 1;
	note "proxy on port $self->{port} forwards to Redis on port " . $redis->port;
	return $self;
}

=pod

=item $p->port

The port the proxy listens on.

=item $p->url

redis://127.0.0.1:<proxy port>/0, with the password of the Redis behind it
as RlockTest::Redis->url gives it: what rlock.redis_url is set to.

=cut

sub port { return $_[0]->{port}; }

sub url
{
	my ($self) = @_;
	my $pw = $self->{redis}->can('password') ? $self->{redis}->password : undef;
	my $auth = defined $pw ? ":$pw@" : '';
	return "redis://${auth}127.0.0.1:$self->{port}/0";
}

# Send one command and wait for its acknowledgement; returns the text after
# "ok" (e.g. a count).  Dies if the proxy reports an error or does not
# answer within timeout_default.
sub _command
{
	my ($self, $cmd) = @_;
	croak "proxy on port $self->{port} is not running" unless $self->{running};
	my $seq = ++$self->{seq};
	$self->{in} .= "$seq $cmd\n";
	$self->{timer}->start($PostgreSQL::Test::Utils::timeout_default);
	pump_until($self->{h}, $self->{timer}, \$self->{out},
		qr/^$seq (?:ok|error)\b[^\n]*\n/m)
	  or croak "proxy on port $self->{port} did not acknowledge \"$cmd\"";
	$self->{out} =~ s/^$seq (ok|error)\b ?([^\n]*)\n//m;
	my ($status, $info) = ($1, $2);
	croak "proxy on port $self->{port}: \"$cmd\" failed: $info"
	  if $status eq 'error';
	return $info;
}

=pod

=item $p->stall

Stop forwarding in both directions, as a network partition that silently
drops traffic would: every connection stays open, new connections are
still accepted (a client's connect succeeds) but nothing they send reaches
Redis, and nothing Redis sends reaches a client, until resume.

=item $p->stall_replies

Forward client -> server but hold server -> client: commands reach Redis
and run; their replies are held until resume.

=item $p->resume

Forward everything again, passing on what was held.

=cut

sub stall { $_[0]->_command('stall'); return; }
sub stall_replies { $_[0]->_command('stall_replies'); return; }
sub resume { $_[0]->_command('forward'); return; }

=pod

=item $p->cut(%opts)

Close every proxied connection at once, both its client and its Redis
side (with a FIN; with reset => 1 with a RST, as a peer that lost the
connection's state would send).  New connections are accepted and
forwarded normally afterwards (in the current mode: cut does not resume a
stalled proxy).  Returns the number of connections closed.

=cut

sub cut
{
	my ($self, %opts) = @_;
	return $self->_command($opts{reset} ? 'cut_reset' : 'cut');
}

=pod

=item $p->refuse

Close the listening socket: connecting to $p->port is refused
(ECONNREFUSED) until accept.  Connections already established go on.

=item $p->accept

Listen on the same port again.

=item $p->connections

The number of connections the proxy has open (accepted from clients and
not yet closed).

=cut

sub refuse { $_[0]->_command('refuse'); return; }
sub accept { $_[0]->_command('accept'); return; }
sub connections { return 0 + $_[0]->_command('connections'); }

=pod

=item $p->stop

Stop the proxy process: every connection through it closes, its port is
refused.  Also done at END.

=cut

sub stop
{
	my ($self) = @_;
	return unless $self->{running};
	$self->{running} = 0;
	# "quit", or the end of its stdin, makes the proxy exit; kill it if not
	$self->{in} .= "0 quit\n";
	$self->{timer}->start(10);
	eval {
		pump_until($self->{h}, $self->{timer}, \$self->{out}, qr/^0 ok\n/m);
		$self->{h}->finish;
		1;
	} or $self->{h}->kill_kill;
	note "proxy on port $self->{port} stopped";
	return;
}

=pod

=back

=cut

#
# Redisson's own scripts, for tests that play a Java client.
#
package RlockTest::Redisson;

=pod

=head1 RlockTest::Redisson

Redisson's fair-lock scripts (PROTOCOL.md), to drive a Redisson client
from redis-cli: $RlockTest::Redisson::fair_acquire (KEYS: lock, queue,
deadlines; ARGV: lease ms, holder, wait ms, now ms) and
$RlockTest::Redisson::fair_release (KEYS: lock, queue, deadlines, channel
prefix; ARGV: message, holder).

=cut

our $fair_acquire = <<'LUA';
while true do
  local first = redis.call('lindex', KEYS[2], 0)
  if first == false then break end
  local timeout = tonumber(redis.call('zscore', KEYS[3], first))
  if timeout <= tonumber(ARGV[4]) then
    redis.call('zrem', KEYS[3], first)
    redis.call('lpop', KEYS[2])
  else break end
end
if (redis.call('exists', KEYS[1]) == 0) and ((redis.call('exists', KEYS[2]) == 0)
    or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], ARGV[2])
  local keys = redis.call('zrange', KEYS[3], 0, -1)
  for i = 1, #keys, 1 do
    redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), keys[i])
  end
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
local timeout = redis.call('zscore', KEYS[3], ARGV[2])
if timeout ~= false then
  return timeout - tonumber(ARGV[3]) - tonumber(ARGV[4])
end
local lastThreadId = redis.call('lindex', KEYS[2], -1)
local ttl
if lastThreadId ~= false and lastThreadId ~= ARGV[2] then
  ttl = tonumber(redis.call('zscore', KEYS[3], lastThreadId)) - tonumber(ARGV[4])
else
  ttl = redis.call('pttl', KEYS[1])
end
local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4])
if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then
  redis.call('rpush', KEYS[2], ARGV[2])
end
return ttl
LUA

our $fair_release = <<'LUA';
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then return nil end
if redis.call('hincrby', KEYS[1], ARGV[2], -1) > 0 then return 0 end
redis.call('del', KEYS[1])
local next = redis.call('lindex', KEYS[2], 0)
if next ~= false then
  redis.call('publish', KEYS[4] .. ':' .. next, ARGV[1])
end
return 1
LUA

package RlockTest;

END
{
	# keep the test script's exit status
	local $?;
	foreach my $p (@ALL_PROXIES)
	{
		eval { $p->stop; };
	}
	foreach my $r (@ALL_REDIS)
	{
		eval { $r->stop if $r->{running}; };
	}
}

1;
