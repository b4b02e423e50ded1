#!/usr/bin/perl
# bench/replay.pl -- the Redis part of the floor of the multi-lock and the
# Redlock (bench/nodes.sh): replay the commands rlock sent for an acquire
# and for a release (caught with MONITOR), as a bare client would: each as
# one pipeline, sent to every Redis of PORT... at once, then every reply
# awaited.  ITERATIONS times an acquire round, then a release round; prints
# the mean milliseconds of each: "acquire_ms release_ms".
#
#   perl bench/replay.pl ITERATIONS ACQUIRE_FILE RELEASE_FILE PORT...
#
# A file holds one command per paragraph, one argument a line.  As rlock
# does, a release's unlock latch key (redisson_unlock_latch:{name}:<id>)
# is new each time, and the latches of one release are deleted in front of
# the next acquire; those of the last release at the end.  The ids start
# with this process's id and start time: a later replay of the same calls
# must not find a latch of this one (its release would answer from the
# latch and leave the lock held until its lease ran out).
use strict;
use warnings;
use IO::Socket::INET;
use Socket qw(IPPROTO_TCP TCP_NODELAY);
use Time::HiRes qw(time);

my ($iterations, $acq_file, $rel_file, @ports) = @ARGV;
die "usage: $0 ITERATIONS ACQUIRE_FILE RELEASE_FILE PORT...\n" unless @ports;

sub commands {
    my ($file) = @_;
    open my $fh, '<', $file or die "$file: $!\n";
    local $/ = '';
    my @cmds = map { [split /\n/] } <$fh>;
    die "$file: no command\n" unless @cmds;
    return @cmds;
}

sub resp {
    return join '', "*" . scalar(@_) . "\r\n", map { "\$" . length($_) . "\r\n$_\r\n" } @_;
}

my @socks = map {
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $_,
                                  Proto => 'tcp') or die "127.0.0.1:$_: $!\n";
    setsockopt($s, IPPROTO_TCP, TCP_NODELAY, 1);
    $s
} @ports;

# One round: the pipeline to every Redis, then every reply.  A PING ends the
# pipeline, so that its PONG ends the replies (those of rlock's scripts are
# integers, arrays and nils: none ends so); reading the Redis one after the
# other costs nothing, since each was sent its pipeline before any is read.
my $ping = resp('PING');
sub round {
    my ($out) = @_;
    $out .= $ping;
    for my $s (@socks) {
        syswrite($s, $out) == length($out) or die "write: $!\n";
    }
    for my $s (@socks) {
        my $buf = '';
        do {
            sysread($s, $buf, 1 << 20, length $buf) or die "read: $!\n";
        } until substr($buf, -7) eq "+PONG\r\n";
        die "Redis answered: $buf" if $buf =~ /(?:^|\n)-/;
    }
}

my @acq = commands($acq_file);
my @rel = commands($rel_file);
my $acq = join '', map { resp(@$_) } @acq;
my ($seq, $ta, $tr) = (0, 0, 0);
my $run = sprintf('%08x%08x', $$ & 0xffffffff, time() & 0xffffffff);
my @latches;
for my $i (1 - int($iterations / 10) .. $iterations) {    # (a tenth: warm-up)
    my $out = $acq;
    $out = resp('DEL', @latches) . $out if @latches;
    @latches = ();
    my $t0 = time;
    round($out);
    my $t1 = time;
    $out = join '', map {
        resp(map {
            my $a = $_;
            push @latches, $a
                if $a =~ s/^(redisson_unlock_latch:.*:)[0-9a-f]+$/$1 . $run . sprintf('%016x', ++$seq)/e;
            $a
        } @$_)
    } @rel;
    my $t2 = time;
    round($out);
    next if $i < 1;
    $ta += $t1 - $t0;
    $tr += time - $t2;
}
round(resp('DEL', @latches)) if @latches;
printf "%.4f %.4f\n", 1000 * $ta / $iterations, 1000 * $tr / $iterations;
