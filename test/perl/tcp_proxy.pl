#!/usr/bin/perl
# Copyright (c) 2026, rlock developers
#
# tcp_proxy.pl -- a loopback TCP proxy whose link can be stalled, cut and
# refused on command; spawned by RlockTest::Proxy (test/perl/RlockTest/Proxy.pm),
# which documents what each command means.
#
#   perl tcp_proxy.pl LISTEN_PORT TARGET_PORT
#
# Listens on 127.0.0.1:LISTEN_PORT and forwards every accepted connection to
# 127.0.0.1:TARGET_PORT.  Prints "ready" on stdout once it listens, then
# reads one command a line on stdin, "<seq> <command>", and answers on
# stdout "<seq> ok [info]" or "<seq> error <why>" once the command has taken
# effect.  Commands: forward, stall, stall_replies, cut, cut_reset, refuse,
# accept, target PORT, connections, quit.  It exits at "quit" and when stdin reaches EOF
# (its parent is gone).  Diagnostics go to stderr (the test's log), prefixed
# with "# tcp_proxy".
#
# Data is "held" simply by not reading it: it waits in the kernel's socket
# buffers (and in the proxy's own buffers for what was read before the
# command) until forwarding resumes, as across a network partition that
# heals.  Only core Perl modules.
use strict;
use warnings;

use Errno qw(EAGAIN EWOULDBLOCK EINTR);
use IO::Handle;
use IO::Select;
use IO::Socket::INET;
use Socket qw(SOL_SOCKET SO_LINGER);

my ($listen_port, $target_port) = @ARGV;
die "usage: tcp_proxy.pl LISTEN_PORT TARGET_PORT\n"
  unless defined $target_port
  && $listen_port =~ /^\d+$/
  && $target_port =~ /^\d+$/;

my $HOST = '127.0.0.1';
my $MAX_BUFFER = 1 << 20;    # stop reading a side while this much waits
$SIG{PIPE} = 'IGNORE';
STDOUT->autoflush(1);

sub diag_line { print STDERR "# tcp_proxy :$listen_port: @_\n"; }

# 'forward': both directions; 'stall': neither (connections stay open, new
# ones are accepted); 'stall_replies': client -> server only.
my $mode = 'forward';
my $listener;
my @conns;    # { c, s (undef until connected upstream), c2s, s2c, c_eof, s_eof }

sub listen_socket
{
	return IO::Socket::INET->new(
		LocalAddr => $HOST,
		LocalPort => $listen_port,
		Proto => 'tcp',
		Listen => 128,
		ReuseAddr => 1,
		Blocking => 0);
}

sub c2s_allowed { return $mode ne 'stall'; }
sub s2c_allowed { return $mode eq 'forward'; }

# Connect a connection upstream (when client -> server forwarding is
# allowed).  Fails like a refused connection: the client side is closed.
sub connect_upstream
{
	my ($cn) = @_;
	my $s = IO::Socket::INET->new(
		PeerAddr => $HOST,
		PeerPort => $target_port,
		Proto => 'tcp',
		Timeout => 5);
	if (!$s)
	{
		diag_line("cannot connect to port $target_port: $!");
		close_conn($cn);
		return;
	}
	$s->blocking(0);
	$cn->{s} = $s;
	return;
}

sub close_conn
{
	my ($cn, $reset) = @_;
	for my $side (qw(c s))
	{
		my $sock = $cn->{$side} or next;
		# SO_LINGER 0: close() sends a RST instead of a FIN
		setsockopt($sock, SOL_SOCKET, SO_LINGER, pack('ii', 1, 0))
		  if $reset;
		close($sock);
		$cn->{$side} = undef;
	}
	$cn->{dead} = 1;
	return;
}

# Write as much of a buffer as the socket takes; false on a write error.
sub flush_to
{
	my ($sock, $bufref) = @_;
	while (length $$bufref)
	{
		my $n = syswrite($sock, $$bufref);
		if (!defined $n)
		{
			return 1 if $! == EAGAIN || $! == EWOULDBLOCK || $! == EINTR;
			return 0;
		}
		substr($$bufref, 0, $n, '');
	}
	return 1;
}

# Read what a socket has into a buffer; returns 0 at EOF or error.
sub fill_from
{
	my ($sock, $bufref) = @_;
	my $n = sysread($sock, my $chunk, 65536);
	if (!defined $n)
	{
		return 1 if $! == EAGAIN || $! == EWOULDBLOCK || $! == EINTR;
		return 0;
	}
	return 0 if $n == 0;
	$$bufref .= $chunk;
	return 1;
}

