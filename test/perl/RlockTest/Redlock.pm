
# Copyright (c) 2026, rlock developers

#
# Independent Redis masters for rlock's Redlock (rlock.redlock_urls).
#
package RlockTest::Redlock;

use strict;
use warnings;

use RlockTest ();    # wait_until, pid_gone, RlockTest::Redis, ...: at run time

use Carp;
use Test::More;

=pod

=head1 RlockTest::Redlock

A set of independent standalone masters (RlockTest::Redis objects), as
rlock.redlock_urls names them, each spoken to in its own URL form, and the
ways a test makes some of them unavailable.

  my $rl = RlockTest::Redlock->new(
      masters => [ {}, { tls => 1 }, { unix => 1 },
                   { password => 'pw', db => 3 }, {} ]);
  $rl->urls;                     # 'redis://...,rediss://...,unix:///...,...'
  $rl->n;                        # 5
  $rl->master(1);                # the RlockTest::Redis of master 1
  $rl->cli(3, 'HGETALL', 'x');   # redis-cli on master 3, in its db
  $rl->try_lock(2, 'x', 30000, $holder);   # Redisson RLock acquire there
  $rl->unlock(2, 'x', $holder);            # Redisson RLock release there
  $rl->fields(0, 'x');           # { holder => count } of the hash x
  $rl->pause(4); $rl->resume(4); # SIGSTOP / SIGCONT
  $rl->kill_master(4); $rl->start(4);   # SIGKILL (waits until gone) / start again

Options of each master: those of RlockTest::Redis->new (tls, unix,
password, ...), and db => N: the database index its URL names (and cli,
try_lock, unlock use).  Masters left paused are resumed at END.

=over

=item RlockTest::Redlock->new(masters => [ \%opts, ... ])

Start one RlockTest::Redis per element (five plain ones by default).

=cut

my @ALL;    # every set made here, to resume paused masters at END

sub new
{
	my ($class, %opts) = @_;
	my $specs = $opts{masters} // [ ({}) x 5 ];
	my $self = bless { masters => [], db => [], paused => {} }, $class;
	foreach my $spec (@$specs)
	{
		my %o = %$spec;
		my $db = delete $o{db};
		push @{ $self->{masters} }, RlockTest::Redis->new(%o);
		push @{ $self->{db} }, $db;
	}
	push @ALL, $self;
	return $self;
}

sub n { return scalar @{ $_[0]->{masters} }; }
sub master { return $_[0]->{masters}[ $_[1] ]; }
sub masters { return @{ $_[0]->{masters} }; }

=pod

=item $rl->url($i), $rl->urls

The URL of master $i (with its db, if one was given); all of them joined
by commas, for rlock.redlock_urls.

=cut

sub url
{
	my ($self, $i) = @_;
	my $db = $self->{db}[$i];
	return $self->master($i)->url(defined $db ? (db => $db) : ());
}

sub urls
{
	my ($self) = @_;
	return join(',', map { $self->url($_) } 0 .. $self->n - 1);
}

=pod

=item $rl->describe($i)

"master <i> (<host:port or socket>, <tcp|tls|unix>)": for messages.

=cut

sub describe
{
	my ($self, $i) = @_;
	my $m = $self->master($i);
	my $kind = $m->tls ? 'tls' : $m->unix ? 'unix' : 'tcp';
	$kind .= ", db $self->{db}[$i]" if defined $self->{db}[$i];
	return "master $i (" . $m->where . ", $kind)";
}

=pod

=item $rl->cli($i, @args)

redis-cli @args on master $i, in its database; like RlockTest::Redis's
cli (stdout chomped; in list context stdout, stderr, exit status).

=cut

sub cli
{
	my ($self, $i, @args) = @_;
	my $db = $self->{db}[$i];
	unshift @args, '-n', $db if defined $db;
	return $self->master($i)->cli(@args);
}

=pod

=item $rl->try_lock($i, $name, $lease_ms, $holder), $rl->unlock($i, $name, $holder)

