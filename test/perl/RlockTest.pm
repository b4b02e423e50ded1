
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

  # sessions taking one lock in a loop: no two critical sections overlap
  # (see RlockTest::Exclusion)
  my $ex = RlockTest::Exclusion->new(
      sessions => [ [ $node, 'postgres' ], [ $node, 'db2' ] ]);
  $ex->drive(sub { $ex->sections >= 20 }, 60);
  $ex->finish;
  $ex->check;

  # background statements, renewals seen in Redis, ... : FUNCTIONS below
  RlockTest::start_bg($session, "SELECT rlock_acquire('x')");
  RlockTest::wait_until(sub { RlockTest::bg_done($session) }, 30);
  my ($out, $err, $sqlstate) = RlockTest::bg_result($session);
  my ($renewed, $low_pttl) = RlockTest::renewed_on($redis, 'x', 10);

Every Redis, every proxy, every sentinel and every cluster started here is
stopped at END.

The packages live in their own files: RlockTest::Redis in
RlockTest/Redis.pm, RlockTest::Proxy in RlockTest/Proxy.pm,
RlockTest::Sentinel in RlockTest/Sentinel.pm, RlockTest::Resp (the
harness's small RESP client) in RlockTest/Resp.pm, RlockTest::Cluster in
RlockTest/Cluster.pm (and, for its resharding, failover and reading of
the nodes' state, RlockTest/ClusterReshard.pm, RlockTest/ClusterFailover.pm
and RlockTest/ClusterView.pm, which it loads), RlockTest::Redisson in
RlockTest/Redisson.pm, RlockTest::Exclusion in RlockTest/Exclusion.pm;
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
use RlockTest::Resp;
use RlockTest::Cluster;
use RlockTest::Exclusion;

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

=item RlockTest::replica_behind_link()

A master, a RlockTest::Proxy in front of it, and a replica that
replicates through that proxy (so that a test can stall or cut the
replica's link): returns ($master, $link, $replica) once the replica's
link is up and the master counts it (one TAP check).

=cut

sub replica_behind_link
{
	my $master = RlockTest::Redis->new;
	my $link = RlockTest::Proxy->new($master);
	my $replica = RlockTest::Redis->new(
		args => [ '--replicaof', '127.0.0.1', $link->port ]);
	Test::More::ok(
		wait_until(
			sub {
				($replica->cli('INFO', 'replication') // '') =~
				  /^master_link_status:up\r?$/m
				  && ($master->cli('INFO', 'replication') // '') =~
				  /^connected_slaves:1\r?$/m;
			}),
		'the replica replicates from the master through the link');
	return ($master, $link, $replica);
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

=item RlockTest::kill_backend_and_wait_restart($node, $pid)

SIGKILL backend $pid of $node (restart_after_crash on) and wait until the
postmaster has reinitialised (its log says so after the kill) and accepts
connections again: a connection made right after the kill could reach the
server before it noticed, and be cut by the reinitialisation.  True once
it accepts.

=cut

sub kill_backend_and_wait_restart
{
	my ($node, $pid) = @_;
	my $offset = -s $node->logfile;
	kill 'KILL', $pid;
	my $since = sub {
		open(my $fh, '<', $node->logfile) or return '';
		seek($fh, $offset, 0);
		local $/;
		my $text = <$fh> // '';
		close $fh;
		return $text;
	};
	return wait_until(sub { $since->() =~ /reinitializing/ }, 60)
	  && wait_until(sub {
		my ($rc) = $node->psql('postgres', 'SELECT 1');
		return $rc == 0; }, 60);
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

=item RlockTest::sql($node, $sql, $db)

stdout of $sql in a new session of $node (database $db, default
postgres): a backend that has not run anything yet (on a cluster it reads
the slot map afresh).  An error is noted, not fatal: the assertion that
uses the value fails.

=cut

sub sql
{
	my ($n, $sql, $db) = @_;
	my ($rc, $o, $e) = $n->psql($db // 'postgres', $sql);
	note $n->name . ": $sql: $e" if $e ne '';
	return $o;
}

=pod

=item RlockTest::stat_of($node, $column)

A column of rlock_stats, read in a new session of $node (database
postgres); -1 when it could not be read.

=cut

sub stat_of
{
	my ($n, $col) = @_;
	my $v = RlockTest::sql($n, "SELECT $col FROM rlock_stats");
	return $v eq '' ? -1 : $v;
}

=pod

=item RlockTest::fresh_sql($node, $db, $sql)

Run $sql in a new session of $node (a backend that has never connected to
Redis), not stopping at an error; returns (stdout, stderr, SQLSTATE of the
last statement).

=cut

sub fresh_sql
{
	my ($n, $db, $sql) = @_;
	my (undef, $o, $e) = $n->psql($db, "$sql;\n\\echo sqlstate=:SQLSTATE",
		on_error_stop => 0);
	my ($st) = $o =~ /sqlstate=(\w+)/;
	$o =~ s/\n?sqlstate=\w+//;
	return ($o, $e, $st);
}

=pod

=item RlockTest::start_bg($session, $sql)

Run $sql in a background psql session (on_error_stop => 0) without waiting
for it to end: it has been sent once this returns.  Then poll
RlockTest::bg_done($session), and once it is true
RlockTest::bg_result($session) gives (stdout, stderr, SQLSTATE), stdout
with the white space around it removed.  The session's stdout and stderr
are cleared before and after.

=cut

sub start_bg
{
	my ($sess, $sql) = @_;
	$sess->{stdout} = $sess->{stderr} = '';
	my $out = $sess->query_until(qr/started\n/,
		"\\echo started\n$sql;\n\\echo sqlstate=:SQLSTATE\n");
	# query_until empties stdout once "started" is in it; a statement that
	# ended at once may have written its result in the same read: keep it
	# for bg_done, or the end would never be seen.
	$sess->{stdout} = $1 . $sess->{stdout} if $out =~ /started\n(.*)\z/s;
	return;
}

=pod

=item RlockTest::bg_done($session)

Whether what start_bg started has ended (reads what psql wrote so far,
without blocking).

=cut

sub bg_done
{
	my ($sess) = @_;
	$sess->{run}->pump_nb;
	return $sess->{stdout} =~ /sqlstate=\w+/;
}

=pod

=item RlockTest::bg_result($session)

(stdout, stderr, SQLSTATE) of what start_bg started, once bg_done.

=cut

sub bg_result
{
	my ($sess) = @_;
	my ($st) = $sess->{stdout} =~ /sqlstate=(\w+)/;
	my $o = $sess->{stdout};
	$o =~ s/\n?sqlstate=\w+\n?//;
	$o =~ s/^\s+|\s+$//g;
	my $e = $sess->{stderr};
	$sess->{stdout} = $sess->{stderr} = '';
	return ($o, $e, $st);
}

=pod

=item RlockTest::log_has($node, $offset, $re)

Whether the server log of $node, from byte $offset on, matches $re.

=cut

sub log_has
{
	my ($n, $offset, $re) = @_;
	return slurp_file($n->logfile, $offset) =~ $re;
}

=pod

=item RlockTest::postmaster_pid($node)

The pid in $node's postmaster.pid (-1 when it cannot be read): a server
that restarted (a crashed backend) has another.

=cut

sub postmaster_pid
{
	my ($n) = @_;
	open(my $fh, '<', $n->data_dir . '/postmaster.pid') or return -1;
	my $pid = <$fh>;
	close $fh;
	chomp $pid;
	return $pid;
}

=pod

=item RlockTest::check_never_restarted($node, $log_start, $pm_pid)

Three TAP checks for the files whose peers try to crash a backend: the
postmaster is still $pm_pid, the log from $log_start on shows no process
killed, no reinitialisation and no out of memory, and the server answers.

=cut

sub check_never_restarted
{
	my ($n, $log_start, $pm_pid) = @_;
	Test::More::is(postmaster_pid($n), $pm_pid, 'the postmaster is the one started');
	Test::More::ok(
		!log_has(
			$n, $log_start,
			qr/terminated by signal|was terminated|reinitializing|out of memory/i),
		'no process was killed, no reinitialisation, no out of memory in the log');
	Test::More::is($n->safe_psql('postgres', 'SELECT 1'), '1', 'the server answers');
}

=pod

=item RlockTest::all_renewed_on(\@pairs, $timeout_s)

Wait until the PTTL of every [$r, $key] of @pairs has gone up (a renewal:
without one it only goes down; "up" is more than 500 ms above the lowest
value seen), watching them all at once (one renewal cycle renews them
all), every 10 ms for up to $timeout_s.  $r is a data node (an
RlockTest::Redis: PTTL asked of it alone) or an RlockTest::Cluster (PTTL
asked the way a cluster client does, following MOVED and ASK: see
RlockTest::Cluster's call).  The keys must differ.  Returns (whether they
all went up, a hash ref: key => the lowest PTTL seen of it before).

=item RlockTest::renewed_on($r, $key, $timeout_s)

The same for one key: returns (whether its PTTL went up, the lowest PTTL
seen before, -1 if none was).

=cut

sub _pttl
{
	my ($r, $key) = @_;
	my $v = $r->isa('RlockTest::Cluster')
	  ? scalar($r->call($key, 'PTTL', $key))
	  : scalar($r->cli('PTTL', $key));
	return $v // '';
}

sub all_renewed_on
{
	my ($pairs, $timeout_s) = @_;
	my %probes = map {
		my ($r, $key) = @$_;
		($key => sub { _pttl($r, $key) })
	} @$pairs;
	return pttls_went_up(\%probes, $timeout_s);
}

=pod

=item RlockTest::pttls_went_up(\%probes, $timeout_s)

The loop of all_renewed_on: %probes maps a name to a function returning a
PTTL; waits until each has gone more than 500 ms above the lowest value it
showed, every 10 ms for up to $timeout_s.  Returns (whether all did, a
hash ref: name => the lowest PTTL seen).

=cut

sub pttls_went_up
{
	my ($probes, $timeout_s) = @_;
	my (%low, %up);
	my $ok = RlockTest::wait_until(
		sub {
			foreach my $id (keys %$probes)
			{
				next if $up{$id};
				my $pttl = $probes->{$id}->() // '';
				next unless $pttl =~ /^\d+$/;
				if (defined $low{$id} && $pttl > $low{$id} + 500)
				{
					$up{$id} = 1;
					next;
				}
				$low{$id} = $pttl if !defined $low{$id} || $pttl < $low{$id};
			}
			return keys(%up) == keys(%$probes);
		},
		$timeout_s);
	return ($ok, \%low);
}

sub renewed_on
{
	my ($r, $key, $timeout_s) = @_;
	my ($ok, $low) = all_renewed_on([ [ $r, $key ] ], $timeout_s);
	return ($ok, $low->{$key} // -1);
}

=pod

=item RlockTest::command_calls($redis, $command)

How many times data node $redis ran $command (lower case, e.g. 'wait',
'evalsha'), from INFO commandstats; 0 when it has not (since the last
CONFIG RESETSTAT).

=cut

sub command_calls
{
	my ($r, $command) = @_;
	my ($n) = ($r->cli('INFO', 'commandstats') // '') =~ /^cmdstat_\Q$command\E:calls=(\d+)/m;
	return $n // 0;
}

=pod

=item RlockTest::create_probe_acquire($node, $db)

Create the SQL function probe_acquire(lockname text, timeout interval) in
database $db of $node: it tries to take lockname (rlock_try_acquire with a
10 s lease) every 10 ms, catching errors, until it works (then releases
it) or timeout passes; it returns one row (first_ok float8, errors int,
last_error text, first_error float8): the epoch of the first success
(NULL if none), how many attempts raised an error, the last error
("SQLSTATE message") and the epoch at which the first error was caught.
Start it with start_bg to see when a lock can be taken again (after a
failover, say).

=cut

sub create_probe_acquire
{
	my ($node, $db) = @_;
	$node->safe_psql($db, q{
CREATE FUNCTION probe_acquire(lockname text, timeout interval,
	OUT first_ok float8, OUT errors int, OUT last_error text, OUT first_error float8)
LANGUAGE plpgsql AS $$
DECLARE
	deadline timestamptz := clock_timestamp() + timeout;
BEGIN
	errors := 0;
	LOOP
		BEGIN
			IF rlock_try_acquire(lockname, '10s') THEN
				first_ok := extract(epoch FROM clock_timestamp());
				PERFORM rlock_release(lockname);
				RETURN;
			END IF;
		EXCEPTION WHEN OTHERS THEN
			IF errors = 0 THEN
				first_error := extract(epoch FROM clock_timestamp());
			END IF;
			errors := errors + 1;
			last_error := SQLSTATE || ' ' || SQLERRM;
		END;
		EXIT WHEN clock_timestamp() > deadline;
		PERFORM pg_sleep(0.01);
	END LOOP;
END $$;
});
	return;
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
