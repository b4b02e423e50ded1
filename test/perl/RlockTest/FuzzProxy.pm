
# Copyright (c) 2026, rlock developers

#
# A mutating RESP proxy: the reply fuzzer of test/t/053_reply_fuzz.pl.
# It sits between PostgreSQL and a real Redis, parses every reply Redis
# gives and, with a seeded generator, replaces some of them with a mutated
# reply (another type, an error word rlock parses, a truncated or extra
# reply, a huge or negative length or count, deep nesting).
#
package RlockTest::FuzzProxy;

use strict;
use warnings;

use Carp;
use Errno qw(EAGAIN EWOULDBLOCK EINTR);
use IO::Select;
use IO::Socket::INET;
use POSIX qw(WNOHANG);
use Socket qw(AF_UNIX SOCK_STREAM PF_UNSPEC);

use RlockTest::FuzzMutate;

=pod

=head1 RlockTest::FuzzProxy

A loopback TCP proxy in a forked Perl process, in front of a real Redis
(an RlockTest::Redis).  Commands pass unchanged; each reply Redis gives is
parsed (RESP2) and, with probability rate, replaced by a mutation of it,
chosen by a generator seeded with "seed:round:connection:exchange" — the
same workload with the same seed meets the same mutations (connections
are numbered in the order they are accepted within a round, so a
background worker reconnecting at another moment may shift them).  Every
address a mutated reply names (MOVED, ASK) is 127.0.0.1 and a port the
test chose: never another host.

  my $fz = RlockTest::FuzzProxy->new($redis, seed => 42, dead_port => $p);
  $fz->url;                   # what rlock.redis_url is set to
  $fz->round(3);              # number the connections from 1 again
  $fz->rate(0.2);             # mutate a fifth of the replies (0: none)
  my %s = $fz->stats;         # exchanges, mutated, kind.<k> counts
  my @log = $fz->mutations(3);   # "r3 c1 #12 EVALSHA error RLOCKKIND"
  $fz->stop;

=over

=item RlockTest::FuzzProxy->new($redis, %opts)

Start it on a free loopback port.  Options: seed (required), rate
(default 0), dead_port (a loopback port nothing listens on, named in
redirections besides the proxy's own), log (the file mutations are
listed in).

=cut

sub new
{
	my ($class, $redis, %opts) = @_;
	my $listen = IO::Socket::INET->new(
		LocalAddr => '127.0.0.1',
		LocalPort => 0,
		Proto => 'tcp',
		Listen => 64,
		ReuseAddr => 1) or croak "fuzz proxy: listen: $!";
	my $dir = $PostgreSQL::Test::Utils::tmp_check // '/tmp';
	socketpair(my $ctl, my $child_ctl, AF_UNIX, SOCK_STREAM, PF_UNSPEC)
	  or croak "fuzz proxy: socketpair: $!";
	my $self = bless {
		redis => $redis,
		port => $listen->sockport,
		owner => $$,
		log => $opts{log} // "$dir/fuzz_proxy_" . $listen->sockport . '.log',
		ctl => $ctl,
	}, $class;
	open(my $fh, '>', $self->{log}) or croak "fuzz proxy: $self->{log}: $!";
	close $fh;
	my %cfg = (
		seed => $opts{seed} // croak('fuzz proxy: a seed is needed'),
		rate => $opts{rate} // 0,
		target => $redis->port,
		port => $self->{port},
		dead_port => $opts{dead_port} // $self->{port},
		kinds => $opts{kinds},
		log => $self->{log});
	my $pid = fork();
	croak "fuzz proxy: fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		close $ctl;
		eval { _serve($listen, $child_ctl, \%cfg); };
		print STDERR "# fuzz proxy: $@" if $@;
		POSIX::_exit(0);
	}
	close $listen;
	close $child_ctl;
	$self->{pid} = $pid;
	$self->{ctl}->autoflush(1);
	return $self;
}

