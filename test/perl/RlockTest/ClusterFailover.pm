
# Copyright (c) 2026, rlock developers

#
# RlockTest::Cluster, failover: a master killed, its replica promoted, the
# killed node back as a replica.  Methods of RlockTest::Cluster, loaded by
# RlockTest/Cluster.pm.
#
package RlockTest::Cluster;

use strict;
use warnings;

use RlockTest ();    # wait_until, pid_gone: at run time
use RlockTest::Cluster ();    # (loads this file first if need be)

use Carp;
use PostgreSQL::Test::Utils ();
use Test::More;
use Time::HiRes qw(time);

=pod

=head1 RlockTest::Cluster: failover

Methods of RlockTest::Cluster (RlockTest/Cluster.pm loads this file) that
kill a master, wait for the cluster to fail it over and to settle, and
bring the killed node back.

=over

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

=back

=cut

1;
