
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

  # TLS (certificates made with openssl), a Unix socket
  my $tls = RlockTest::Redis->new(tls => 1);  # url: rediss://127.0.0.1:<port>/0
  $tls->ca_file; $tls->client_cert_file;      # ... and the other files
  $tls->restart(server_cert => 'expired');
  my $sock = RlockTest::Redis->new(unix => 1, password => 'pw');
  $sock->url;                                 # unix://:pw@/.../redis.sock

  # RLOCK_SERVER=valkey in the environment: valkey-server and valkey-cli

  # a link between PostgreSQL and Redis that can fail
  my $proxy = RlockTest::Proxy->new($redis);
  my $lnode = RlockTest::new_node('link', $proxy);   # rlock.redis_url = $proxy->url
  $proxy->stall;                              # a silent partition
  $proxy->resume;
  $proxy->cut;                                # every connection closed

  # a master, 2 replicas and 3 sentinels (see RlockTest::Sentinel)
  my $s = RlockTest::Sentinel->new(replicas => 2, sentinels => 3);
  $s->url;              # redis-sentinel://127.0.0.1:p1,...:p3/0#rlockmaster
  my $old = $s->master->port;
  $s->kill_master;
  my $secs = $s->wait_failover($old, 30);

  # a Redis Cluster: 3 masters, 1 replica each (see RlockTest::Cluster)
  my $c = RlockTest::Cluster->new(masters => 3, replicas => 1);
  $c->url;              # redis-cluster://127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3
  my $m = $c->master_of('mylock');
  $c->kill_master($m);
  my $failover_s = $c->wait_failover($m, 30);

Every Redis, every proxy, every sentinel and every cluster started here is
stopped at END.

The packages live in their own files: RlockTest::Redis in
RlockTest/Redis.pm, RlockTest::Proxy in RlockTest/Proxy.pm,
RlockTest::Sentinel in RlockTest/Sentinel.pm, RlockTest::Cluster in
RlockTest/Cluster.pm, RlockTest::Redisson in RlockTest/Redisson.pm;
C<use RlockTest> loads them all.

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

# Everything the packages start, stopped at END (at the bottom of this
# file).
our @ALL_REDIS;
our @ALL_PROXIES;
our @ALL_SENTINELS;
our @ALL_CLUSTERS;

# The other packages, one file each under RlockTest/ (test files need only
# "use RlockTest;").  They call RlockTest's functions at run time only.
use RlockTest::Redis;
use RlockTest::Proxy;
use RlockTest::Sentinel;
use RlockTest::Redisson;
use RlockTest::Cluster;

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

=item RlockTest::set_gucs($node, name => value, ...)

ALTER SYSTEM SET each setting, reload, and wait until the postmaster has
read the files again (pg_conf_load_time of a new session is the
postmaster's): new sessions have the new values then.  (Not by comparing
the values: rlock.redis_url shows with its password masked.)

=cut

sub set_gucs
{
	my ($node, %g) = @_;
	my $before = $node->safe_psql('postgres', 'SELECT pg_conf_load_time()');
	foreach my $k (sort keys %g)
	{
		$node->safe_psql('postgres', "ALTER SYSTEM SET $k = '$g{$k}'");
	}
	$node->reload;
	$node->poll_query_until('postgres',
		"SELECT pg_conf_load_time() > '$before'::timestamptz")
	  or die 'the server did not reload its configuration';
	return;
}

=pod

=item RlockTest::stop_file($why)

End this test file here (done_testing), saying why: for files whose later
steps all need an earlier one to have worked, instead of meeting a timeout
at each of them.

=cut

sub stop_file
{
	my ($why) = @_;
	diag("$why: the rest of this file is not run");
	done_testing();
	exit;
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
		my $server = $RlockTest::Redis::SERVER // 'redis-server';
		my $v = `$server --version`;
		$v =~ /v=(\d+)\.(\d+)\.(\d+)/
		  or BAIL_OUT("cannot tell the version of redis-server from: $v");
		$redis_version = $1 * 10000 + $2 * 100 + $3;
	}
	return $redis_version;
}

=pod

=back

=cut

# Whether process $pid is gone (or a zombie nobody reaped yet: a daemonized
# server's parent is init, which may be slow to reap, or not do it at all in
# a container).
sub pid_gone
{
	my ($pid) = @_;
	return 1 unless kill(0, $pid);
	if (open my $fh, '<', "/proc/$pid/stat")
	{
		my $stat = <$fh> // '';
		close $fh;
		return 1 if $stat =~ /^\d+ \(.*\) Z /s;
	}
	return 0;
}

# The pid in a server's pidfile, or undef (no file, or not a pid).
sub read_pidfile
{
	my ($f) = @_;
	open my $fh, '<', $f or return undef;
	my $pid = <$fh>;
	close $fh;
	return undef unless defined $pid;
	chomp $pid;
	return $pid =~ /^\d+$/ ? $pid : undef;
}

END
{
	# keep the test script's exit status
	local $?;
	foreach my $p (@ALL_PROXIES)
	{
		eval { $p->stop; };
	}
	# sentinels before the data nodes: no failover while they go down
	foreach my $s (@ALL_SENTINELS)
	{
		eval { $s->stop; };
	}
	# clusters stop their nodes themselves (replicas first) and keep the
	# nodes' logs
	foreach my $c (@ALL_CLUSTERS)
	{
		eval { $c->stop; };
	}
	foreach my $r (@ALL_REDIS)
	{
		eval { $r->stop if $r->{running}; };
	}
}

1;
