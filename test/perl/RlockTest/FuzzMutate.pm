
# Copyright (c) 2026, rlock developers

#
# The reply fuzzer's mutations (RlockTest::FuzzProxy, test/t/053_reply_fuzz.pl):
# a small RESP2 parser and writer, a seeded generator per exchange, and
# the mutations of one reply.  Runs in the proxy's process.
#
package RlockTest::FuzzMutate;

use strict;
use warnings;

use Digest::MD5 qw(md5);

# The proxy's settings, shared: port, dead_port (the ports a redirection
# may name), kinds (undef: all), lies.  Set by the proxy process.
our $CFG = {};

# A small generator per exchange: xorshift32 seeded from an MD5 of its
# name, so a decision depends on the seed and where it is made only.
sub _rng
{
	my ($name) = @_;
	my $s = unpack('N', md5($name)) || 1;
	return sub {
		$s ^= ($s << 13) & 0xffffffff;
		$s ^= $s >> 17;
		$s ^= ($s << 5) & 0xffffffff;
		return $s / 4294967296;
	};
}

sub _pick { my ($rng, @a) = @_; return $a[ int($rng->() * @a) ]; }

# One RESP2 reply parsed from $$buf at $pos: ([type, value], next pos),
# or () when incomplete, or ('bad') when it is no RESP.
sub _parse
{
	my ($buf, $pos, $depth) = @_;
	my $eol = index($$buf, "\r\n", $pos);
	return () if $eol < 0;
	my $t = substr($$buf, $pos, 1);
	my $line = substr($$buf, $pos + 1, $eol - $pos - 1);
	my $next = $eol + 2;
	return ([ $t, $line ], $next) if $t eq '+' || $t eq '-' || $t eq ':';
	return ('bad') unless $line =~ /^-?\d+$/ && $depth < 64;
	if ($t eq '$')
	{
		return ([ '$', undef ], $next) if $line < 0;
		return () if length($$buf) < $next + $line + 2;
		return ([ '$', substr($$buf, $next, $line) ], $next + $line + 2);
	}
	if ($t eq '*')
	{
		return ([ '*', undef ], $next) if $line < 0;
		my @el;
		for (1 .. $line)
		{
			my ($e, $p) = _parse($buf, $next, $depth + 1);
			return () unless defined $e;
			return ('bad') unless ref $e;
			push @el, $e;
			$next = $p;
		}
		return ([ '*', \@el ], $next);
	}
	return ('bad');
}

sub _ser
{
	my ($n) = @_;
	my ($t, $v) = @$n;
	return "$t$v\r\n" if $t eq '+' || $t eq '-' || $t eq ':';
	return "$t-1\r\n" unless defined $v;
	return "\$" . length($v) . "\r\n$v\r\n" if $t eq '$';
	return '*' . scalar(@$v) . "\r\n" . join('', map { _ser($_) } @$v);
}

# Every error word rlock looks for in a reply (grep src/ for them), and
# texts to follow it.
our @WORDS = qw(RLOCKKIND RLOCKRANGE RLOCKNOTLOCK NOSCRIPT MOVED ASK TRYAGAIN
  CLUSTERDOWN LOADING READONLY WRONGTYPE NOPERM NOAUTH WRONGPASS BUSY
  MASTERDOWN OOM ERR NOSUB EXECABORT NOREPLICAS RLOCK);

# The words by which Redis (or a script of rlock's, before it writes)
# refuses a command it did not run: rlock takes an error carrying one, at
# its start or wrapped in a script error's text, as "nothing was written"
# (rconn_error_may_have_applied, src/redis/connection_error.c), as it must
# (NOSCRIPT is answered by sending the script, MOVED by following it).  In
# place of a reply to a command that ran, such an error is a lie no client
# can tell from the truth: Redis never answers a command it ran with one.
our @NOT_RUN = qw(NOSCRIPT RLOCKKIND RLOCKRANGE RLOCKNOTLOCK WRONGTYPE NOAUTH
  WRONGPASS NOPERM READONLY LOADING BUSY MASTERDOWN MOVED ASK TRYAGAIN
  CLUSTERDOWN CROSSSLOT OOM RLOCK);
my %NOT_RUN = map { ($_ => 1) } @NOT_RUN;

sub _error_text
{
	my ($rng, $word) = @_;
	my $port = _pick($rng, $CFG->{port}, $CFG->{dead_port}, 0, 65536, 99999);
	my $slot = _pick($rng, 0, 1, 16383, 16384, -1, '99999999999999999999');
	# bare, and a space alone, half the time: the cases a parser forgets
	return $word if $rng->() < 0.35;
	return "$word " if $rng->() < 0.2;
	my @tails = (' x', ' ' . ('y' x 2000));
	if ($word eq 'MOVED' || $word eq 'ASK')
	{
		push @tails, " $slot", " $slot 127.0.0.1", " $slot 127.0.0.1:",
		  " $slot 127.0.0.1:$port", " $slot :$port",
		  " $slot 127.0.0.1:$port trailing", " x 127.0.0.1:$port";
	}
	elsif ($word =~ /^RLOCK/)
	{
		push @tails, ' lock', ' semaphore', ' latch', ' exclusive', ' read',
		  ' write', ' fair', ' fenced', ' 99999999999999999999', ' -5',
		  ' lock 1 2 3', ' %s%n';
	}
	my $text = $word . _pick($rng, @tails);
	# the words also come inside a script error's text
	$text = "ERR user_script:1: $text script: 1234" if $rng->() < 0.2;
	return $text;
}