A Redisson client's RLock acquire and release (RlockTest::Redisson's
scripts) on master $i, in its database: '' when acquired, else the PTTL;
1 released, 0 one level less, '' not held.

=cut

sub try_lock
{
	my ($self, $i, $name, $lease_ms, $holder) = @_;
	return scalar $self->cli($i, 'EVAL', $RlockTest::Redisson::acquire, 1,
		$name, $lease_ms, $holder);
}

my $unlock_request = 0;

sub unlock
{
	my ($self, $i, $name, $holder) = @_;
	my $latch = sprintf('redisson_unlock_latch:{%s}:%032x', $name,
		++$unlock_request + int(rand(1 << 30)) * 65536);
	return scalar $self->cli($i, 'EVAL', $RlockTest::Redisson::release, 3,
		$name, "redisson_lock__channel:{$name}", $latch,
		'0', 30000, $holder, 'publish', 13500);
}

=pod

=item $rl->fields($i, $name)

The hash $name on master $i as a hash ref (field => value); {} when the
key does not exist.  undef when the cli failed (master down).

=cut

sub fields
{
	my ($self, $i, $name) = @_;
	my ($out, $err, $rc) = $self->cli($i, 'HGETALL', $name);
	return undef if $rc != 0 || !defined $out || ($err // '') =~ /\S/;
	my @kv = split /\n/, $out;
	return { @kv };
}

=pod

=item $rl->all_renewed(\@indices, $name, $timeout_s)

Wait until the PTTL of $name has gone up (a renewal: more than 500 ms
above the lowest value seen) on every master of @indices, watching them
all at once, for up to $timeout_s; like RlockTest::all_renewed_on, but in
each master's database.  Returns (whether it went up on them all, a hash
ref: index => the lowest PTTL seen there before).

=cut

sub all_renewed
{
	my ($self, $indices, $name, $timeout_s) = @_;
	my %probes = map {
		my $i = $_;
		($i => sub { scalar $self->cli($i, 'PTTL', $name) })
	} @$indices;
	return RlockTest::pttls_went_up(\%probes, $timeout_s);
}

=pod

=item $rl->pause($i), $rl->resume($i)

SIGSTOP / SIGCONT master $i's process: while paused it accepts TCP (and
Unix socket) connections in its backlog and answers nothing.

=cut

sub pause
{
	my ($self, $i) = @_;
	my $pid = $self->master($i)->pid
	  or croak 'RlockTest::Redlock: ' . $self->describe($i) . ' has no pid';
	CORE::kill 'STOP', $pid or croak "SIGSTOP $pid: $!";
	$self->{paused}{$i} = $pid;
	return;
}

sub resume
{
	my ($self, $i) = @_;
	my $pid = delete $self->{paused}{$i};
	return unless $pid;
	CORE::kill 'CONT', $pid;
	return;
}

sub resume_all
{
	my ($self) = @_;
	$self->resume($_) foreach keys %{ $self->{paused} };
	return;
}

sub paused { return sort { $a <=> $b } keys %{ $_[0]->{paused} }; }

=pod

=item $rl->kill_master($i), $rl->start($i)

SIGKILL master $i (no SHUTDOWN: it says nothing to its clients, saves
nothing) and wait until it is gone; start it again, empty, on the same
port or socket.

=cut

sub kill_master
{
	my ($self, $i) = @_;
	my $m = $self->master($i);
	my $pid = $m->pid
	  or croak 'RlockTest::Redlock: ' . $self->describe($i) . ' has no pid';
	CORE::kill 'CONT', $pid if delete $self->{paused}{$i};
	CORE::kill 'KILL', $pid;
	$m->{running} = 0;
	RlockTest::wait_until(sub { RlockTest::pid_gone($pid) }, 30)
	  or croak $self->describe($i) . " (pid $pid) survived SIGKILL";
	note $self->describe($i) . " killed (pid $pid)";
	return;
}

sub start
{
	my ($self, $i) = @_;
	$self->master($i)->start;
	return;
}

=pod

=back

=cut

END
{
	local $?;
	foreach my $rl (@ALL)
	{
		eval { $rl->resume_all; };
	}
}

1;
