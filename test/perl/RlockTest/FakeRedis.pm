
# Copyright (c) 2026, rlock developers

#
# A scripted fake Redis / Sentinel / Cluster node: the hostile peer of
# test/t/030_hostile_peers.pl.  It is the only fake server of the suite
# (the tests otherwise run against real Redis servers).
#
package RlockTest::FakeRedis;

use strict;
use warnings;

use Carp;
use PostgreSQL::Test::Utils ();
use IO::Socket::INET;
use POSIX qw(WNOHANG);
use Time::HiRes qw(usleep);

=pod

=head1 RlockTest::FakeRedis

A fake Redis node in a forked Perl process (its own process group) on a
free loopback port, each accepted connection served by a process of its
own.  It reads RESP (or inline) commands and answers each as the test
scripted it, else as a plain master would:

  AUTH, SELECT, CLIENT ..., READONLY, ASKING, HELLO: +OK (HELLO: an error)
  PING: +PONG;  ROLE: a master without replicas;  INFO: a short bulk
  COMMAND ...: *1 *-1;  EVALSHA, EVAL: nil;  anything else: -ERR

=over

=item RlockTest::FakeRedis->new(%answers)

Start it.  Keys are a command's name, or its first two words ("CLUSTER
SLOTS", "SENTINEL GET-MASTER-ADDR-BY-NAME"), upper case; values are the
raw bytes to answer with, or a code ref called (in the connection's
process) as $code->($socket, \@args), which writes what it wants and
returns; a code ref that returns false closes the connection.  The key
'*', when given, answers every command no other key names (instead of
the defaults above): e.g. RlockTest::FakeRedis::proxy.  Every
command received is appended to a log ($fake->commands reads it).

=cut

sub new
{
	my ($class, %answers) = @_;
	my $listen = IO::Socket::INET->new(
		LocalAddr => '127.0.0.1',
		LocalPort => 0,
		Proto => 'tcp',
		Listen => 64,
		ReuseAddr => 1) or croak "fake Redis: listen: $!";
	my $dir = $PostgreSQL::Test::Utils::tmp_check // '/tmp';
	my $self = bless {
		port => $listen->sockport,
		owner => $$,
		log => "$dir/fake_redis_" . $listen->sockport . '.log',
	}, $class;
	open(my $fh, '>', $self->{log}) or croak "fake Redis: $self->{log}: $!";
	close $fh;
	my $pid = fork();
	croak "fake Redis: fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		setpgrp(0, 0);
		_serve($listen, $self->{log}, \%answers);
		POSIX::_exit(0);
	}
	close $listen;
	$self->{pid} = $pid;
	return $self;
}

sub port { return $_[0]->{port}; }

=pod

=item $fake->commands

The commands received so far, one string each ("PING", "CLUSTER SLOTS" ...),
arguments left out.

=cut

sub commands
{
	my ($self) = @_;
	open(my $fh, '<', $self->{log}) or return ();
	my @c = map { chomp; $_ } <$fh>;
	close $fh;
	return @c;
}

=pod

=item $fake->stop

Kill it and every connection process it started (its process group).

=cut

sub stop
{
	my ($self) = @_;
	return unless $self->{pid} && $self->{owner} == $$;
	kill 'KILL', -$self->{pid};
	waitpid($self->{pid}, 0);
	delete $self->{pid};
	return;
}

sub DESTROY { my ($self) = @_; $self->stop; return; }

=pod

=item Answer builders (each returns a code ref for new)

