
# Copyright (c) 2026, rlock developers

#
# RlockTest::Cluster, resharding: a slot migrated from one master to
# another (clients get ASK, then MOVED).  Methods of RlockTest::Cluster,
# loaded by RlockTest/Cluster.pm.
#
package RlockTest::Cluster;

use strict;
use warnings;

use RlockTest::Cluster ();    # (loads this file first if need be)

use Carp;
use Test::More;

=pod

=head1 RlockTest::Cluster: resharding

Methods of RlockTest::Cluster (RlockTest/Cluster.pm loads this file) that
move a slot to another master the way redis-cli --cluster reshard does,
one step at a time so that a test can act between them.  $to is a master
of the cluster, an RlockTest::Redis or its port.

=cut

# Run a command on node $port; croak on an error reply.
sub _must
{
	my ($self, $port, @cmd) = @_;
	my ($v, $err) = $self->_node_command($port, @cmd);
	croak "RlockTest::Cluster: @cmd[0..1] at $port: $err" if defined $err;
	return $v;
}

=pod

=over

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

=pod

=back

=cut

1;