=pod

=item $fz->port, $fz->url

Its port; redis://[:password@]127.0.0.1:port/0 for rlock.redis_url.

=cut

sub port { return $_[0]->{port}; }

sub url
{
	my ($self) = @_;
	my $pw = $self->{redis}->password;
	my $auth = defined $pw ? ":$pw@" : '';
	return "redis://${auth}127.0.0.1:$self->{port}/0";
}

# One control line, its answer (dies when the proxy is gone).
sub _control
{
	my ($self, $line) = @_;
	my $ctl = $self->{ctl};
	print $ctl "$line\n" or croak "fuzz proxy: control: $!";
	my $answer = <$ctl>;
	croak "fuzz proxy: no answer to \"$line\"" unless defined $answer;
	chomp $answer;
	return $answer;
}

=pod

=item $fz->rate($p), $fz->round($n), $fz->lies($bool)

Mutate each reply from now on with probability $p.  With lies(1), also
into well-formed answers some command does get (nil, 0, a script's own
RLOCK* refusal: marked "(lie)" in the log), which no client can tell from
the truth; off at the start.  Start round $n:
connections accepted from now on are numbered from 1 in it.  Both take
effect before they return.

=item $fz->stats

(exchanges => replies seen, mutated => replies mutated, 'kind.K' =>
mutations of kind K), since the start.

=item $fz->mutations($round)

The mutations of round $round (every round when undef), one line each.

=cut

sub rate { $_[0]->_control("rate $_[1]"); return; }
sub lies { $_[0]->_control("lies $_[1]"); return; }

=pod

=item $fz->once($pid, $bytes), $fz->once_clear

The next command (not a handshake's: AUTH, SELECT, ROLE, CLIENT, INFO,
WAIT) of the connection named rlock:$pid does not reach Redis: the proxy
answers $bytes instead (in its turn), as a Redis that refuses it before
running it would.  Once.  once_clear forgets it if it was not used;
returns whether it was.

=cut

sub once
{
	my ($self, $pid, $bytes) = @_;
	$self->_control("once rlock:$pid " . unpack('H*', $bytes));
	return;
}

sub once_clear { return $_[0]->_control('once_clear') eq 'ok used'; }
sub round { $_[0]->_control("round $_[1]"); return; }

sub stats
{
	my ($self) = @_;
	return map { split /=/, $_, 2 } split / /, $self->_control('stats');
}

sub mutations
{
	my ($self, $round) = @_;
	open(my $fh, '<', $self->{log}) or return ();
	my @l = grep { !defined $round || /^r$round / } map { chomp; $_ } <$fh>;
	close $fh;
	return @l;
}

=pod

=item $fz->stop

Stop it (every connection through it closes).  Also done at destruction.

=back

=cut

sub stop
{
	my ($self) = @_;
	return unless $self->{pid} && $self->{owner} == $$;
	kill 'KILL', $self->{pid};
	waitpid($self->{pid}, 0);
	delete $self->{pid};
	return;
}

sub DESTROY { my ($self) = @_; $self->stop; return; }

# ---- the proxy process ----

my %cfg;
my ($round, $accepted, $exchanges, $mutated) = (0, 0, 0, 0);
my %kinds;
my $logfh;
my ($once, $once_used) = (undef, 0);    # [client name, bytes]

# parsing, writing and mutating replies: RlockTest::FuzzMutate
sub _rng { return RlockTest::FuzzMutate::_rng(@_); }
sub _parse { return RlockTest::FuzzMutate::_parse(@_); }
sub _mutate { return RlockTest::FuzzMutate::_mutate(@_); }

sub _close_conn
{
	my ($cn) = @_;
	for my $side (qw(c s))
	{
		close($cn->{$side}) if $cn->{$side};
		$cn->{$side} = undef;
	}
	$cn->{dead} = 1;
	return;
}

