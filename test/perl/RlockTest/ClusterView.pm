
# Copyright (c) 2026, rlock developers

#
# RlockTest::Cluster, what its nodes say: CLUSTER NODES and CLUSTER INFO
# parsed, and whether the running nodes agree (the cluster has settled).
# Private methods of RlockTest::Cluster, loaded by RlockTest/Cluster.pm.
#
package RlockTest::Cluster;

use strict;
use warnings;

use RlockTest::Cluster ();    # N_SLOTS (loads this file first if need be)

use PostgreSQL::Test::Utils ();
use Time::HiRes qw(time usleep);

=pod

=head1 RlockTest::Cluster: the cluster's view

How RlockTest::Cluster reads the state of its nodes (CLUSTER NODES and
CLUSTER INFO, over RlockTest::Resp) and decides that the cluster has
settled: every running node says cluster_state:ok with every slot ok,
they all agree on the slot map and on each replica's master, and every
replica's link to its master is up.  What new, wait_failover, revive,
wait_settled and finish_migration wait for, and what masters, replicas,
master_of, slots_of and describe report.  Private methods, no API of
their own: see the comments in the code.

=cut

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

1;
