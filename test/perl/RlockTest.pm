
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

Every Redis started here is stopped at END.

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

=pod

=head1 FUNCTIONS

=over

=item RlockTest::new_node($name, $redis, %opts)

Create (initdb) and start a PostgreSQL::Test::Cluster node with
shared_preload_libraries = 'rlock', rlock.redis_url pointing at $redis and
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

	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	my $conf = "shared_preload_libraries = 'rlock'\n"
	  . "rlock.redis_url = '" . $redis->url . "'\n"
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

package RlockTest;

END
{
	# keep the test script's exit status
	local $?;
	foreach my $r (@ALL_REDIS)
	{
		eval { $r->stop if $r->{running}; };
	}
}

1;
