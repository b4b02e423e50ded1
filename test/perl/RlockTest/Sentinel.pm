
# Copyright (c) 2026, rlock developers

#
# A master, its replicas and the sentinels that watch them.
#
package RlockTest::Sentinel;

use strict;
use warnings;

use RlockTest ();    # wait_until, read_pidfile, @ALL_*: at run time
use RlockTest::Proxy;
use RlockTest::Redis;

use Carp;
use File::Basename ();
use File::Copy ();
use File::Spec;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

=pod

=head1 RlockTest::Sentinel

A Sentinel deployment on loopback: one master and its replicas (each an
RlockTest::Redis) and the sentinels that watch them, for tests that follow
a failover.  Every node and sentinel is stopped at END.

  my $s = RlockTest::Sentinel->new(replicas => 2, sentinels => 3);
  my $node = RlockTest::new_node('main', undef, url => $s->url);
  my $old = $s->master;                        # an RlockTest::Redis
  my $killed_at = $s->kill_master;             # SIGKILL
  my $secs = $s->wait_failover($old->port, 30) # undef on timeout
    // die 'no failover';
  $s->master;                                  # the promoted replica
  $s->stop_sentinel(0); $s->start_sentinel(0);

=over

=item RlockTest::Sentinel->new(%opts)

Start the master (an RlockTest::Redis), then the replicas (RlockTest::Redis
with C<replicaof 127.0.0.1 E<lt>master portE<gt>>, each waited for until
INFO replication shows master_link_status:up), then the sentinels
(C<server_program E<lt>confE<gt> --sentinel>, daemonized, each with its own
writable sentinel.conf in its own directory, since a sentinel rewrites its
configuration), monitoring the master with a quorum of a majority of the
sentinels.  Returns once every sentinel reports the master, sees every
replica (flags exactly "slave": connected, not down) and every other
sentinel: polled, no fixed sleep.  Dies (BAIL_OUT) when that does not
happen within timeout_default.

Every data node gets C<repl-diskless-sync-delay 0> (a full resync does not
wait 5 s for more replicas) and, with a password, C<masterauth> (any of
them may be a replica after a failover).

Options (defaults in brackets):

=over

=item replicas => N [2]

=item sentinels => N [3]

=item master_name => 'name' ['rlockmaster']

=item down_after_ms => ms [2000]

C<sentinel down-after-milliseconds>.  A sentinel pings every
min(down-after, 1 s): with 1000 ms a single late reply makes a node look
down, and on a loaded machine a master just promoted was often failed over
again at once, about 1 s after the switch, with nobody having touched it.
2000 ms allows for one late reply; a failover takes about 3 s then.

=item failover_timeout_ms => ms [5000]

C<sentinel failover-timeout>; C<sentinel parallel-syncs> is 1.

=item password => 'x' [undef]

C<requirepass> and C<masterauth> on the data nodes, C<sentinel auth-pass>
on the sentinels; url carries it.

=item sentinel_password => 'x' [undef]

C<requirepass> on the sentinels themselves (Redis 5.0.1 and later use it
to talk to each other as well); sentinel_cli uses it.  Not in url (rlock
has a setting of its own for it).

=item master_args => [...] [none]

More arguments for the first master's server only (e.g. C<--rename-command
REPLICAOF x>: the sentinels then cannot demote it when it comes back after
a failover, so that it stays a second master).

=item replica_proxies => 1 [0]

Each replica replicates from the master through its own RlockTest::Proxy
(C<replicaof 127.0.0.1 E<lt>proxy portE<gt>>), so that a test can stall
replication deterministically: C<$_-E<gt>stall for $s-E<gt>replica_links>
stops every byte between the master and its replicas (the replicas do not
notice: their link stays "up" until repl-timeout, 60 s), C<resume> passes
on what was held.  The replicas announce their own listening port
(REPLCONF listening-port) and the proxy connects from 127.0.0.1, so the
master's INFO, and hence the sentinels, show each replica at its real
address; new checks that.