# Replies complete in the connection's buffer from Redis: each passed on,
# or mutated.
sub _replies
{
	my ($cn) = @_;
	while (!$cn->{closing} && length $cn->{s2c})
	{
		if ($cn->{raw})
		{
			$cn->{out} .= $cn->{s2c};
			$cn->{s2c} = '';
			last;
		}
		my ($n, $next) = _parse(\$cn->{s2c}, 0, 0);
		last unless defined $n;
		if (!ref $n)
		{
			# not RESP2 (cannot be, from Redis): pass on from here
			$cn->{raw} = 1;
			next;
		}
		my $bytes = substr($cn->{s2c}, 0, $next, '');
		my $k = ++$cn->{n};
		$exchanges++;
		my $verb = shift(@{ $cn->{verbs} }) // '?';
		$verb = $verb->[0] if ref $verb;
		my $rng = _rng("$cfg{seed}:$cn->{round}:$cn->{ord}:$k");
		if ($cfg{rate} > 0 && $rng->() < $cfg{rate})
		{
			my ($out, $close, $desc, $kind) = _mutate($rng, $n);
			$mutated++;
			$kinds{$kind}++;
			print $logfh "r$cn->{round} c$cn->{ord} #$k $verb $desc"
			  . ($close ? ' +close' : '') . "\n";
			$cn->{out} .= $out;
			$cn->{closing} = 1 if $close;
		}
		else
		{
			$cn->{out} .= $bytes;
		}
		_refusals($cn);
	}
	return;
}

# The refusals due next, in their commands' order.
sub _refusals
{
	my ($cn) = @_;
	while (@{ $cn->{verbs} } && ref $cn->{verbs}[0])
	{
		$cn->{out} .= $cn->{verbs}[0][1];
		shift @{ $cn->{verbs} };
	}
	return;
}

