
# Copyright (c) 2026, rlock developers

#
# The harness's own small Redis client: RESP over TCP to a loopback node,
# and a cluster client's way of following MOVED and ASK.
#
package RlockTest::Resp;

use strict;
use warnings;

use IO::Socket::INET;
use Socket qw(SOL_SOCKET SO_RCVTIMEO SO_SNDTIMEO);
use Time::HiRes qw(time usleep);

=pod

=head1 RlockTest::Resp

A small RESP (Redis protocol) client for the harness, over TCP to a node
on 127.0.0.1: no redis-cli process to start, so it is quick to poll, and
it follows ASK redirections the same way on every server version
(redis-cli -c sends ASKING only from 7.0 on).  RlockTest::Cluster talks to
its nodes with it.

  my $r = RlockTest::Resp->connect($port, password => 'pw')
    or die $@;                                   # AUTH done
  my ($v, $err) = $r->request('CLUSTER', 'KEYSLOT', 'job1');
  $r->close;

  my ($v, $err) = RlockTest::Resp::command($port, $password, 'CLUSTER', 'NODES');
  print RlockTest::Resp::as_text($v);            # as redis-cli prints it

  my ($v, $err) = RlockTest::Resp::cluster_request(
      route => sub { ($port_of_the_master) },    # or (undef, why not)
      password => $password, timeout_s => 10,
      command => [ 'EVAL', $script, 1, $key ]);

Replies are decoded as Perl values: a status or an integer as a scalar, a
bulk string as a scalar (nil as undef), an array as an array ref (nil as
undef; an error inside an array as its text).  A request returns
($value, undef), or (undef, "the error reply's text").

=over

=item RlockTest::Resp->connect($port, %opts)

A connection to 127.0.0.1:$port, or undef with the reason in $@.  With
password => 'x' it sends AUTH first (an error reply to it: undef, the
reason in $@).  Reads and writes time out after timeout_s => seconds
(default 5; fractional is fine).

=cut

sub connect
{
	my ($class, $port, %opts) = @_;
	my $timeout_s = $opts{timeout_s} // 5;
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
	my $c = bless { sock => $sock, buf => '', port => $port }, $class;
	if (defined $opts{password})
	{
		my ($v, $err) = eval { $c->request('AUTH', $opts{password}) };
		if (!defined $v || defined $err)
		{
			$@ = "AUTH at 127.0.0.1:$port: " . ($err // $@);
			return undef;
		}
	}
	return $c;
}

=pod

=item $r->request(@command)

Send one command and read its reply: ($value, $error) as above.  Dies
(with a message ending in a newline) when the connection fails: a write
or a read that fails or times out, the connection closed, a reply that is
not RESP.

=cut

sub request
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

=pod

=item $r->close

Close the connection.

=cut

sub close
{
	my ($c) = @_;
	CORE::close($c->{sock});
	return;
}

# More bytes from the socket into buf; dies when there are none.
sub _fill
{
	my ($c) = @_;
	my $n = sysread($c->{sock}, my $chunk, 65536);
	die "read from 127.0.0.1:$c->{port}: " . (defined $n ? 'connection closed' : $!) . "\n"
	  unless $n;
	$c->{buf} .= $chunk;
	return;
}

# The next line of the reply, without its CRLF.
sub _line
{
	my ($c) = @_;
	my $i;
	_fill($c) while ($i = index($c->{buf}, "\r\n")) < 0;
	my $l = substr($c->{buf}, 0, $i);
	substr($c->{buf}, 0, $i + 2) = '';
	return $l;
}

# The next reply, decoded: ($value, $error).
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

=pod

=item RlockTest::Resp::command($port, $password, @command)

One command on a connection of its own (AUTH first unless $password is
undef), closed after the reply: ($value, $error) as request, or
(undef, reason) when the node cannot be reached or the connection fails.

=cut

sub command
{
	my ($port, $password, @cmd) = @_;
	my $c = RlockTest::Resp->connect($port, password => $password)
	  or return (undef, $@);
	my @r = eval { $c->request(@cmd) };
	$c->close;
	return @r ? @r : (undef, $@ =~ s/\n$//r);
}

=pod

=item RlockTest::Resp::as_text($value)

A reply as redis-cli prints it without a tty: nil as '', an integer as
its digits, an array one element a line.

=cut

sub as_text
{
	my ($v) = @_;
	return '' unless defined $v;
	return join("\n", map { as_text($_) } @$v) if ref $v eq 'ARRAY';
	return $v;
}

=pod

=item RlockTest::Resp::cluster_request(%opts)

Run one command the way a cluster client does, each attempt on a
connection of its own: to the port route returns, then a MOVED reply sends
it to the node named, an ASK reply to the node named preceded by ASKING on
the same connection; TRYAGAIN, CLUSTERDOWN, LOADING, a node that cannot be
reached, a connection lost and a route that names no node are retried
every 50 ms (asking route again) until timeout_s passes; at most 100
attempts.  Returns the last ($value, $error): error is the error reply's
text, or why the node could not be asked.  Options:

=over

=item command => [...]

The command.

=item route => sub { ... }

Where to send it first (and after a retry): returns the port of the node
that serves the key, or (undef, why none does).

=item password => 'x'

AUTH on every connection (default: none).

=item timeout_s => s [10]

How long to retry.

=back

=cut

sub cluster_request
{
	my (%o) = @_;
	my @cmd = @{ $o{command} };
	my $deadline = time() + ($o{timeout_s} // 10);
	my ($port, $asking, $why);
	my ($v, $err);
	for (my $hops = 0; $hops < 100; $hops++)
	{
		($port, $why) = $o{route}->() if !defined $port;
		if (defined $port)
		{
			my $c = RlockTest::Resp->connect($port, password => $o{password});
			if ($c)
			{
				my @r = eval {
					if ($asking)
					{
						my (undef, $e) = $c->request('ASKING');
						die "ASKING: $e\n" if defined $e;
					}
					$c->request(@cmd);
				};
				$c->close;
				($v, $err) = @r ? @r : (undef, $@ =~ s/\n$//r);
				$asking = 0;
				if (!@r)
				{
					# connection lost: ask the route again
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
			$err = $why // 'no node to ask';
		}
		last if time() >= $deadline;
		usleep(50_000);
		$port = undef;
	}
	return ($v, $err);
}

=pod

=back

=cut

1;
