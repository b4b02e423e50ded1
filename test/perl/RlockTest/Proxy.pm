
# Copyright (c) 2026, rlock developers

#
# A TCP proxy between PostgreSQL and Redis whose link can fail on command.
#
package RlockTest::Proxy;

use strict;
use warnings;

use RlockTest ();    # wait_until, read_pidfile, @ALL_*: at run time

use Carp;
use File::Basename qw(dirname);
use File::Spec;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# tcp_proxy.pl lives in test/perl, beside RlockTest.pm (this file is in
# test/perl/RlockTest).
my $PROXY_SCRIPT = File::Spec->catfile(
	dirname(dirname(File::Spec->rel2abs(__FILE__))), 'tcp_proxy.pl');

=pod

=head1 RlockTest::Proxy

A loopback TCP proxy in front of a Redis, run as a separate process
(test/perl/tcp_proxy.pl, core Perl only), through which a node can be
pointed to cut, stall and restore its link to Redis.  Every control method
returns only once the proxy has acknowledged that the change took effect:
after $p->stall returns, not one more byte passes.

Held data is held, not dropped: the proxy stops reading it (it waits in the
kernel's socket buffers, like segments retransmitted across a partition)
and passes it on when forwarding resumes.  So a command sent during a stall
reaches Redis after $p->resume, even if its client has given up and closed
the connection meanwhile.

=over

=item RlockTest::Proxy->new($redis)

Start a proxy listening on a free loopback port
(PostgreSQL::Test::Cluster::get_free_port) that forwards every accepted
connection to 127.0.0.1:$redis->port.  $redis is an RlockTest::Redis (or
anything with port and password methods).  Waits until it listens.

=cut

sub new
{
	my ($class, $redis) = @_;
	my $self = bless {
		redis => $redis,
		port => PostgreSQL::Test::Cluster::get_free_port(),
		in => '',
		out => '',
		seq => 0,
		timer => IPC::Run::timer($PostgreSQL::Test::Utils::timeout_default),
	}, $class;
	# stderr is inherited: the proxy's diagnostics go to the test's log
	$self->{h} = IPC::Run::start(
		[ $^X, $PROXY_SCRIPT, $self->{port}, $redis->port ],
		'<', \$self->{in}, '>', \$self->{out}, $self->{timer});
	push @RlockTest::ALL_PROXIES, $self;
	$self->{timer}->start($PostgreSQL::Test::Utils::timeout_default);
	pump_until($self->{h}, $self->{timer}, \$self->{out}, qr/^ready\n/m)
	  or BAIL_OUT("tcp_proxy.pl on port $self->{port} did not start");
	$self->{out} =~ s/^ready\n//m;
	$self->{running} = 1;
	note "proxy on port $self->{port} forwards to Redis on port " . $redis->port;
	return $self;
}

=pod

=item $p->port

The port the proxy listens on.

=item $p->url

redis://127.0.0.1:<proxy port>/0, with the password of the Redis behind it
as RlockTest::Redis->url gives it: what rlock.redis_url is set to
(rediss:// in front of a TLS Redis: the proxy passes TLS through).

=cut

sub port { return $_[0]->{port}; }

sub url
{
	my ($self) = @_;
	my $pw = $self->{redis}->can('password') ? $self->{redis}->password : undef;
	my $auth = defined $pw ? ":$pw@" : '';
	# TLS passes through unchanged (the certificate names 127.0.0.1 too)
	my $scheme =
	  ($self->{redis}->can('tls') && $self->{redis}->tls) ? 'rediss' : 'redis';
	return "$scheme://${auth}127.0.0.1:$self->{port}/0";
}

# Send one command and wait for its acknowledgement; returns the text after
# "ok" (e.g. a count).  Dies if the proxy reports an error or does not
# answer within timeout_default.
sub _command
{
	my ($self, $cmd) = @_;
	croak "proxy on port $self->{port} is not running" unless $self->{running};
	my $seq = ++$self->{seq};
	$self->{in} .= "$seq $cmd\n";
	$self->{timer}->start($PostgreSQL::Test::Utils::timeout_default);
	pump_until($self->{h}, $self->{timer}, \$self->{out},
		qr/^$seq (?:ok|error)\b[^\n]*\n/m)
	  or croak "proxy on port $self->{port} did not acknowledge \"$cmd\"";
	$self->{out} =~ s/^$seq (ok|error)\b ?([^\n]*)\n//m;
	my ($status, $info) = ($1, $2);
	croak "proxy on port $self->{port}: \"$cmd\" failed: $info"
	  if $status eq 'error';
	return $info;
}

=pod

=item $p->stall

Stop forwarding in both directions, as a network partition that silently
drops traffic would: every connection stays open, new connections are
still accepted (a client's connect succeeds) but nothing they send reaches
Redis, and nothing Redis sends reaches a client, until resume.

=item $p->stall_replies

Forward client -> server but hold server -> client: commands reach Redis
and run; their replies are held until resume.

=item $p->resume

Forward everything again, passing on what was held.

=cut

sub stall { $_[0]->_command('stall'); return; }
sub stall_replies { $_[0]->_command('stall_replies'); return; }
sub resume { $_[0]->_command('forward'); return; }

=pod

=item $p->retarget($redis)

Forward the connections accepted from now on to $redis instead (those
open stay where they are): a name that now leads to another server.

=cut

sub retarget
{
	my ($self, $redis) = @_;
	$self->_command('target ' . $redis->port);
	$self->{redis} = $redis;
	return;
}

=pod

=item $p->cut(%opts)

Close every proxied connection at once, both its client and its Redis
side (with a FIN; with reset => 1 with a RST, as a peer that lost the
connection's state would send).  New connections are accepted and
forwarded normally afterwards (in the current mode: cut does not resume a
stalled proxy).  Returns the number of connections closed.

=cut

sub cut
{
	my ($self, %opts) = @_;
	return $self->_command($opts{reset} ? 'cut_reset' : 'cut');
}

=pod

=item $p->lose_reply($redis, $session, $sql, $ran, $what, $meanwhile)

Run $sql in the background in $session (a BackgroundPsql whose node is
pointed at this proxy) so that its command runs in $redis but its reply
never arrives: MONITOR shows the command matching the regexp $ran has run
while the proxy holds every reply, $meanwhile (a code ref, may be undef)
changes what it likes in Redis, then the connection is cut and the proxy
forwards again, so rlock sends the command again on a fresh connection.
Asserts each step (named by $what) and returns what $sql answered:
(stdout, stderr, SQLSTATE), as RlockTest::bg_result.  The session must
wait for replies long enough (rlock.command_timeout, connect_timeout) for
the steps to happen while its first attempt still waits.

=cut

sub lose_reply
{
	my ($self, $redis, $session, $sql, $ran, $what, $meanwhile) = @_;

	# MONITOR lists every command Redis runs (Redis runs one at a time:
	# once it is listed, it has run before any command sent after)
	my ($mon, $monout) = $redis->cli_bg('MONITOR');
	ok(RlockTest::wait_until(sub { $mon->pump_nb; $$monout =~ /^OK/m }, 30),
		"$what: a client monitors Redis");

	# the command runs in Redis; its reply is held
	$self->stall_replies;
	RlockTest::start_bg($session, $sql);
	ok(RlockTest::wait_until(sub { $mon->pump_nb; $$monout =~ $ran }, 30),
		"$what: the command ran in Redis (its reply is held)");
	$mon->kill_kill;

	$meanwhile->() if $meanwhile;

	# the reply is lost: the connection breaks before it arrives, and the
	# command goes again on a fresh connection
	my $closed = $self->cut;
	cmp_ok($closed, '>=', 1, "$what: the connection is cut ($closed closed)");
	$self->resume;
	ok(RlockTest::wait_until(sub { RlockTest::bg_done($session) }, 90),
		"$what: the statement returns");
	return RlockTest::bg_result($session);
}

=pod

=item $p->refuse

Close the listening socket: connecting to $p->port is refused
(ECONNREFUSED) until accept.  Connections already established go on.

=item $p->accept

Listen on the same port again.

=item $p->connections

The number of connections the proxy has open (accepted from clients and
not yet closed).

=cut

sub refuse { $_[0]->_command('refuse'); return; }
sub accept { $_[0]->_command('accept'); return; }
sub connections { return 0 + $_[0]->_command('connections'); }

=pod

=item $p->stop

Stop the proxy process: every connection through it closes, its port is
refused.  Also done at END.

=cut

sub stop
{
	my ($self) = @_;
	return unless $self->{running};
	$self->{running} = 0;
	# "quit", or the end of its stdin, makes the proxy exit; kill it if not
	$self->{in} .= "0 quit\n";
	$self->{timer}->start(10);
	eval {
		pump_until($self->{h}, $self->{timer}, \$self->{out}, qr/^0 ok\n/m);
		$self->{h}->finish;
		1;
	} or $self->{h}->kill_kill;
	note "proxy on port $self->{port} stopped";
	return;
}

=pod

=back

=cut

1;