# Commands from the client, passed on to Redis one by one, their verbs
# kept for the log (first two words for CLIENT, SCRIPT, CLUSTER ...); the
# command "once" names is not: Redis refuses it, as the proxy answers.
sub _commands
{
	my ($cn) = @_;
	while (length $cn->{cmdbuf})
	{
		my ($n, $next) = _parse(\$cn->{cmdbuf}, 0, 0);
		if (defined $n && (!ref $n || $n->[0] ne '*' || !ref $n->[1]))
		{
			# not a command array (none of rlock's): pass on as it is
			$cn->{c2s} .= $cn->{cmdbuf};
			$cn->{cmdbuf} = '';
			last;
		}
		last unless defined $n;
		my $bytes = substr($cn->{cmdbuf}, 0, $next, '');
		my @w = map { $_->[1] // '' } @{ $n->[1] };
		my $verb = uc($w[0] // '?');
		$verb .= '_' . uc($w[1] // '')
		  if $verb =~ /^(CLIENT|SCRIPT|CLUSTER|CONFIG|SENTINEL)$/;
		$cn->{name} = $w[2] if $verb eq 'CLIENT_SETNAME';
		# a script's first key names the lock it is about
		$verb .= "($w[3])" if $verb =~ /^EVAL/ && ($w[2] // 0) =~ /^[1-9]/;
		if (defined $once && defined $cn->{name} && $cn->{name} eq $once->[0]
			&& $verb !~ /^(AUTH|SELECT|ROLE|CLIENT_.*|INFO|WAIT)$/)
		{
			print $logfh "r$cn->{round} c$cn->{ord} $verb refused "
			  . ($once->[1] =~ s/\r\n/ /gr) . "\n";
			push @{ $cn->{verbs} }, [ $verb, $once->[1] ];
			$once = undef;
			$once_used++;
			_refusals($cn);
			next;
		}
		$cn->{c2s} .= $bytes;
		push @{ $cn->{verbs} }, $verb;
	}
	return;
}

sub _fill
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

sub _flush
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

sub _control_line
{
	my ($ctl, $line) = @_;
	my $answer = 'ok';
	if ($line =~ /^rate ([\d.]+)$/) { $cfg{rate} = $1; }
	elsif ($line =~ /^lies ([01])$/) { $cfg{lies} = $1; }
	elsif ($line =~ /^round (\d+)$/) { ($round, $accepted) = ($1, 0); }
	elsif ($line =~ /^once (\S+) ([0-9a-f]+)$/)
	{
		$once = [ $1, pack('H*', $2) ];
	}
	elsif ($line eq 'once_clear')
	{
		$answer = 'ok ' . (defined $once ? 'unused' : 'used');
		$once = undef;
	}
	elsif ($line eq 'stats')
	{
		$answer = "exchanges=$exchanges mutated=$mutated"
		  . join('', map { " kind.$_=$kinds{$_}" } sort keys %kinds);
	}
	else { $answer = "error $line"; }
	syswrite($ctl, "$answer\n");
	return;
}

sub _serve
{
	my ($listen, $ctl, $c) = @_;
	%cfg = %$c;
	$RlockTest::FuzzMutate::CFG = \%cfg;
	$SIG{PIPE} = 'IGNORE';
	open($logfh, '>>', $cfg{log}) or die "$cfg{log}: $!";
	$logfh->autoflush(1);
	$listen->blocking(0);
	my @conns;
	my $ctlbuf = '';
	while (1)
	{
		@conns = grep { !$_->{dead} } @conns;
		my $rsel = IO::Select->new($listen, $ctl);
		my $wsel = IO::Select->new;
		for my $cn (@conns)
		{
			$rsel->add($cn->{c}) unless $cn->{closing};
			$rsel->add($cn->{s}) unless $cn->{closing};
			$wsel->add($cn->{s}) if length $cn->{c2s};
			$wsel->add($cn->{c}) if length $cn->{out};
		}
		my ($r, $w) = IO::Select->select($rsel, $wsel, undef, 1);
		$r //= [];
		$w //= [];
		my %readable = map { ($_ => 1) } @$r;
		if ($readable{$ctl})
		{
			my $n = sysread($ctl, my $chunk, 4096);
			POSIX::_exit(0) if defined $n && $n == 0;    # the test is gone
			$ctlbuf .= $chunk if $n;
			_control_line($ctl, $1) while $ctlbuf =~ s/^([^\n]*)\n//;
		}
		if ($readable{$listen})
		{
			if (my $sock = $listen->accept)
			{
				my $s = IO::Socket::INET->new(
					PeerAddr => '127.0.0.1',
					PeerPort => $cfg{target},
					Proto => 'tcp',
					Timeout => 5);
				if ($s)
				{
					$sock->blocking(0);
					$s->blocking(0);
					push @conns, {
						c => $sock, s => $s, c2s => '', s2c => '', out => '',
						cmdbuf => '', verbs => [], n => 0,
						round => $round, ord => ++$accepted };
				}
				else { close $sock; }
			}
		}
		for my $cn (@conns)
		{
			next if $cn->{dead};
			if (!$cn->{closing} && $readable{ $cn->{c} })
			{
				if (!_fill($cn->{c}, \$cn->{cmdbuf}))
				{
					_close_conn($cn);
					next;
				}
				_commands($cn);
			}
			if (!$cn->{closing} && $readable{ $cn->{s} })
			{
				if (!_fill($cn->{s}, \$cn->{s2c}))
				{
					$cn->{closing} = 1;
				}
				_replies($cn);
			}
			if (length $cn->{c2s} && $cn->{s})
			{
				_flush($cn->{s}, \$cn->{c2s}) or $cn->{closing} = 1;
			}
			if (length $cn->{out})
			{
				_flush($cn->{c}, \$cn->{out}) or $cn->{out} = '';
			}
			_close_conn($cn) if $cn->{closing} && !length $cn->{out};
		}
	}
}

1;