RlockTest::FakeRedis::endless($head, $unit, $cap): $head, then $unit again
and again as fast as the peer reads, up to $cap bytes in all (so that a
client without bounds fills its memory, yet a broken run cannot take the
machine's), then silence until the peer closes.

RlockTest::FakeRedis::drip($bytes, $pause_s): $bytes one byte at a time, a
pause apart; then silence.

RlockTest::FakeRedis::then_close($bytes): $bytes, then close.

RlockTest::FakeRedis::proxy($port, $mangle): for key '*': each command is
passed on to the Redis at 127.0.0.1:$port (over one connection of its own
per connection served) and its reply is answered, or what
$mangle->(\@args, $reply) returns instead when $mangle is given ($reply:
the reply's raw bytes).  A fake that mostly behaves like a real Redis,
and breaks the protocol where the test says.

=back

=cut

sub endless
{
	my ($head, $unit, $cap) = @_;
	return sub {
		my ($sock) = @_;
		my $chunk = $unit x int(65536 / length($unit) + 1);
		my $sent = 0;
		_write($sock, $head) or return 0;
		while ($sent < $cap)
		{
			_write($sock, $chunk) or return 0;
			$sent += length($chunk);
		}
		_silence($sock);
		return 0;
	};
}

sub drip
{
	my ($bytes, $pause) = @_;
	return sub {
		my ($sock) = @_;
		for my $c (split //, $bytes)
		{
			_write($sock, $c) or return 0;
			usleep(int($pause * 1e6));
		}
		_silence($sock);
		return 0;
	};
}

sub then_close
{
	my ($bytes) = @_;
	return sub {
		my ($sock) = @_;
		_write($sock, $bytes);
		return 0;
	};
}

sub proxy
{
	my ($port, $mangle) = @_;
	my $up;       # (each connection's process has its own)
	my $buf = '';
	return sub {
		my ($sock, $args) = @_;
		if (!$up)
		{
			$up = IO::Socket::INET->new(
				PeerAddr => '127.0.0.1',
				PeerPort => $port,
				Proto => 'tcp') or return 0;
			binmode $up;
		}
		my $cmd = '*' . scalar(@$args) . "\r\n"
		  . join('', map { '$' . length($_) . "\r\n$_\r\n" } @$args);
		_write($up, $cmd) or return 0;
		my $end;
		while (!defined($end = _reply_end($buf, 0)))
		{
			my $n = sysread($up, $buf, 65536, length($buf));
			return 0 unless $n;
		}
		my $reply = substr($buf, 0, $end);
		$buf = substr($buf, $end);
		$reply = $mangle->($args, $reply) if $mangle;
		return _write($sock, $reply);
	};
}

# ---- inside the fake's processes ----

# Where the RESP reply that starts at $pos of $s ends; undef if incomplete.
sub _reply_end
{
	my ($s, $pos) = @_;
	my $nl = index($s, "\r\n", $pos);
	return undef if $nl < 0;
	my $type = substr($s, $pos, 1);
	my $line = substr($s, $pos + 1, $nl - $pos - 1);
	my $next = $nl + 2;
	if ($type eq '$')
	{
		return $next if $line < 0;
		return undef if length($s) < $next + $line + 2;
		return $next + $line + 2;
	}
	if ($type eq '*')
	{
		for (1 .. $line)
		{
			$next = _reply_end($s, $next);
			return undef unless defined $next;
		}
	}
	return $next;
}

sub _write
{
	my ($sock, $data) = @_;
	my $off = 0;
	while ($off < length($data))
	{
		my $n = syswrite($sock, $data, length($data) - $off, $off);
		return 0 unless defined $n && $n > 0;
		$off += $n;
	}
	return 1;
}

# Wait until the peer closes (or 5 minutes pass), reading what it sends.
sub _silence
{
	my ($sock) = @_;
	my $buf;
	local $SIG{ALRM} = sub { POSIX::_exit(0) };
	alarm(300);
	while (sysread($sock, $buf, 65536)) { }
	alarm(0);
	return;
}

sub _serve
{
	my ($listen, $log, $answers) = @_;
	$SIG{PIPE} = 'IGNORE';
	$SIG{CHLD} = 'IGNORE';
	while (1)
	{
		my $c = $listen->accept or next;
		my $pid = fork();
		if (defined $pid && $pid == 0)
		{
			close $listen;
			_connection($c, $log, $answers);
			POSIX::_exit(0);
		}
		close $c;
	}
	return;
}

sub _log
{
	my ($log, $line) = @_;
	open(my $fh, '>>', $log) or return;
	print $fh "$line\n";
	close $fh;
	return;
}

# Read one command from $buf (RESP array or inline); undef if incomplete.
sub _parse
{
	my ($bufref) = @_;
	my $s = $$bufref;
	if ($s =~ /^\*/)
	{
		return undef unless $s =~ /^\*(-?\d+)\r\n/;
		my $n = $1;
		my $pos = length("*$n\r\n");
		my @args;
		for (1 .. $n)
		{
			my $rest = substr($s, $pos);
			return undef unless $rest =~ /^\$(\d+)\r\n/;
			my $len = $1;
			my $hl = length("\$$len\r\n");
			return undef if length($rest) < $hl + $len + 2;
			push @args, substr($rest, $hl, $len);
			$pos += $hl + $len + 2;
		}
		$$bufref = substr($s, $pos);
		return \@args;
	}
	my $nl = index($s, "\n");
	return undef if $nl < 0;
	my $line = substr($s, 0, $nl);
	$$bufref = substr($s, $nl + 1);
	$line =~ s/\r$//;
	return [ split /\s+/, $line ];
}

sub _default
{
	my ($name) = @_;
	return "+OK\r\n"
	  if $name =~ /^(AUTH|SELECT|CLIENT|READONLY|ASKING|UNWATCH)$/;
	return "+PONG\r\n" if $name eq 'PING';
	return "*3\r\n\$6\r\nmaster\r\n:0\r\n*0\r\n" if $name eq 'ROLE';
	if ($name eq 'INFO')
	{
		my $info = "# Server\r\nredis_version:7.0.0\r\n";
		return '$' . length($info) . "\r\n$info\r\n";
	}
	return "*1\r\n*-1\r\n" if $name eq 'COMMAND';
	return "\$-1\r\n" if $name =~ /^(EVALSHA|EVAL)$/;
	return ":0\r\n" if $name eq 'WAIT';
	return "-ERR unknown command '$name'\r\n";
}

sub _connection
{
	my ($sock, $log, $answers) = @_;
	my $buf = '';
	binmode $sock;
	while (1)
	{
		my $cmd;
		while (!defined($cmd = _parse(\$buf)))
		{
			my $n = sysread($sock, $buf, 65536, length($buf));
			return unless $n;
		}
		next unless @$cmd;
		my $name = uc $cmd->[0];
		my $two = @$cmd > 1 ? "$name " . uc($cmd->[1]) : $name;
		_log($log, $two);
		my $a = $answers->{$two} // $answers->{$name} // $answers->{'*'}
		  // _default($name);
		if (ref $a eq 'CODE')
		{
			return unless $a->($sock, $cmd);
		}
		else
		{
			return unless _write($sock, $a);
		}
	}
	return;
}

1;