A sentinel re-points a replica that replicates from another address than
the master's (C<+fix-slave-config>) once it has seen it so for
failover-timeout: the sentinels therefore start with a failover-timeout of
10 minutes, and kill_master sets failover_timeout_ms again as soon as
every running sentinel sees the master down (a master that is down is
never a target of that fix), so the failover and the ones after it run
as without proxies.  After the first failover the sentinels reconfigure
the remaining replicas with REPLICAOF directly to the new master: the
proxies carry nothing from then on.

=back

=cut

sub new
{
	my ($class, %opts) = @_;
	my $self = bless {
		n_replicas => $opts{replicas} // 2,
		n_sentinels => $opts{sentinels} // 3,
		master_name => $opts{master_name} // 'rlockmaster',
		down_after_ms => $opts{down_after_ms} // 2000,
		failover_timeout_ms => $opts{failover_timeout_ms} // 5000,
		password => $opts{password},
		sentinel_password => $opts{sentinel_password},
		replica_proxies => $opts{replica_proxies} ? 1 : 0,
		nodes => [],
		links => [],
		sentinels => [],
	}, $class;
	# what the sentinels start with (see replica_proxies)
	$self->{failover_timeout_now} =
	  $self->{replica_proxies} ? 600_000 : $self->{failover_timeout_ms};
	croak 'RlockTest::Sentinel: at least one sentinel'
	  if $self->{n_sentinels} < 1;
	push @RlockTest::ALL_SENTINELS, $self;

	my @common = ('--repl-diskless-sync-delay', '0');
	push @common, '--masterauth', $self->{password}
	  if defined $self->{password};
	my $master = RlockTest::Redis->new(
		args => [ @common, @{ $opts{master_args} // [] } ],
		password => $self->{password});
	push @{ $self->{nodes} }, $master;
	foreach my $i (1 .. $self->{n_replicas})
	{
		my $upstream = $master->port;
		if ($self->{replica_proxies})
		{
			my $link = RlockTest::Proxy->new($master);
			push @{ $self->{links} }, $link;
			$upstream = $link->port;
		}
		my $r = RlockTest::Redis->new(
			args => [ @common, '--replicaof', '127.0.0.1', $upstream ],
			password => $self->{password});
		push @{ $self->{nodes} }, $r;
		RlockTest::wait_until(
			sub {
				($r->cli('INFO', 'replication') // '') =~
				  /^master_link_status:up\r?$/m;
			})
		  or BAIL_OUT('replica at ' . $r->where
			  . ' did not sync with the master at ' . $master->where
			  . ($self->{replica_proxies} ? " through port $upstream" : ''));
	}
	if ($self->{replica_proxies})
	{
		# the master lists each replica at its own port, whatever the
		# connection came through
		my $info = $master->cli('INFO', 'replication') // '';
		foreach my $r (@{ $self->{nodes} }[ 1 .. $#{ $self->{nodes} } ])
		{
			my $p = $r->port;
			$info =~ /^slave\d+:ip=127\.0\.0\.1,port=$p,/m
			  or BAIL_OUT("the master does not list the replica at port $p "
				  . "(through a proxy) at its own address:\n$info");
		}
	}

	my $quorum = int($self->{n_sentinels} / 2) + 1;
	foreach my $i (0 .. $self->{n_sentinels} - 1)
	{
		my $dir = File::Spec->rel2abs(
			PostgreSQL::Test::Utils::tempdir("sentinel$i"));
		my $st = {
			port => PostgreSQL::Test::Cluster::get_free_port(),
			dir => $dir,
			conf => "$dir/sentinel.conf",
			running => 0,
		};
		my $name = $self->{master_name};
		my $conf = "# written by RlockTest::Sentinel; the sentinel rewrites it\n"
		  . "bind 127.0.0.1\n"
		  . "port $st->{port}\n"
		  . "daemonize yes\n"
		  . "pidfile $dir/sentinel.pid\n"
		  . "logfile $dir/sentinel.log\n"
		  . "dir $dir\n"
		  . "sentinel monitor $name 127.0.0.1 " . $master->port . " $quorum\n"
		  . "sentinel down-after-milliseconds $name $self->{down_after_ms}\n"
		  . "sentinel failover-timeout $name $self->{failover_timeout_now}\n"
		  . "sentinel parallel-syncs $name 1\n";
		$conf .= "sentinel auth-pass $name $self->{password}\n"
		  if defined $self->{password};
		$conf .= "requirepass $self->{sentinel_password}\n"
		  if defined $self->{sentinel_password};
		PostgreSQL::Test::Utils::append_to_file($st->{conf}, $conf);
		push @{ $self->{sentinels} }, $st;
		$self->start_sentinel($i);
	}

	my @ports = map { $_->port } @{ $self->{nodes} };
	my $mport = $master->port;
	my $ok = RlockTest::wait_until(sub { $self->_settled($mport) });
	BAIL_OUT("sentinels did not all see master $mport, replicas "
		  . join(',', @ports[ 1 .. $#ports ]) . ' and each other: '
		  . $self->_describe)
	  unless $ok;
	note "sentinel deployment ready: master $mport, replicas "
	  . join(',', @ports[ 1 .. $#ports ])
	  . ($self->{replica_proxies}
		? ' (through proxies ' . join(',', map { $_->port } @{ $self->{links} }) . ')'
		: '')
	  . ', sentinels ' . join(',', $self->sentinel_ports);
	return $self;
}

# The parsed reply of SENTINEL REPLICAS/SLAVES/SENTINELS (flattened by the
# cli into lines: field, value, field, value... each record starting with
# "name"): a list of hashes.
sub _records
{
	my ($out) = @_;
	return () unless defined $out && $out ne '';
	my @l = split /\n/, $out, -1;
	my @recs;
	for (my $i = 0; $i + 1 < @l; $i += 2)
	{
		push @recs, {} if $l[$i] eq 'name' || !@recs;
		$recs[-1]{ $l[$i] } = $l[ $i + 1 ];
	}
	return @recs;
}

# The replicas sentinel $i knows of (SENTINEL REPLICAS, or SLAVES on a
# server that lacks it), as hashes of their fields.
sub _sentinel_replicas
{
	my ($self, $i) = @_;
	my ($out, $err, $rc) =
	  $self->sentinel_cli($i, 'SENTINEL', 'REPLICAS', $self->{master_name});
	($out, $err, $rc) =
	  $self->sentinel_cli($i, 'SENTINEL', 'SLAVES', $self->{master_name})
	  if $rc != 0 || ($out // '') =~ /^ERR/;
	return () if $rc != 0 || ($out // '') =~ /^ERR/;
	return _records($out);
}

# Whether every running sentinel reports master $mport, sees every other
# data node as a healthy replica (flags "slave") and knows every other
# sentinel configured (a stopped one included: it is remembered).
sub _settled
{
	my ($self, $mport) = @_;
	my %want_replicas =
	  map { $_->port => 1 } grep { $_->port != $mport } @{ $self->{nodes} };
	my $n_s = @{ $self->{sentinels} };
	foreach my $i (0 .. $n_s - 1)
	{
		next unless $self->{sentinels}[$i]{running};
		my ($host, $port) = $self->_master_addr($i);
		return 0 unless defined $port && $port == $mport;
		my %seen = map { ($_->{flags} // '') eq 'slave' ? ($_->{port} => 1) : () }
		  $self->_sentinel_replicas($i);
		return 0 if grep { !$seen{$_} } keys %want_replicas;
		my @others = _records(scalar $self->sentinel_cli($i, 'SENTINEL',
			'SENTINELS', $self->{master_name}));
		return 0 if @others < $n_s - 1;
	}
	return 1;
}

# For messages: what each sentinel reports.
sub _describe
{
	my ($self) = @_;
	my @d;
	foreach my $i (0 .. $#{ $self->{sentinels} })
	{
		my $st = $self->{sentinels}[$i];
		if (!$st->{running})
		{
			push @d, "sentinel $st->{port}: stopped";
			next;
		}
		my (undef, $p) = $self->_master_addr($i);
		my @r = map { "$_->{port}($_->{flags})" } $self->_sentinel_replicas($i);
		my @o = _records(scalar $self->sentinel_cli($i, 'SENTINEL',
			'SENTINELS', $self->{master_name}));
		push @d, "sentinel $st->{port}: master " . ($p // '?')
		  . ', replicas ' . join(' ', @r)
		  . ', ' . scalar(@o) . ' other sentinel(s)';
	}
	return join('; ', @d);
}

# (host, port) of the master according to sentinel $i, or () if it does
# not answer.
sub _master_addr
{
	my ($self, $i) = @_;
	my ($out, undef, $rc) = $self->sentinel_cli($i, 'SENTINEL',
		'GET-MASTER-ADDR-BY-NAME', $self->{master_name});
	return () if $rc != 0 || !defined $out;
	my ($h, $p) = split /\n/, $out;
	return () unless defined $p && $p =~ /^\d+$/;
	return ($h, $p);
}

# The data node listening on $port, or undef.
sub _node_at
{
	my ($self, $port) = @_;
	my ($n) = grep { $_->port == $port } @{ $self->{nodes} };
	return $n;
}

# Whether data node $n is up and says ROLE master.
sub _is_master
{
	my ($n) = @_;
	return 0 unless $n && $n->{running};
	my $role = $n->cli('ROLE') // '';
	return $role =~ /^master\n/ || $role eq 'master';
}

=pod

=item $s->master

The current master's RlockTest::Redis: the data node at the port a
sentinel gives for SENTINEL GET-MASTER-ADDR-BY-NAME.  The running
sentinels are asked in turn and the first answer whose node is up and
says ROLE master wins (during a failover the sentinels may disagree for a
moment); failing that, the first answer at all.  undef if no sentinel
answers.

=cut

sub master
{
	my ($self) = @_;
	my $first;
	foreach my $i (0 .. $#{ $self->{sentinels} })
	{
		next unless $self->{sentinels}[$i]{running};
		my (undef, $p) = $self->_master_addr($i);
		next unless defined $p;
		my $n = $self->_node_at($p);
		next unless $n;
		return $n if _is_master($n);
		$first //= $n;
	}
	return $first;
}

=pod

=item $s->replicas

The data nodes other than the current master (running or not), as
RlockTest::Redis objects.

=item $s->nodes

All data nodes, the first master first.

=cut

sub replicas
{
	my ($self) = @_;
	my $m = $self->master;
	my $mport = $m ? $m->port : -1;
	return grep { $_->port != $mport } @{ $self->{nodes} };
}

sub nodes { return @{ $_[0]->{nodes} }; }

=pod

=item $s->sentinel_ports

The sentinels' ports, in order (index $i of sentinel_cli, stop_sentinel,
start_sentinel).

=item $s->master_name, $s->password, $s->sentinel_password

What new was given (or its defaults).

=cut

sub sentinel_ports { return map { $_->{port} } @{ $_[0]->{sentinels} }; }

=pod

=item $s->replica_links

With replica_proxies: the RlockTest::Proxy of each first replica, in the
order of nodes (without the first master), through which it replicates
from the first master.  Empty otherwise.

=cut

sub replica_links { return @{ $_[0]->{links} }; }

=pod

=item $s->sentinel_set($param, $value)

C<SENTINEL SET E<lt>master nameE<gt> $param $value> on every running
sentinel (dies if one refuses), and again on a sentinel that start_sentinel
starts later.  E.g. sentinel_set('failover-timeout', 3000).

=cut

sub sentinel_set
{
	my ($self, $param, $value) = @_;
	$self->{settings}{$param} = $value;
	$self->{failover_timeout_now} = $value if $param eq 'failover-timeout';
	foreach my $i (0 .. $#{ $self->{sentinels} })
	{
		next unless $self->{sentinels}[$i]{running};
		$self->_sentinel_set_one($i, $param, $value);
	}
	return;
}

sub _sentinel_set_one
{
	my ($self, $i, $param, $value) = @_;
	my ($out, $err) = $self->sentinel_cli($i, 'SENTINEL', 'SET',
		$self->{master_name}, $param, $value);
	croak "sentinel $self->{sentinels}[$i]{port}: SENTINEL SET $param $value: "
	  . ($out // '') . ($err // '')
	  unless ($out // '') eq 'OK';
	return;
}
sub master_name { return $_[0]->{master_name}; }
sub password { return $_[0]->{password}; }
sub sentinel_password { return $_[0]->{sentinel_password}; }

=pod

=item $s->url(%opts)

redis-sentinel://127.0.0.1:<p1>,127.0.0.1:<p2>,.../0#<master_name> with
every sentinel, with :<password>@ when the data nodes have one.  Options:
db => N, master_name => 'x' (e.g. a wrong one), password => 'x' or
password => undef (none), sentinels => [indexes] (only those sentinels).

=cut

sub url
{
	my ($self, %o) = @_;
	my $pw = exists $o{password} ? $o{password} : $self->{password};
	my $auth = defined $pw ? ":$pw@" : '';
	my @idx = @{ $o{sentinels} // [ 0 .. $#{ $self->{sentinels} } ] };
	my $hosts = join(',',
		map { "127.0.0.1:" . $self->{sentinels}[$_]{port} } @idx);
	my $db = $o{db} // 0;
	my $name = $o{master_name} // $self->{master_name};
	return "redis-sentinel://$auth$hosts/$db#$name";
}

=pod

=item $s->sentinel_cli($i, @args)

Run one cli command against sentinel $i (0-based), arguments as a list;
returns its standard output, chomped, or in list context (stdout, stderr,
exit status), like RlockTest::Redis::cli.

=cut

sub sentinel_cli
{
	my ($self, $i, @args) = @_;
	my $st = $self->{sentinels}[$i]
	  or croak "RlockTest::Sentinel: no sentinel $i";
	my @cmd = ($RlockTest::Redis::CLI, '-h', '127.0.0.1', '-p', $st->{port});
	push @cmd, '--no-auth-warning', '-a', $self->{sentinel_password}
	  if defined $self->{sentinel_password};
	my ($stdout, $stderr);
	IPC::Run::run([ @cmd, @args ], '<', \undef, '>', \$stdout,
		'2>', \$stderr);
	my $rc = $? >> 8;
	chomp $stdout if defined $stdout;
	return wantarray ? ($stdout, $stderr, $rc) : $stdout;
}

sub _gone { return RlockTest::pid_gone(@_); }

=pod

=item $s->kill_master

SIGKILL the current master's process (no SHUTDOWN: it saves nothing, says
nothing to its replicas) and wait until it is gone.  Returns the time of
the kill (Time::HiRes::time).  The node's object stays in nodes (not
running); $node->start brings it back on its port, and the sentinels then
turn it into a replica of the new master.

=cut

sub kill_master
{
	my ($self) = @_;
	my $m = $self->master or croak 'RlockTest::Sentinel: no master to kill';
	my $pid = $m->pid or croak 'RlockTest::Sentinel: master has no pid';
	my $t = time();
	kill 'KILL', $pid;
	$m->{running} = 0;
	RlockTest::wait_until(sub { _gone($pid) }, 30)
	  or croak "master at " . $m->where . " (pid $pid) survived SIGKILL";
	note 'master at ' . $m->where . " killed (pid $pid)";
	if ($self->{failover_timeout_now} != $self->{failover_timeout_ms})
	{
		# (replica_proxies) no sentinel re-points a replica once it sees
		# the master down: failover-timeout can be what was asked for
		RlockTest::wait_until(sub { $self->_all_see_down }, 30)
		  or diag('the sentinels do not all see the master down: '
			  . $self->_describe);
		$self->sentinel_set('failover-timeout', $self->{failover_timeout_ms});
	}
	return $t;
}

# Whether every running sentinel flags the master s_down (or o_down).
sub _all_see_down
{
	my ($self) = @_;
	foreach my $i (0 .. $#{ $self->{sentinels} })
	{
		next unless $self->{sentinels}[$i]{running};
		my ($rec) = _records(scalar $self->sentinel_cli($i, 'SENTINEL',
			'MASTER', $self->{master_name}));
		return 0 unless $rec && ($rec->{flags} // '') =~ /\b[so]_down\b/;
	}
	return 1;
}

=pod

=item $s->revive($node)

Start data node $node (one that kill_master stopped) again on its port as
a replica of the current master (C<replicaof>, directly, not through a
proxy), wait until its link is up and until every running sentinel lists
it as a healthy replica (flags "slave").  It comes back empty (no
persistence) and takes a full copy from the master.

=cut

sub revive
{
	my ($self, $n) = @_;
	croak 'RlockTest::Sentinel: revive a stopped data node'
	  if $n->{running};
	my $m = $self->master or croak 'RlockTest::Sentinel: no master';
	my @args = @{ $n->{args} };
	my @keep;
	while (@args)
	{
		my $a = shift @args;
		if ($a eq '--replicaof')
		{
			splice @args, 0, 2;
			next;
		}
		push @keep, $a;
	}
	$n->{args} = [ @keep, '--replicaof', '127.0.0.1', $m->port ];
	$n->start;
	RlockTest::wait_until(
		sub {
			($n->cli('INFO', 'replication') // '') =~
			  /^master_link_status:up\r?$/m;
		})
	  or croak 'revived node ' . $n->where
	  . ' did not sync with the master at ' . $m->where;
	my $port = $n->port;
	RlockTest::wait_until(
		sub {
			foreach my $i (0 .. $#{ $self->{sentinels} })
			{
				next unless $self->{sentinels}[$i]{running};
				return 0
				  unless grep {
					$_->{port} == $port && ($_->{flags} // '') eq 'slave'
				  } $self->_sentinel_replicas($i);
			}
			return 1;
		})
	  or croak "the sentinels do not see the revived node $port as a replica: "
	  . $self->_describe;
	note 'node ' . $n->where . ' revived as a replica of ' . $m->where;
	return;
}

=pod

=item $s->wait_failover($old_port, $timeout_s)

Wait until a sentinel reports a master other than $old_port and that node
answers ROLE master.  Returns the seconds (Time::HiRes, fractional) from
this call until then, or undef if it does not happen within $timeout_s
(default timeout_default).  Called right after kill_master, that is the
failover time; (time() - kill time) is there for the exact figure.

Before returning it also waits (within what remains of $timeout_s, not
counted in the figure) until every running sentinel reports the new
master, so what follows sees one master; a diag says so if they do not.

=cut

sub wait_failover
{
	my ($self, $old_port, $timeout_s) = @_;
	$timeout_s //= $PostgreSQL::Test::Utils::timeout_default;
	my $start = time();
	my $new;
	RlockTest::wait_until(
		sub {
			foreach my $i (0 .. $#{ $self->{sentinels} })
			{
				next unless $self->{sentinels}[$i]{running};
				my (undef, $p) = $self->_master_addr($i);
				next unless defined $p && $p != $old_port;
				my $n = $self->_node_at($p);
				if (_is_master($n))
				{
					$new = $n;
					return 1;
				}
			}
			return 0;
		},
		$timeout_s);
	if (!$new)
	{
		diag("no failover from $old_port within ${timeout_s}s: "
			  . $self->_describe);
		return undef;
	}
	my $elapsed = time() - $start;
	note sprintf('failover from %d to %d seen after %.3fs',
		$old_port, $new->port, $elapsed);
	my $left = $timeout_s - $elapsed;
	$left = 1 if $left < 1;
	RlockTest::wait_until(
		sub {
			foreach my $i (0 .. $#{ $self->{sentinels} })
			{
				next unless $self->{sentinels}[$i]{running};
				my (undef, $p) = $self->_master_addr($i);
				return 0 unless defined $p && $p == $new->port;
			}
			return 1;
		},
		$left)
	  or diag('the sentinels do not agree on the new master: '
		  . $self->_describe);
	return $elapsed;
}

=pod

=item $s->stop_sentinel($i)

SIGKILL sentinel $i (0-based) and wait until it is gone.

=item $s->start_sentinel($i)

Start sentinel $i on its port with its configuration file (as it last
rewrote it: same id, known replicas and sentinels) and wait until it
answers and reports a master.

=cut

sub stop_sentinel
{
	my ($self, $i) = @_;
	my $st = $self->{sentinels}[$i]
	  or croak "RlockTest::Sentinel: no sentinel $i";
	return unless $st->{running};
	my $pid = _sentinel_pid($st);
	$st->{running} = 0;
	if ($pid)
	{
		kill 'KILL', $pid;
		RlockTest::wait_until(sub { _gone($pid) }, 30)
		  or croak "sentinel $st->{port} (pid $pid) survived SIGKILL";
	}
	note "sentinel $st->{port} killed";
	return;
}

sub start_sentinel
{
	my ($self, $i) = @_;
	my $st = $self->{sentinels}[$i]
	  or croak "RlockTest::Sentinel: no sentinel $i";
	croak "sentinel $st->{port} is running" if $st->{running};
	unlink "$st->{dir}/sentinel.pid";
	RlockTest::Redis::without_sanitizers(
		sub { system_or_bail($RlockTest::Redis::SERVER, $st->{conf}, '--sentinel') });
	$st->{running} = 1;
	RlockTest::wait_until(sub { defined(($self->_master_addr($i))[1]) }, 30)
	  or BAIL_OUT("sentinel $st->{port} did not answer"
		  . (-f "$st->{dir}/sentinel.log"
			  ? ":\n" . slurp_file("$st->{dir}/sentinel.log") : ''));
	# what sentinel_set changed on the others (a sentinel stopped then
	# still has its old configuration)
	foreach my $k (sort keys %{ $self->{settings} // {} })
	{
		$self->_sentinel_set_one($i, $k, $self->{settings}{$k});
	}
	note "sentinel started on port $st->{port}";
	return;
}

sub _sentinel_pid
{
	my ($st) = @_;
	return RlockTest::read_pidfile("$st->{dir}/sentinel.pid");
}

=pod

=item $s->stop

Stop every sentinel (SIGTERM, SIGKILL if it lingers) and then every data
node still running.  Done at END (sentinels before data nodes, so no
failover starts while the nodes go down).  The logs of the sentinels and
of the data nodes are then copied beside the test's own log
(tmp_check/log/<test>_sentinel_<port>.log, <test>_redis_<port>.log): their
directories are temporary.

=cut

sub stop
{
	my ($self) = @_;
	foreach my $st (@{ $self->{sentinels} })
	{
		next unless $st->{running};
		$st->{running} = 0;
		my $pid = _sentinel_pid($st) or next;
		kill 'TERM', $pid;
		RlockTest::wait_until(sub { _gone($pid) }, 10)
		  or kill 'KILL', $pid;
	}
	foreach my $n (@{ $self->{nodes} })
	{
		$n->stop if $n->{running};
	}
	my $logdir = $PostgreSQL::Test::Utils::log_path;
	if (defined $logdir && -d $logdir)
	{
		my $test = File::Basename::basename($0, '.pl');
		foreach my $st (@{ $self->{sentinels} })
		{
			File::Copy::copy("$st->{dir}/sentinel.log",
				"$logdir/${test}_sentinel_$st->{port}.log");
		}
		foreach my $n (@{ $self->{nodes} })
		{
			File::Copy::copy($n->dir . '/redis.log',
				"$logdir/${test}_redis_" . $n->port . '.log');
		}
	}
	return;
}

=pod

=back

=cut

1;
