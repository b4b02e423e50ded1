
# Copyright (c) 2026, rlock developers

#
# A Redis Cluster on loopback: masters, their replicas, slots that move and
# masters that fail over.
#
package RlockTest::Cluster;

use strict;
use warnings;

use RlockTest ();    # wait_until, read_pidfile, pid_gone, @ALL_*: at run time
use RlockTest::Redis;
use RlockTest::Resp;

use Carp;
use File::Basename ();
use File::Copy ();
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use constant N_SLOTS => 16384;

# More methods of this package, a file each (after N_SLOTS: they use it):
# reading the nodes' state, resharding, failover.
use RlockTest::ClusterView;
use RlockTest::ClusterReshard;
use RlockTest::ClusterFailover;

=pod

=head1 RlockTest::Cluster

A Redis Cluster on loopback for the TAP tests, made of RlockTest::Redis
nodes started with C<cluster-enabled yes> and joined with
C<redis-cli --cluster create> (valkey-server/valkey-cli with
RLOCK_SERVER=valkey).  Works with Redis 6.0, 7.x, 8.x and Valkey: it asks
the nodes CLUSTER NODES, CLUSTER INFO, CLUSTER KEYSLOT and CLUSTER MYID
only (not CLUSTER SHARDS, 7.0+).  Every node is stopped at END.

  my $c = RlockTest::Cluster->new(masters => 3, replicas => 1);
  my $node = RlockTest::new_node('main', undef, url => $c->url);
  my $names = $c->names_on_each_master(2, 'job');  # port => [names]
  my $m = $c->master_of('job1');                 # an RlockTest::Redis
  $c->move_slot($c->slot_of('job1'), $other);    # the slot moves (MOVED)
  $c->begin_migration($slot, $other);            # clients get ASK
  $c->finish_migration($slot);
  my $killed_at = $c->kill_master($m);           # SIGKILL
  my $secs = $c->wait_failover($m, 30)           # undef on timeout
    // die 'no failover';
  $c->revive($m);                                # back as a replica

Most methods take a node as an RlockTest::Redis of this cluster or as its
port.  What the cluster says "now" (masters, replicas, master_of) is read
from CLUSTER NODES of a running node, the first of nodes that answers.

The harness talks to the nodes over its own small RESP client,
RlockTest::Resp (a TCP connection per command, AUTH first with a
password), not through redis-cli: that is quicker to poll, and it follows
ASK redirections the same way on every version (redis-cli -c sends ASKING
only from 7.0 on).  cli is there for tests that want the cli's own output.

The methods live in four files, each documented there, all loaded by
C<use RlockTest::Cluster>: RlockTest/Cluster.pm (this one: new, what the
cluster says now, url, cli, call, stop), RlockTest/ClusterReshard.pm
(begin_migration, migrate_keys, finish_migration, move_slot),
RlockTest/ClusterFailover.pm (kill_master, wait_failover, revive,
wait_settled) and RlockTest/ClusterView.pm (private: CLUSTER NODES and
CLUSTER INFO parsed, whether the nodes agree).

=over

=item RlockTest::Cluster->new(%opts)

