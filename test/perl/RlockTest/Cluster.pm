
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

use Carp;
use File::Basename ();
use File::Copy ();
use IO::Socket::INET;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Socket qw(SOL_SOCKET SO_RCVTIMEO SO_SNDTIMEO);
use Test::More;
use Time::HiRes qw(time usleep);

use constant N_SLOTS => 16384;

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

The harness talks to the nodes over its own small RESP client (a TCP
connection per command, AUTH first with a password), not through
redis-cli: that is quicker to poll, and it follows ASK redirections the
same way on every version (redis-cli -c sends ASKING only from 7.0 on).
cli is there for tests that want the cli's own output.

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

# A connection to 127.0.0.1:$port (AUTH done), or undef with the reason
# in $@.  Reads and writes time out after $timeout_s (default 5).
sub _connect
{
	my ($self, $port, $timeout_s) = @_;
	$timeout_s //= 5;
	my $sock = IO::Socket::INET->new(
		PeerAddr => '127.0.0.1',
		PeerPort => $port,
		Proto => 'tcp',
		Timeout => $timeout_s);
	if (!$sock)
	{
		$@ = "cannot connect to 127.0.0.1:$port: $!";
		return undef;
	}
	my $tv = pack('l!l!', int($timeout_s), ($timeout_s - int($timeout_s)) * 1e6);
	setsockopt($sock, SOL_SOCKET, SO_RCVTIMEO, $tv);
	setsockopt($sock, SOL_SOCKET, SO_SNDTIMEO, $tv);
	my $c = { sock => $sock, buf => '', port => $port };
	if (defined $self->{password})
	{
		my ($v, $err) = eval { _request($c, 'AUTH', $self->{password}) };
		if (!defined $v || defined $err)
		{
			$@ = "AUTH at 127.0.0.1:$port: " . ($err // $@);
			return undef;
		}
	}
	return $c;
}

# Send one command; returns ($value, $error): the reply decoded (integers
# and strings as Perl scalars, nil as undef, arrays as array refs) and
# undef, or (undef, "the error reply").  Dies when the connection fails.
sub _request
{
	my ($c, @args) = @_;
	my $buf = '*' . scalar(@args) . "\r\n";
	foreach my $a (@args)
	{
		my $s = "$a";
		utf8::encode($s) if utf8::is_utf8($s);
		$buf .= '$' . length($s) . "\r\n$s\r\n";
	}
	while (length $buf)
	{
		my $w = syswrite($c->{sock}, $buf);
		die "write to 127.0.0.1:$c->{port}: $!\n" unless defined $w && $w > 0;
		substr($buf, 0, $w) = '';
	}
	return _reply($c);
}

sub _fill
{
	my ($c) = @_;
	my $n = sysread($c->{sock}, my $chunk, 65536);
	die "read from 127.0.0.1:$c->{port}: " . (defined $n ? 'connection closed' : $!) . "\n"
	  unless $n;
	$c->{buf} .= $chunk;
	return;
}

sub _line
{
	my ($c) = @_;
	my $i;
	_fill($c) while ($i = index($c->{buf}, "\r\n")) < 0;
	my $l = substr($c->{buf}, 0, $i);
	substr($c->{buf}, 0, $i + 2) = '';
	return $l;
}

sub _reply
{
	my ($c) = @_;
	my $l = _line($c);
	my ($t, $rest) = (substr($l, 0, 1), substr($l, 1));
	return ($rest, undef) if $t eq '+' || $t eq ':';
	return (undef, $rest) if $t eq '-';
	if ($t eq '$')
	{
		return (undef, undef) if $rest < 0;
		_fill($c) while length($c->{buf}) < $rest + 2;
		my $s = substr($c->{buf}, 0, $rest);
		substr($c->{buf}, 0, $rest + 2) = '';
		return ($s, undef);
	}
	if ($t eq '*')
	{
		return (undef, undef) if $rest < 0;
		my @a;
		foreach (1 .. $rest)
		{
			my ($v, $e) = _reply($c);
			push @a, defined $e ? $e : $v;
		}
		return (\@a, undef);
	}
	die "unexpected reply from 127.0.0.1:$c->{port}: $l\n";
}

# One command on node $port on a connection of its own: ($value, $error)
# as _request, or (undef, reason) when the node cannot be reached.
sub _node_command
{
	my ($self, $port, @cmd) = @_;
	my $c = $self->_connect($port) or return (undef, $@);
	my @r = eval { _request($c, @cmd) };
	close $c->{sock};
	return @r ? @r : (undef, $@ =~ s/\n$//r);
}

# A reply as redis-cli prints it without a tty: nil as '', arrays one
# element a line.
sub _as_text
{
	my ($v) = @_;
	return '' unless defined $v;
	return join("\n", map { _as_text($_) } @$v) if ref $v eq 'ARRAY';
	return $v;
}

# ---------------------------------------------------------- the cluster's view

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

# CLUSTER NODES as node $port sees it, parsed: id => { id, port, flags =>
# {flag => 1}, role ('master' or 'slave'), master (id or '-'), link,
# myself, slots => [[first, last], ...] (migrating/importing entries left
# out: those are in migrating/importing of the node's own line, slot =>
# node id) }.  undef if the node does not answer.
sub _nodes_of
{
	my ($self, $port) = @_;
	my ($txt, $err) = $self->_node_command($port, 'CLUSTER', 'NODES');
	return undef if defined $err || !defined $txt;
	my %view;
	foreach my $line (split /\n/, $txt)
	{
		my ($id, $addr, $flags, $master, undef, undef, undef, $link, @slots) =
		  split ' ', $line;
		next unless defined $link;
		# ip:port@cport (6.0), ip:port@cport[,hostname] (7.0 on)
		my ($p) = $addr =~ /^[^:]*:(\d+)/;
		my %f = map { $_ => 1 } split /,/, $flags;
		my $n = {
			id => $id,
			port => $p,
			flags => \%f,
			role => $f{master} ? 'master' : $f{slave} ? 'slave' : 'none',
			master => $master,
			link => $link,
			myself => $f{myself} ? 1 : 0,
			slots => [],
			migrating => {},
			importing => {},
		};
		foreach my $s (@slots)
		{
			if ($s =~ /^\[(\d+)->-([0-9a-f]+)\]$/)
			{
				$n->{migrating}{$1} = $2;
			}
			elsif ($s =~ /^\[(\d+)-<-([0-9a-f]+)\]$/)
			{
				$n->{importing}{$1} = $2;
			}
			elsif ($s =~ /^(\d+)(?:-(\d+))?$/)
			{
				push @{ $n->{slots} }, [ $1, $2 // $1 ];
			}
		}
		@{ $n->{slots} } = sort { $a->[0] <=> $b->[0] } @{ $n->{slots} };
		$view{$id} = $n;
	}
	return \%view;
}

# The view of the first running node that answers (see _nodes_of).
sub _view
{
	my ($self) = @_;
	foreach my $n ($self->_running)
	{
		my $v = $self->_nodes_of($n->port);
		return $v if $v;
	}
	return undef;
}

sub _n_slots
{
	my ($ranges) = @_;
	my $n = 0;
	$n += $_->[1] - $_->[0] + 1 foreach @$ranges;
	return $n;
}

sub _ranges_text
{
	my ($ranges) = @_;
	return join(',', map { $_->[0] == $_->[1] ? $_->[0] : "$_->[0]-$_->[1]" } @$ranges);
}

# CLUSTER INFO of node $port as a hash, or undef.
sub _info_of
{
	my ($self, $port) = @_;
	my ($txt, $err) = $self->_node_command($port, 'CLUSTER', 'INFO');
	return undef if defined $err || !defined $txt;
	return { map { /^([^:]+):(.*?)\r?$/ ? ($1, $2) : () } split /\n/, $txt };
}

# A view reduced to what every node must agree on, over the running nodes:
# "id role master slots" a line, sorted; undef (reason in problem) when a
# running node is missing from it, flagged failing, not connected, or the
# running masters do not cover every slot.
sub _canonical
{
	my ($self, $port, $view) = @_;
	my %running = map { $self->{ids}{ $_->port } => $_->port } $self->_running;
	my @lines;
	my $covered = 0;
	foreach my $id (sort keys %running)
	{
		my $n = $view->{$id};
		if (!$n)
		{
			$self->{problem} = "$port does not know $running{$id}";
			return undef;
		}
		my @bad = grep { $n->{flags}{$_} } qw(fail fail? handshake noaddr);
		if (@bad || (!$n->{myself} && $n->{link} ne 'connected'))
		{
			$self->{problem} = "$port sees $running{$id} as "
			  . join(',', sort keys %{ $n->{flags} }) . " $n->{link}";
			return undef;
		}
		if ($n->{role} eq 'slave' && !exists $running{ $n->{master} })
		{
			$self->{problem} = "$port sees $running{$id} replicate a node that is down";
			return undef;
		}
		$covered += _n_slots($n->{slots}) if $n->{role} eq 'master';
		push @lines, join(' ', $id, $n->{role},
			$n->{role} eq 'slave' ? $n->{master} : '-',
			_ranges_text($n->{slots}));
	}
	if ($covered != N_SLOTS)
	{
		$self->{problem} = "$port sees $covered slots served by running masters";
		return undef;
	}
	return join("\n", @lines);
}

# Whether the running nodes make a settled cluster: each says
# cluster_state:ok with every slot ok, all views agree (_canonical), and
# every replica's link to its master is up.  Sets problem when not.
sub _converged
{
	my ($self) = @_;
	my $first;
	my @replicas;
	foreach my $node ($self->_running)
	{
		my $p = $node->port;
		my $info = $self->_info_of($p);
		if (!$info)
		{
			$self->{problem} = "$p does not answer CLUSTER INFO";
			return 0;
		}
		if (($info->{cluster_state} // '') ne 'ok'
			|| ($info->{cluster_slots_ok} // 0) != N_SLOTS)
		{
			$self->{problem} = "$p: cluster_state:" . ($info->{cluster_state} // '?')
			  . ' cluster_slots_ok:' . ($info->{cluster_slots_ok} // '?');
			return 0;
		}
		my $view = $self->_nodes_of($p);
		if (!$view)
		{
			$self->{problem} = "$p does not answer CLUSTER NODES";
			return 0;
		}
		my $canon = $self->_canonical($p, $view) // return 0;
		if (!defined $first)
		{
			$first = [ $p, $canon ];
			@replicas = map { $_->{port} }
			  grep { $_->{role} eq 'slave' && $self->_is_running($_->{port}) }
			  values %$view;
		}
		elsif ($canon ne $first->[1])
		{
			$self->{problem} = "$p and $first->[0] disagree:\n$canon\n--\n$first->[1]";
			return 0;
		}
	}
	foreach my $p (@replicas)
	{
		my ($txt) = $self->_node_command($p, 'INFO', 'replication');
		if (($txt // '') !~ /^master_link_status:up\r?$/m)
		{
			$self->{problem} = "replica $p: link to its master not up";
			return 0;
		}
	}
	return 1;
}

# Poll $cond every 20 ms until it is true or $timeout_s (default
# timeout_default) passes; returns whether it became true.
sub _poll
{
	my ($self, $cond, $timeout_s) = @_;
	$timeout_s //= $PostgreSQL::Test::Utils::timeout_default;
	my $deadline = time() + $timeout_s;
	while (1)
	{
		return 1 if $cond->();
		return 0 if time() >= $deadline;
		usleep(20_000);
	}
}

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
over the harness's own connection: a MOVED reply sends it to the node
named, an ASK reply to the node named preceded
by ASKING on the same connection, TRYAGAIN, CLUSTERDOWN, LOADING and a
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
	my $deadline = time() + ($budget > 10 ? $budget : 10);
	my ($port, $asking);
	my ($v, $err);
	for (my $hops = 0; $hops < 100; $hops++)
	{
		if (!defined $port)
		{
			my $m = $self->master_of($slot);
			$port = $m->port if $m;
		}
		if (defined $port)
		{
			my $c = $self->_connect($port);
			if ($c)
			{
				my @r = eval {
					if ($asking)
					{
						my (undef, $e) = _request($c, 'ASKING');
						die "ASKING: $e\n" if defined $e;
					}
					_request($c, @cmd);
				};
				close $c->{sock};
				($v, $err) = @r ? @r : (undef, $@ =~ s/\n$//r);
				$asking = 0;
				if (!@r)
				{
					# connection lost: ask the map again
				}
				elsif (defined $err && $err =~ /^MOVED \d+ [^:]*:(\d+)/)
				{
					$port = $1;
					next;
				}
				elsif (defined $err && $err =~ /^ASK \d+ [^:]*:(\d+)/)
				{
					($port, $asking) = ($1, 1);
					next;
				}
				elsif (!defined $err || $err !~ /^(TRYAGAIN|CLUSTERDOWN|LOADING)\b/)
				{
					last;
				}
			}
			else
			{
				$err = $@;
			}
		}
		else
		{
			$err = "no master serves slot $slot";
		}
		last if time() >= $deadline;
		usleep(50_000);
		$port = undef;
	}
	my $text = defined $err ? $err : _as_text($v);
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
		my ($slot, $err) = _request($c, 'CLUSTER', 'KEYSLOT', $name);
		croak "CLUSTER KEYSLOT $name: $err" if defined $err;
		my $m = $owner[$slot];
		next unless defined $m && $want{$m} && @{ $want{$m} } < $n;
		push @{ $want{$m} }, $name;
		$missing-- if @{ $want{$m} } == $n;
	}
	close $c->{sock};
	return \%want;
}

# ------------------------------------------------------------- resharding

# Run a command on node $port; croak on an error reply.
sub _must
{
	my ($self, $port, @cmd) = @_;
	my ($v, $err) = $self->_node_command($port, @cmd);
	croak "RlockTest::Cluster: @cmd[0..1] at $port: $err" if defined $err;
	return $v;
}

=pod

=item $c->begin_migration($slot, $to)

Start moving $slot from its master to master $to: CLUSTER SETSLOT $slot
IMPORTING on $to, then MIGRATING on the source, then migrate_keys.  The
slot stays in that state: a client asking the source for a key that is no
longer there gets ASK (and TRYAGAIN for a multi-key command whose keys are
split), the source still serves the keys it has.

=item $c->migrate_keys($slot)

MIGRATE (with KEYS, AUTH with a password) every key of $slot still on the
source (CLUSTER GETKEYSINSLOT, 100 at a time) to the target: the keys
created there meanwhile.  Returns how many were moved.  Dies if the target
already has one of them (BUSYKEY).

=item $c->finish_migration($slot)

migrate_keys, then CLUSTER SETSLOT $slot NODE E<lt>target idE<gt> on the
target, the source and every other master, and wait until every running
node says the slot is the target's and is neither migrating nor importing
anywhere: clients get MOVED from then on.

=item $c->move_slot($slot, $to)

The three at once.

=cut

sub begin_migration
{
	my ($self, $slot, $to) = @_;
	my $to_port = $self->_port_of($to);
	my $from = $self->master_of($slot)
	  or croak "RlockTest::Cluster: no master serves slot $slot";
	my $from_port = $from->port;
	croak "RlockTest::Cluster: slot $slot is already on $to_port"
	  if $from_port == $to_port;
	croak "RlockTest::Cluster: slot $slot is being migrated already"
	  if $self->{migrating}{$slot};
	$self->_must($to_port, 'CLUSTER', 'SETSLOT', $slot, 'IMPORTING',
		$self->{ids}{$from_port});
	$self->_must($from_port, 'CLUSTER', 'SETSLOT', $slot, 'MIGRATING',
		$self->{ids}{$to_port});
	$self->{migrating}{$slot} = { from => $from_port, to => $to_port };
	my $moved = $self->migrate_keys($slot);
	note "slot $slot migrating from $from_port to $to_port ($moved keys moved)";
	return;
}

sub migrate_keys
{
	my ($self, $slot) = @_;
	my $m = $self->{migrating}{$slot}
	  or croak "RlockTest::Cluster: slot $slot is not being migrated";
	my $moved = 0;
	while (1)
	{
		my $keys = $self->_must($m->{from}, 'CLUSTER', 'GETKEYSINSLOT', $slot, 100);
		last unless $keys && @$keys;
		my @auth = defined $self->{password} ? ('AUTH', $self->{password}) : ();
		my ($v, $err) = $self->_node_command($m->{from}, 'MIGRATE', '127.0.0.1',
			$m->{to}, '', 0, 5000, @auth, 'KEYS', @$keys);
		croak "RlockTest::Cluster: MIGRATE of slot $slot from $m->{from} to $m->{to}: $err"
		  if defined $err;
		$moved += @$keys;
	}
	return $moved;
}

sub finish_migration
{
	my ($self, $slot) = @_;
	my $m = $self->{migrating}{$slot}
	  or croak "RlockTest::Cluster: slot $slot is not being migrated";
	$self->migrate_keys($slot);
	my $to_id = $self->{ids}{ $m->{to} };
	# the target first: it bumps its epoch and claims the slot
	my @order = ($m->{to}, $m->{from});
	foreach my $n ($self->masters)
	{
		push @order, $n->port unless grep { $_ == $n->port } @order;
	}
	$self->_must($_, 'CLUSTER', 'SETSLOT', $slot, 'NODE', $to_id) foreach @order;
	delete $self->{migrating}{$slot};
	my $ok = $self->_poll(
		sub {
			foreach my $n ($self->_running)
			{
				my $view = $self->_nodes_of($n->port) or return 0;
				foreach my $x (values %$view)
				{
					if ($x->{myself}
						&& (exists $x->{migrating}{$slot} || exists $x->{importing}{$slot}))
					{
						$self->{problem} = $n->port . " still migrating/importing $slot";
						return 0;
					}
					my $has = grep { $slot >= $_->[0] && $slot <= $_->[1] } @{ $x->{slots} };
					if ($has && $x->{id} ne $to_id && $x->{role} eq 'master')
					{
						$self->{problem} = $n->port . " sees slot $slot on $x->{port}";
						return 0;
					}
					if (!$has && $x->{id} eq $to_id)
					{
						$self->{problem} = $n->port . " does not see slot $slot on $m->{to}";
						return 0;
					}
				}
			}
			return 1;
		});
	croak "RlockTest::Cluster: slot $slot did not settle on $m->{to}: $self->{problem}"
	  unless $ok;
	note "slot $slot moved from $m->{from} to $m->{to}";
	return;
}

sub move_slot
{
	my ($self, $slot, $to) = @_;
	$self->begin_migration($slot, $to);
	$self->finish_migration($slot);
	return;
}

# ---------------------------------------------------------------- failover

=pod

=item $c->kill_master($master)

SIGKILL that master's process (no SHUTDOWN: it says nothing to anyone) and
wait until it is gone; its object stays in nodes, not running.  Dies if
the node is not a master now.  Returns the time of the kill
(Time::HiRes::time).

=cut

sub kill_master
{
	my ($self, $m) = @_;
	my $port = $self->_port_of($m);
	my $node = $self->node_at($port)
	  or croak "RlockTest::Cluster: no node at $port";
	croak "RlockTest::Cluster: $port is not a master now"
	  unless grep { $_->port == $port } $self->masters;
	my $pid = $node->pid or croak "RlockTest::Cluster: $port has no pid";
	my @slots = $self->slots_of($port);
	my $t = time();
	kill 'KILL', $pid;
	$node->{running} = 0;
	RlockTest::wait_until(sub { RlockTest::pid_gone($pid) }, 30)
	  or croak "master $port (pid $pid) survived SIGKILL";
	$self->{killed}{$port} = { at => $t, id => $self->{ids}{$port}, slots => \@slots };
	note "master $port killed (pid $pid; slots " . _ranges_text(\@slots) . ')';
	return $t;
}

=pod

=item $c->wait_failover($old_master, $timeout_s)

Wait until the slots $old_master served when kill_master killed it are
served by another node, a running master, and the cluster has settled
(as new waits for: every running node says cluster_state:ok, all agree on
the slot map and on each replica's master, replica links up).  Returns
the seconds from the kill until then (Time::HiRes, fractional; from this
call if kill_master did not kill it), or undef with a diag saying what
was missing if that does not happen within $timeout_s (default
timeout_default).

=cut

sub wait_failover
{
	my ($self, $old, $timeout_s) = @_;
	my $port = $self->_port_of($old);
	my $k = $self->{killed}{$port};
	my $since = $k ? $k->{at} : time();
	my $slots = $k ? $k->{slots} : [ $self->slots_of($port) ];
	croak "RlockTest::Cluster: $port served no slot" unless @$slots;
	my $new;
	my $ok = $self->_poll(
		sub {
			my $m = $self->master_of($slots->[0][0]);
			if (!$m || $m->port == $port)
			{
				$self->{problem} = "slot $slots->[0][0] has no new master";
				return 0;
			}
			$new = $m;
			return $self->_converged;
		},
		$timeout_s);
	if (!$ok)
	{
		diag("no failover from $port within "
			  . ($timeout_s // $PostgreSQL::Test::Utils::timeout_default)
			  . "s: $self->{problem}; " . $self->describe);
		return undef;
	}
	my $secs = time() - $since;
	note sprintf('failover from %d to %d: settled %.3fs after the kill',
		$port, $new->port, $secs);
	return $secs;
}

=pod

=item $c->revive($node)

Start a node kill_master stopped again, on its port with its nodes.conf:
it rejoins, as a replica of the node that took its slots over if it was
failed over (it comes back empty and takes a full copy), else as the
master it was.  Waits until the cluster has settled (as wait_failover) and
returns the seconds that took.

=cut

sub revive
{
	my ($self, $n) = @_;
	my $node = $self->node_at($self->_port_of($n))
	  or croak 'RlockTest::Cluster: no such node';
	croak 'RlockTest::Cluster: revive a stopped node' if $node->{running};
	my $t = time();
	$node->start;
	delete $self->{killed}{ $node->port };
	$self->_poll(sub { $self->_converged })
	  or croak 'RlockTest::Cluster: the cluster did not settle after reviving '
	  . $node->port . ": $self->{problem}";
	my $secs = time() - $t;
	note sprintf('node %d revived, cluster settled in %.3fs: %s',
		$node->port, $secs, $self->describe);
	return $secs;
}

=pod

=item $c->wait_settled($timeout_s)

Wait until the running nodes have settled as new and wait_failover wait
for; returns whether they did (a diag says what was missing if not).

=cut

sub wait_settled
{
	my ($self, $timeout_s) = @_;
	return 1 if $self->_poll(sub { $self->_converged }, $timeout_s);
	diag("the cluster did not settle: $self->{problem}");
	return 0;
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
