#!/usr/bin/perl
# bench/redisson_pairs.pl -- what a Java client running Redisson sends for
# one kind of lock, as RESP for redis-cli --pipe: the scale section's kinds
# axis (bench/scale.sh) measures Redis's time per acquire+release of
# Redisson's own scripts against rlock's.  The scripts are
# test/perl/RlockTest/Redisson.pm's (the tests' copy, written from what
# Redisson does), and for each kind what Redisson 3.22 to 4.7 sends: its
# tryLock() (no wait) and its unlock with the unlock latch, then (by
# bench/replay.c) a DEL of that latch, as RedissonBaseLock sends after
# every unlock.
#
#   perl -I test/perl bench/redisson_pairs.pl load  KIND NAME      # SCRIPT LOAD of KIND's scripts (RESP)
#   perl -I test/perl bench/redisson_pairs.pl files KIND NAME DIR  # DIR/acquire.txt, DIR/release.txt
#   perl -I test/perl bench/redisson_pairs.pl check KIND NAME      # the keys a held NAME has, one a line
#   perl -I test/perl bench/redisson_pairs.pl extra KIND NAME      # "del:1" when a release is followed by
#                                                                  # a DEL of its unlock latch, else nothing
#
# "files" writes the acquire's and the release's EVALSHA as bench/replay.c
# reads them (one argument a line), which replays them one after the
# other, as a Java client with one thread would: a release's unlock latch
# (redisson_unlock_latch:{NAME}:<hex>) gets a fresh id each time there.
# KIND: lock (RLock; each unlock with a fresh unlock-latch key, as 3.2x
# does), fenced (RFencedLock: the lock with its token counter),
# fair (RedissonFairLock: tryLock() and the unlock with its latch), read
# and write (RReadWriteLock: the unlocks with their latches), semaphore
# (RPermitExpirableSemaphore tryAcquire(1, lease) then tryRelease(id), the
# id as 16 raw bytes as Redisson sends it; NAME must hold 1 available
# permit), latch (RCountDownLatch trySetCount(1), then countDown).
# Leases 30 s.

use strict;
use warnings;

use Digest::SHA qw(sha1_hex);
use Time::HiRes ();
use RlockTest::Redisson;

my ($mode, $kind, $name, $dir) = @ARGV;
die "usage: $0 load|files|check|extra KIND NAME [DIR]\n"
  unless defined $name && $mode =~ /^(load|files|check|extra)$/;

my $id = 'b3a1c2d4-5e6f-4a7b-8c9d-0e1f2a3b4c5d:1';    # Redisson's "<uuid>:<thread>"
my $lease = 30000;
my $chan = "redisson_lock__channel:{$name}";
my $queue = "redisson_lock_queue:{$name}";
my $deadlines = "redisson_lock_timeout:{$name}";
my $rwchan = "redisson_rwlock:{$name}";
my $rwtimeout = "{$name}:$id:rwlock_timeout";
my ($sem_key, $sem_timeout, $sem_chan) = RlockTest::Redisson::sem_keys($name);
my $latch_chan = RlockTest::Redisson::latch_channel($name);

my %scripts = (
	lock => [ $RlockTest::Redisson::acquire, $RlockTest::Redisson::release ],
	fenced => [ $RlockTest::Redisson::fenced_acquire, $RlockTest::Redisson::release ],
	fair => [ $RlockTest::Redisson::fair_try_acquire, $RlockTest::Redisson::fair_release_latch ],
	read => [ $RlockTest::Redisson::rw_read_acquire, $RlockTest::Redisson::rw_read_release_latch ],
	write => [ $RlockTest::Redisson::rw_write_acquire, $RlockTest::Redisson::rw_write_release_latch ],
	semaphore => [ $RlockTest::Redisson::sem_try_acquire_raw, $RlockTest::Redisson::sem_release_raw ],
	latch => [ $RlockTest::Redisson::latch_try_set_count, $RlockTest::Redisson::latch_count_down ],);
die "$0: no kind $kind (" . join(' ', sort keys %scripts) . ")\n" unless $scripts{$kind};
my ($acq, $rel) = @{ $scripts{$kind} };