sub command
{
	my ($line) = @_;
	my ($seq, $cmd, $arg) = $line =~ /^(\S+)\s+(\S+)(?:\s+(\S+))?/ or return;
	my $reply = 'ok';
	if ($cmd eq 'forward' || $cmd eq 'stall' || $cmd eq 'stall_replies')
	{
		$mode = $cmd;
	}
	elsif ($cmd eq 'cut' || $cmd eq 'cut_reset')
	{
		my $n = grep { !$_->{dead} } @conns;
		close_conn($_, $cmd eq 'cut_reset') for @conns;
		@conns = ();
		$reply = "ok $n";
	}
	elsif ($cmd eq 'refuse')
	{
		if ($listener)
		{
			close($listener);
			$listener = undef;
		}
	}
	elsif ($cmd eq 'accept')
	{
		$listener //= listen_socket()
		  or $reply = "error cannot listen on port $listen_port: $!";
	}
	elsif ($cmd eq 'target' && defined $arg && $arg =~ /^\d+$/)
	{
		$target_port = $arg;    # for the connections made from now on
	}
	elsif ($cmd eq 'connections')
	{
		$reply = 'ok ' . scalar(grep { !$_->{dead} } @conns);
	}
	elsif ($cmd eq 'quit')
	{
		print "$seq ok\n";
		exit 0;
	}
	else
	{
		$reply = "error unknown command $cmd";
	}
	print "$seq $reply\n";
	diag_line("$cmd -> $reply") unless $cmd eq 'connections';
	return;
}

$listener = listen_socket()
  or die "tcp_proxy: cannot listen on $HOST:$listen_port: $!\n";
print "ready\n";

my $stdin_buf = '';
STDIN->blocking(0);

while (1)
{
	# Connections waiting for their upstream connection get it as soon as
	# client -> server forwarding is allowed.
	if (c2s_allowed())
	{
		connect_upstream($_) for grep { !$_->{dead} && !$_->{s} } @conns;
	}
	@conns = grep { !$_->{dead} } @conns;

	my $rsel = IO::Select->new(\*STDIN);
	my $wsel = IO::Select->new;
	$rsel->add($listener) if $listener;
	for my $cn (@conns)
	{
		if (c2s_allowed() && $cn->{s})
		{
			$rsel->add($cn->{c})
			  if !$cn->{c_eof} && length($cn->{c2s}) < $MAX_BUFFER;
			$wsel->add($cn->{s}) if length $cn->{c2s};
		}
		if (s2c_allowed() && $cn->{s})
		{
			$rsel->add($cn->{s})
			  if !$cn->{s_eof} && length($cn->{s2c}) < $MAX_BUFFER;
			$wsel->add($cn->{c}) if length $cn->{s2c};
		}
	}

	my ($r, $w) = IO::Select->select($rsel, $wsel, undef);
	next unless defined $r || defined $w;    # EINTR
	$r //= [];
	$w //= [];

	for my $fh (@$r)
	{
		if ($fh == \*STDIN)
		{
			my $n = sysread(STDIN, my $chunk, 4096);
			next if !defined $n && ($! == EAGAIN || $! == EINTR);
			exit 0 if !$n;    # the parent is gone
			$stdin_buf .= $chunk;
			while ($stdin_buf =~ s/^([^\n]*)\n//)
			{
				command($1);
			}
		}
		elsif ($listener && $fh == $listener)
		{
			my $c = $listener->accept or next;
			$c->blocking(0);
			my $cn = { c => $c, c2s => '', s2c => '' };
			push @conns, $cn;
			connect_upstream($cn) if c2s_allowed();
		}
	}

	my %readable = map { ($_ => 1) } @$r;
	for my $cn (@conns)
	{
		next if $cn->{dead};
		if ($cn->{c} && $readable{ $cn->{c} })
		{
			$cn->{c_eof} = 1 unless fill_from($cn->{c}, \$cn->{c2s});
		}
		if ($cn->{s} && $readable{ $cn->{s} })
		{
			$cn->{s_eof} = 1 unless fill_from($cn->{s}, \$cn->{s2c});
		}
		if (c2s_allowed() && $cn->{s} && length $cn->{c2s})
		{
			flush_to($cn->{s}, \$cn->{c2s}) or $cn->{s_eof} = $cn->{c_eof} = 1;
		}
		if (s2c_allowed() && $cn->{s} && length $cn->{s2c})
		{
			flush_to($cn->{c}, \$cn->{s2c}) or $cn->{s_eof} = $cn->{c_eof} = 1;
		}
		# A side that ended closes the pair once what it sent has been
		# passed on (or can never be: the other side ended too).
		if (($cn->{c_eof} && (!length $cn->{c2s} || $cn->{s_eof}))
			|| ($cn->{s_eof} && (!length $cn->{s2c} || $cn->{c_eof})))
		{
			close_conn($cn);
		}
	}
}