# A reply of another type, one no command of rlock's gets in place of the
# original's: a status for anything else (no script of rlock's answers
# one), and for a status (the handshake's, PING's) anything else.
sub _swap_type
{
	my ($rng, $n) = @_;
	my ($t, $v) = @$n;
	my $s = ref $v ? scalar(@$v) : $v // '';
	$s =~ s/[\r\n]//g;
	return _pick($rng, [ '+', $s ], [ '*', [ [ '*', [ [ '+', $s ] ] ] ] ])
	  if $t ne '+';
	return _pick($rng, [ ':', 1 ], [ '$', $s ], [ '*', [ [ '$', $s ], [ ':', 1 ] ] ]);
}

# Headers of a bad length or count, or a bad integer.  Those marked 1 are
# well-formed answers some command does get (nil, 0, -1, an int64):
# "lies" a client cannot tell from the truth; a round with one is not
# checked for belief against truth (hiredis 0.14 reads any negative length
# as nil).
my @HEADERS = (
	[ "\$-5\r\n", 1 ], [ "*-7\r\n", 1 ], [ "\$-1\r\n", 1 ], [ "*-1\r\n", 1 ],
	[ "*0\r\n", 0 ], [ "\$0\r\n\r\n", 0 ],
	[ "\$99999999999\r\n", 0 ], [ "*2147483648\r\n", 0 ], [ "*999999999\r\n", 0 ],
	[ "\$9223372036854775807\r\n", 0 ], [ "*-9223372036854775808\r\n", 1 ],
	[ ":99999999999999999999\r\n", 0 ], [ ":-9223372036854775808\r\n", 1 ],
	[ ":9223372036854775807\r\n", 1 ], [ ":-1\r\n", 1 ], [ ":0\r\n", 1 ],
	[ ":2147483648\r\n", 1 ], [ ":x\r\n", 0 ], [ ":\r\n", 0 ], [ "\$1x\r\n", 0 ],
	[ "%2\r\n", 0 ], [ "_\r\n", 0 ]);

# Mutate one reply: (bytes to send, close after sending, description).
sub _mutate
{
	my ($rng, $n) = @_;
	my $bytes = _ser($n);
	my @k = qw(type error error error error truncate_close truncate_keep
	  extra drop length length nest element element);
	@k = grep { $CFG->{kinds}{$_} } @k if $CFG->{kinds};
	my $kind = _pick($rng, @k);
	$kind = 'type' if $kind eq 'element' && !($n->[0] eq '*' && ref $n->[1] && @{ $n->[1] });
	if ($kind eq 'type')
	{
		my $m = _swap_type($rng, $n);
		return (_ser($m), 0, "type $n->[0] -> $m->[0]", $kind);
	}
	if ($kind eq 'error')
	{
		# a refusal that says the command did not run (@NOT_RUN: a
		# script's own RLOCK* refusal, Redis's MOVED, NOAUTH, OOM, ...),
		# after it ran, is a lie; any other error after a command ran is
		# not rlock's to believe (issue 40, 3: it is reconciled)
		my $word = _pick($rng, grep { $CFG->{lies} || !$NOT_RUN{$_} } @WORDS);
		my $text = _error_text($rng, $word);
		return ("-$text\r\n", 0,
			'error ' . substr($text, 0, 60) . ($NOT_RUN{$word} ? ' (lie)' : ''),
			$kind);
	}
	if ($kind eq 'truncate_close' || $kind eq 'truncate_keep')
	{
		my $cut = 1 + int($rng->() * (length($bytes) - 1));
		$cut = 1 if $cut < 1;
		return (substr($bytes, 0, $cut), $kind eq 'truncate_close',
			"$kind at $cut of " . length($bytes), $kind);
	}
	if ($kind eq 'extra')
	{
		my $x = _pick($rng, "*2\r\n:1\r\n:1\r\n", "+OK\r\n", ":1\r\n",
			"\$-1\r\n", $bytes, "-ERR extra\r\n");
		return ($bytes . $x, 0, 'extra ' . ($x =~ s/\r\n/ /gr), $kind);
	}
	if ($kind eq 'drop')
	{
		return ('', _pick($rng, 0, 1), 'drop', $kind);
	}
	if ($kind eq 'length')
	{
		my ($h, $lie) =
		  @{ _pick($rng, grep { $CFG->{lies} || !$_->[1] } @HEADERS) };
		# a header promising more than follows: close, not wait
		my $close = $h =~ /^[\$*](\d+)\r\n$/ && $1 > 0;
		return ($h, $close, 'length ' . ($h =~ s/\r\n/ /gr) . ($lie ? '(lie)' : ''),
			$kind);
	}
	if ($kind eq 'nest')
	{
		my $depth = _pick($rng, 2, 8, 64, 1000, 10000);
		return (("*1\r\n" x $depth) . $bytes, 0, "nest $depth", $kind);
	}
	# element: one element of an array mutated (again, recursively)
	my @el = @{ $n->[1] };
	my $i = int($rng->() * @el);
	my $how = _pick($rng, 'type', 'error', 'int', 'deep');
	my $e = $el[$i];
	if ($how eq 'type') { $e = _swap_type($rng, $e); }
	elsif ($how eq 'error') { $e = [ '-', _error_text($rng, _pick($rng, @WORDS)) ]; }
	elsif ($how eq 'int')
	{
		# no count, status or token rlock takes: too big or below zero
		$e = [ ':', _pick($rng, '99999999999999999999', '-9223372036854775808',
			'9223372036854775807', '2147483648', '-2147483649') ];
	}
	else { $e = [ '*', [ [ '*', [$e] ] ] ]; }
	$el[$i] = $e;
	my $d = _ser($e);
	return (_ser([ '*', \@el ]), 0,
		"element $i/" . scalar(@el) . " $how -> " . substr($d =~ s/\r\n/ /gr, 0, 60),
		$kind);
}

1;