sub resp
{
	my $s = '*' . scalar(@_) . "\r\n";
	$s .= '$' . length($_) . "\r\n$_\r\n" for @_;
	return $s;
}

# one EVALSHA as bench/replay.c reads it: one argument a line (escaped as
# MONITOR shows it), then a blank
sub evalsha
{
	my ($script, $keys, @args) = @_;
	return join("\n", 'EVALSHA', sha1_hex($script), scalar(@$keys),
		map { esc($_) } @$keys, @args) . "\n\n";
}

sub esc
{
	my ($a) = @_;
	$a =~ s/([\\"])/\\$1/g;
	$a =~ s/([^\x21-\x7e])/sprintf('\\x%02x', ord($1))/ge;
	return $a;
}

# the unlock latch of a release (a fresh id; bench/replay.c makes it new
# each time and DELs it in front of the next acquire)
sub latch { return "redisson_unlock_latch:{$name}:" . hex32(); }

sub hex32 { return join('', map { sprintf('%08x', int(rand(4294967296))) } 1 .. 4); }

binmode STDOUT;
if ($mode eq 'load')
{
	print resp('SCRIPT', 'LOAD', $_) for ($acq, $rel);
	exit 0;
}
if ($mode eq 'extra')
{
	print "del:1\n" if $kind =~ /^(lock|fenced|fair|read|write)$/;
	exit 0;
}
if ($mode eq 'check')
{
	my %held = (
		lock => [$name],
		fenced => [$name],
		fair => [ $name, $queue, $deadlines ],
		read => [ $name, "$rwtimeout:1" ],
		write => [$name],
		semaphore => [$sem_timeout],
		latch => [$name],);
	print "$_\n" for @{ $held{$kind} };
	exit 0;
}

die "$0: files needs a directory\n" unless defined $dir && -d $dir;
my $now = int(Time::HiRes::time() * 1000);
my ($a, $r);
if ($kind eq 'lock')
{
	$a = evalsha($acq, [$name], $lease, $id);
	$r = evalsha($rel, [ $name, $chan, latch() ], '0', $lease, $id, 'publish', 13500);
}
elsif ($kind eq 'fenced')
{
	$a = evalsha($acq, [ $name, "redisson_lock_token:{$name}" ], $lease, $id);
	$r = evalsha($rel, [ $name, $chan, latch() ], '0', $lease, $id, 'publish', 13500);
}
elsif ($kind eq 'fair')
{
	$a = evalsha($acq, [ $name, $queue, $deadlines ], $lease, $id, $now, 300000);
	$r = evalsha($rel, [ $name, $queue, $deadlines, $chan, latch() ],
		'0', $lease, $id, $now, 'publish', 13500);
}
elsif ($kind eq 'write')
{
	$a = evalsha($acq, [$name], $lease, "$id:write");
	$r = evalsha($rel, [ $name, $rwchan, latch() ], '0', $lease, "$id:write", 'publish', 13500);
}
elsif ($kind eq 'read')
{
	$a = evalsha($acq, [ $name, $rwtimeout ], $lease, $id, "$id:write");
	$r = evalsha($rel, [ $name, $rwchan, $rwtimeout, "{$name}", latch() ], '0', $id, 'publish', 13500);
}
elsif ($kind eq 'semaphore')
{
	# (one permit id for every pair: each release gives it back before the
	# next acquire takes it again, an hour's lease)
	my $permit = pack('H*', hex32());
	$a = evalsha($acq, [ $sem_key, $sem_timeout, $sem_chan ],
		1, $now + 3600000, $now, $RlockTest::Redisson::NON_EXPIRABLE, 'publish', $permit);
	$r = evalsha($rel, [ $sem_key, $sem_chan, $sem_timeout ], $permit, 1, $now, 'publish');
}
else
{
	$a = evalsha($acq, [ $name, $latch_chan ], 1, 'publish');
	$r = evalsha($rel, [ $name, $latch_chan ], 'publish');
}
for ([ 'acquire', $a ], [ 'release', $r ])
{
	open(my $f, '>', "$dir/$_->[0].txt") or die "$dir/$_->[0].txt: $!\n";
	print $f $_->[1];
	close($f) or die "$dir/$_->[0].txt: $!\n";
}