Start masters * (1 + replicas) nodes, each an RlockTest::Redis (its own
directory, port and log) with C<cluster-enabled yes>, its own
C<cluster-config-file> (nodes.conf in its directory, so that revive brings
a node back with its identity), C<cluster-node-timeout>,
C<cluster-replica-validity-factor 0> (a replica may always fail over, however
long since it heard from its master), C<cluster-migration-barrier 999> (no
replica moves to another master by itself), C<repl-diskless-sync-delay 0>
(a replica's full sync starts at once) and no persistence; with a
password also C<masterauth>.  Each node's port is chosen so that its
cluster bus port (port + 10000, fixed on Redis 6.0) is free as well.  Then
C<redis-cli --cluster create ... --cluster-replicas N --cluster-yes>, and
it returns once every node reports cluster_state:ok and all 16384 slots
ok, every node sees every other as connected with no failure flag, all
nodes agree on the slot map and on each replica's master, there are
exactly C<masters> masters each with C<replicas> replicas, and every
replica's link to its master is up: polled, no fixed sleep.  BAIL_OUT when
that does not happen within timeout_default.

Options (defaults in brackets):

=over

=item masters => N [3]

At least 3 (redis-cli --cluster create needs 3).

=item replicas => N [1]

Replicas per master.

=item node_timeout_ms => ms [2000]

C<cluster-node-timeout>.  A killed master is failed over about
node_timeout_ms + 1 s later (failure detection, then the replica's election
delay of 500 ms + up to 500 ms random + 1 s per rank).

=item password => 'x' [undef]

C<requirepass> and C<masterauth> on every node; url, cli, call carry it.

=item require_full_coverage => 'yes' | 'no' ['yes']

C<cluster-require-full-coverage>: with yes (Redis's default) the whole
cluster answers CLUSTERDOWN while any slot has no master (e.g. between a
master's death and its failover).

=item args => [...]

More arguments for every node.

=back

=cut

sub new
{
	my ($class, %opts) = @_;
	my $self = bless {
		n_masters => $opts{masters} // 3,
		n_replicas => $opts{replicas} // 1,
		node_timeout_ms => $opts{node_timeout_ms} // 2000,
		password => $opts{password},
		require_full_coverage => $opts{require_full_coverage} // 'yes',
		nodes => [],
		ids => {},    # port => node id
		killed => {},    # port => { at, id, slots }
		migrating => {},    # slot => { from, to } (ports)
		problem => '',    # why the last _converged said no
	}, $class;
	croak 'RlockTest::Cluster: at least 3 masters'
	  if $self->{n_masters} < 3;
	croak 'RlockTest::Cluster: require_full_coverage is yes or no'
	  unless $self->{require_full_coverage} =~ /^(yes|no)$/;
	push @RlockTest::ALL_CLUSTERS, $self;

	my $t0 = time();
	my @args = (
		'--cluster-enabled', 'yes',
		'--cluster-config-file', 'nodes.conf',
		'--cluster-node-timeout', $self->{node_timeout_ms},
		'--cluster-replica-validity-factor', '0',
		'--cluster-migration-barrier', '999',
		'--cluster-require-full-coverage', $self->{require_full_coverage},
		'--repl-diskless-sync-delay', '0',
		@{ $opts{args} // [] });
	push @args, '--masterauth', $self->{password}
	  if defined $self->{password};
	my $n = $self->{n_masters} * (1 + $self->{n_replicas});
	foreach my $i (1 .. $n)
	{
		my $node = RlockTest::Redis->new(
			port => _port_with_bus(),
			args => [@args],
			password => $self->{password});
		push @{ $self->{nodes} }, $node;
	}
	foreach my $node (@{ $self->{nodes} })
	{
		my ($id, $err) = $self->_node_command($node->port, 'CLUSTER', 'MYID');
		BAIL_OUT('CLUSTER MYID at ' . $node->where . ': ' . ($err // 'no answer'))
		  if defined $err || !defined $id || $id !~ /^[0-9a-f]{40}$/;
		$self->{ids}{ $node->port } = $id;
	}

	# redis-cli makes the first "masters" nodes given masters
	my @cmd = (RlockTest::Redis::cli_program());
	push @cmd, '--no-auth-warning', '-a', $self->{password}
	  if defined $self->{password};
	push @cmd, '--cluster', 'create',
	  (map { '127.0.0.1:' . $_->port } @{ $self->{nodes} }),
	  '--cluster-replicas', $self->{n_replicas}, '--cluster-yes';
	my ($out, $err) = ('', '');
	# "yes" on stdin as well: redis-cli 6.0.0-6.0.3 ignored --cluster-yes
	my $ok = IPC::Run::run(\@cmd, '<', \"yes\n", '>', \$out, '2>', \$err,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	$out =~ s/\e\[[0-9;]*m//g;    # its colours
	BAIL_OUT("redis-cli --cluster create failed:\n$out$err") unless $ok;
	note "redis-cli --cluster create:\n$out";

	my $n_m = $self->{n_masters};
	my $n_r = $self->{n_replicas};
	my $ready = $self->_poll(
		sub {
			return 0 unless $self->_converged;
			my $view = $self->_view or return 0;
			my @m = grep { $_->{role} eq 'master' } values %$view;
			if (@m != $n_m)
			{
				$self->{problem} = scalar(@m) . " masters, not $n_m";
				return 0;
			}
			foreach my $m (@m)
			{
				my $r = grep { $_->{role} eq 'slave' && $_->{master} eq $m->{id} }
				  values %$view;
				if ($r != $n_r)
				{
					$self->{problem} = "master $m->{port} has $r replicas, not $n_r";
					return 0;
				}
			}
			return 1;
		});
	BAIL_OUT('the cluster did not come up: ' . $self->{problem}) unless $ready;
	$self->{created_in} = time() - $t0;
	note sprintf('cluster ready in %.2fs: %s', $self->{created_in},
		$self->describe);
	return $self;
}

# A free port (get_free_port) whose cluster bus port, port + 10000, is free
# too (Redis 6.0 has no cluster-port setting: the bus is always there).
sub _port_with_bus
{
	for (1 .. 100)
	{
		my $p = PostgreSQL::Test::Cluster::get_free_port();
		return $p
		  if $p + 10000 <= 65535
		  && PostgreSQL::Test::Cluster::can_bind('127.0.0.1', $p + 10000);
	}
	BAIL_OUT('RlockTest::Cluster: no free port with a free bus port');
}

=pod

=item $c->created_in

Seconds new took, from the first node's start to the cluster being ready.

=item $c->password, $c->node_timeout_ms

What new was given (or its defaults).

=cut

sub created_in { return $_[0]->{created_in}; }
sub password { return $_[0]->{password}; }
sub node_timeout_ms { return $_[0]->{node_timeout_ms}; }

# ------------------------------------------------------------ RESP client

# A connection to node $port (an RlockTest::Resp, AUTH done), or undef
# with the reason in $@.
sub _connect
{
	my ($self, $port) = @_;
	return RlockTest::Resp->connect($port, password => $self->{password});
}

# One command on node $port on a connection of its own: ($value, $error),
# or (undef, reason) when the node cannot be reached.
sub _node_command
{
	my ($self, $port, @cmd) = @_;
	return RlockTest::Resp::command($port, $self->{password}, @cmd);
}

# ---------------------------------------------------------------- nodes

# A node given as an RlockTest::Redis or a port: its port.
sub _port_of
{
	my ($self, $n) = @_;
	croak 'RlockTest::Cluster: no node given' unless defined $n;
	return ref $n ? $n->port : $n;
}

=pod

=item $c->node_at($port)

The RlockTest::Redis of this cluster listening on $port, or undef.

=item $c->node_id($node)

Its cluster node id (40 hex digits).

=cut

sub node_at
{
	my ($self, $port) = @_;
	my ($n) = grep { $_->port == $port } @{ $self->{nodes} };
	return $n;
}

sub node_id
{
	my ($self, $n) = @_;
	return $self->{ids}{ $self->_port_of($n) };
}

# The running nodes, in the order of nodes.
sub _running { return grep { $_->{running} } @{ $_[0]->{nodes} }; }

=pod

=item $c->describe

One line per node, as the cluster sees it now: port, role, its master's
port or its slots; for messages.

=cut

sub describe
{
	my ($self) = @_;
	my $view = $self->_view or return 'no node answers';
	my %port_of = map { $_->{id} => $_->{port} } values %$view;
	my @d;
	foreach my $n (sort { $a->{port} <=> $b->{port} } values %$view)
	{
		my $f = join(',', grep { $_ ne 'myself' } sort keys %{ $n->{flags} });
		push @d, "$n->{port} $f "
		  . ($n->{role} eq 'slave'
			? 'of ' . ($port_of{ $n->{master} } // $n->{master})
			: _ranges_text($n->{slots}));
	}
	return join('; ', @d);
}

=pod

=item $c->nodes

All nodes (RlockTest::Redis), in the order they were started (the first
"masters" were made masters by new); killed ones included.

=item $c->masters

The nodes the cluster says are masters now (flags master, not failing,
running), ordered by their lowest slot.

=item $c->replicas

The nodes the cluster says are replicas now (running, not failing), in the
order of masters, then by port.

=item $c->replicas_of($master)

The running replicas of that master now.

=cut

sub nodes { return @{ $_[0]->{nodes} }; }

sub masters
{
	my ($self) = @_;
	my $view = $self->_view or return ();
	my @m = sort {
		($a->{slots}[0] // [N_SLOTS])->[0] <=> ($b->{slots}[0] // [N_SLOTS])->[0]
		  || $a->{port} <=> $b->{port}
	  }
	  grep {
		$_->{role} eq 'master'
		  && !$_->{flags}{fail}
		  && !$_->{flags}{'fail?'}
		  && $self->_is_running($_->{port})
	  } values %$view;
	return map { $self->node_at($_->{port}) } @m;
}

sub replicas
{
	my ($self) = @_;
	return map { $self->replicas_of($_) } $self->masters;
}

sub replicas_of
{
	my ($self, $m) = @_;
	my $id = $self->node_id($m) // return ();
	my $view = $self->_view or return ();
	my @r = sort { $a->{port} <=> $b->{port} }
	  grep {
		$_->{role} eq 'slave'
		  && $_->{master} eq $id
		  && !$_->{flags}{fail}
		  && !$_->{flags}{'fail?'}
		  && $self->_is_running($_->{port})
	  } values %$view;
	return map { $self->node_at($_->{port}) } @r;
}

sub _is_running
{
	my ($self, $port) = @_;
	my $n = $self->node_at($port);
	return $n && $n->{running};
}

=pod

=item $c->url(%opts)

redis-cluster://127.0.0.1:<p1>,127.0.0.1:<p2>,... with the current
masters as seeds, redis-cluster://:<password>@... with a password.
Options: seeds => [nodes or ports] (other seeds, e.g. a replica or a node
that is down), password => 'x' or password => undef (none).

=cut

sub url
{
	my ($self, %o) = @_;
	my $pw = exists $o{password} ? $o{password} : $self->{password};
	my $auth = defined $pw ? ":$pw@" : '';
	my @ports = map { $self->_port_of($_) } @{ $o{seeds} // [ $self->masters ] };
	croak 'RlockTest::Cluster: no seed for the url' unless @ports;
	return "redis-cluster://$auth" . join(',', map { "127.0.0.1:$_" } @ports);
}

=pod

=item $c->slot_of($key)

CLUSTER KEYSLOT $key, asked of a running node.

=cut

sub slot_of
{
	my ($self, $key) = @_;
	foreach my $n ($self->_running)
	{
		my ($slot, $err) = $self->_node_command($n->port, 'CLUSTER', 'KEYSLOT', $key);
		return $slot if !defined $err && defined $slot;
	}
	croak "RlockTest::Cluster: no node answers CLUSTER KEYSLOT";
}

=pod

=item $c->master_of($key_or_slot)

The RlockTest::Redis that serves that slot now, as the cluster says (a
slot being migrated: its source, until finish_migration); undef if no node
does (e.g. its master is down and not yet failed over).  A number from 0
to 16383 is a slot; any other argument is a key (use
C<master_of($c-E<gt>slot_of('123'))> for a key made of digits).

=cut

sub master_of
{
	my ($self, $what) = @_;
	my $slot = ($what =~ /^\d+$/ && $what < N_SLOTS) ? $what : $self->slot_of($what);
	my $view = $self->_view or return undef;
	foreach my $n (values %$view)
	{
		next unless $n->{role} eq 'master';
		next if $n->{flags}{fail};
		foreach my $r (@{ $n->{slots} })
		{
			return $self->node_at($n->{port})
			  if $slot >= $r->[0] && $slot <= $r->[1];
		}
	}
	return undef;
}

=pod

=item $c->slots_of($master)

The slots that master serves now, as a list of [first, last] ranges.

=cut

sub slots_of
{
	my ($self, $m) = @_;
	my $id = $self->node_id($m);
	my $view = $self->_view or return ();
	return $view->{$id} ? @{ $view->{$id}{slots} } : ();
}

=pod

=item $c->cli(@args)

Run one command with C<redis-cli -c> (which follows MOVED redirections;
ASK only from 7.0 on) against the first running master (with the
password); returns its standard output chomped, or in list context
(stdout, stderr, exit status), like RlockTest::Redis::cli.

=cut

sub cli
{
	my ($self, @args) = @_;
	my ($n) = ($self->masters, $self->_running);
	croak 'RlockTest::Cluster: no node is running' unless $n;
	return $n->cli('-c', @args);
}

=pod

=item $c->call($key, @command)

Run @command on the master of $key's slot the way a cluster client does,
over the harness's own connection (RlockTest::Resp::cluster_request; it
goes first, and again after each retry, to the slot's master as master_of
says): a MOVED reply sends it to the node named, an ASK reply to the node
named preceded by ASKING on the same connection, TRYAGAIN, CLUSTERDOWN, LOADING and a
node that cannot be reached are retried every 50 ms, for up to 10 s or
3 * node_timeout_ms if that is longer (a failover's time, so that a call
made while a master is down gets the new master's answer).
Returns the reply as redis-cli prints it (nil as '', an integer as its
digits, an error as its text, an array one element a line); in list
context (text, error): error is undef or the error reply's text.  E.g.
C<$c-E<gt>call($name, 'EVAL', $script, 1, $name, @args)>.

=cut

sub call
{
	my ($self, $key, @cmd) = @_;
	my $slot = $self->slot_of($key);
	my $budget = 3 * $self->{node_timeout_ms} / 1000;
	my ($v, $err) = RlockTest::Resp::cluster_request(
		command => \@cmd,
		route => sub {
			my $m = $self->master_of($slot);
			return $m ? ($m->port) : (undef, "no master serves slot $slot");
		},
		password => $self->{password},
		timeout_s => ($budget > 10 ? $budget : 10));
	my $text = defined $err ? $err : RlockTest::Resp::as_text($v);
	return wantarray ? ($text, $err) : $text;
}

=pod

=item $c->names_on_each_master($n, $prefix)

$n lock names for each current master, found with CLUSTER KEYSLOT among
"$prefix1", "$prefix2", ... ($prefix without "{", default 'lock'): returns
a hash ref port => [names], one entry per master.

=cut

sub names_on_each_master
{
	my ($self, $n, $prefix) = @_;
	$prefix //= 'lock';
	croak "RlockTest::Cluster: the prefix must not contain '{'" if $prefix =~ /\{/;
	my @masters = $self->masters;
	croak 'RlockTest::Cluster: no master' unless @masters;
	my %want = map { $_->port => [] } @masters;
	my $view = $self->_view or croak 'RlockTest::Cluster: no node answers';
	my @owner;    # slot => port of its master
	foreach my $x (values %$view)
	{
		next unless $x->{role} eq 'master';
		@owner[ $_->[0] .. $_->[1] ] = ($x->{port}) x ($_->[1] - $_->[0] + 1)
		  foreach @{ $x->{slots} };
	}
	my $c = $self->_connect($masters[0]->port)
	  or croak "RlockTest::Cluster: $@";
	my $missing = @masters;
	for (my $i = 1; $missing > 0; $i++)
	{
		croak "RlockTest::Cluster: not $n names per master among ${prefix}1..$i"
		  if $i > 100_000;
		my $name = "$prefix$i";
		my ($slot, $err) = $c->request('CLUSTER', 'KEYSLOT', $name);
		croak "CLUSTER KEYSLOT $name: $err" if defined $err;
		my $m = $owner[$slot];
		next unless defined $m && $want{$m} && @{ $want{$m} } < $n;
		push @{ $want{$m} }, $name;
		$missing-- if @{ $want{$m} } == $n;
	}
	$c->close;
	return \%want;
}

=pod

=item $c->stop

Stop every running node, replicas first (no failover starts while the
masters go down).  Done at END.  The nodes' logs and nodes.conf files are
then copied beside the test's own log (tmp_check/log/<test>_redis_<port>.log,
<test>_redis_<port>_nodes.conf): their directories are temporary.

=cut

sub stop
{
	my ($self) = @_;
	my %is_master = map { $_->port => 1 } eval { $self->masters };
	foreach my $n (sort { ($is_master{ $a->port } // 0) <=> ($is_master{ $b->port } // 0) }
		@{ $self->{nodes} })
	{
		$n->stop if $n->{running};
	}
	my $logdir = $PostgreSQL::Test::Utils::log_path;
	if (!$self->{logs_copied} && defined $logdir && -d $logdir)
	{
		my $test = File::Basename::basename($0, '.pl');
		foreach my $n (@{ $self->{nodes} })
		{
			File::Copy::copy($n->dir . '/redis.log',
				"$logdir/${test}_redis_" . $n->port . '.log');
			File::Copy::copy($n->dir . '/nodes.conf',
				"$logdir/${test}_redis_" . $n->port . '_nodes.conf');
		}
		$self->{logs_copied} = 1;
	}
	return;
}

=pod

=back

=cut

1;
