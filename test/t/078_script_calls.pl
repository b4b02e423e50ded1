# Copyright (c) 2026, rlock developers
#
# Redis's work per acquire+release, counted (issue 44: "Redis's time per
# operation within 1.2x of Redisson's own script for the same kind"): the
# commands Redis runs for one acquire+release of a session, the scripts'
# inner commands and the commands the session sends beside them (the DEL
# of a request's latch), caught with MONITOR, are at most what the trimmed
# scripts run (scripts.c's acquire, scripts_sync.c's semaphore and latch
# scripts: a GET in a pcall, TYPE only when it fails; ZCARD for the type of
# {N}:timeout, reused; one EXISTS for two markers; TIME only when needed;
# one MSET of a latch and its marker; one MGET of the request's latch and
# the count or permits).  Structural (counts, no timing):
# bench/run's scale section (kinds) measures the microseconds.
#
# Before the trim: lock 10, fenced 16, semaphore 26, latch 17 commands a
# pair; after: 10, 15, 18, 13 (the lock's two EXISTS stay apart: a Cluster
# slot being migrated refuses one EXISTS of both, see scripts.c) (Redisson's own: 10, 11, 9, 6; doc/benchmark.md).
# Each pair's replies are checked too (it did its work).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use RlockTest;

my $redis = RlockTest::Redis->new;
my $node = RlockTest::new_node('calls', $redis);

my $s = $node->background_psql('postgres', on_error_stop => 0);
my $pid = $s->query_safe('SELECT pg_backend_pid()');
chomp $pid;

sub q1
{
	my ($sql) = @_;
	my ($out, $err, $state) = RlockTest::run_sql($s, $sql);
	diag("$sql: $state $err") if $state ne '00000';
	return $out;
}

# kind => [ the pair's statement (each part true when it did its work),
#           the most commands it may cost ]
my %pairs = (
	lock => [ "SELECT rlock_try_acquire('c-lock'), rlock_release('c-lock')", 10 ],
	fenced => [
		"SELECT rlock_fenced_try_acquire('c-fenced') IS NOT NULL, rlock_release('c-fenced')", 15
	],
	semaphore => [
		"SELECT rlock_semaphore_try_acquire('c-sem'), rlock_semaphore_release('c-sem')", 18
	],
	latch => [
		"SELECT rlock_latch_set_count('c-latch', 1), rlock_latch_count_down('c-latch') = 0", 13
	],);

is(q1("SELECT rlock_semaphore_set_permits('c-sem', 1)"), 't', 'the semaphore has a permit');
# (every script loaded, the connection made: the counted pairs send no
# SCRIPT LOAD, no EVAL after a NOSCRIPT, no handshake)
foreach my $kind (sort keys %pairs)
{
	my $st = $pairs{$kind}[0];
	is(q1($st), 't|t', "$kind: a first pair works");
}

# the address of the session's connection to Redis (CLIENT SETNAME
# rlock:<server>:<pid>)
my ($me) = map { $_->{addr} } grep { ($_->{name} // '') =~ /^rlock:.*:\Q$pid\E$/ } $redis->clients;
ok(defined $me, "the session's Redis connection is found ($pid)") or BAIL_OUT('no connection');

# The commands Redis ran for the session: those its connection sent
# (scripts aside) and those its scripts ran (a script's commands follow
# its EVALSHA line, "[db lua]", nothing between them).
sub session_commands
{
	my ($buf) = @_;
	my @cmds;
	my $ours = 0;
	foreach my $line (split /\n/, $buf)
	{
		next unless $line =~ /^\d+\.\d+ \[\d+ ([^\]]+)\] "([^"]+)"/;
		my ($who, $cmd) = ($1, lc $2);
		if ($who eq 'lua')
		{
			push @cmds, $cmd if $ours;
			next;
		}
		$ours = $who eq $me;
		push @cmds, $cmd if $ours && $cmd !~ /^(evalsha|eval)$/;
	}
	return @cmds;
}

foreach my $kind (sort keys %pairs)
{
	my ($st, $most) = @{ $pairs{$kind} };
	# (a pair of the same kind just before: the request latches the
	# session deletes in front of its next call are a pair of this kind's)
	is(q1($st), 't|t', "$kind: a pair before the counted one works");
	my $m = $redis->monitor_start;
	my $out = q1($st);
	my @cmds = session_commands($redis->monitor_stop($m));
	is($out, 't|t', "$kind: the counted pair did its work");
	note("$kind: " . scalar(@cmds) . " commands: @cmds");
	# (the pair was caught: its scripts' writes at the least)
	cmp_ok(scalar(@cmds), '>=', 4, "$kind: the pair's commands were caught");
	cmp_ok(scalar(@cmds), '<=', $most,
		"$kind: one acquire+release costs Redis at most $most commands")
	  or diag("$kind: " . join(' ', @cmds));
}

$s->quit;
$node->stop;
$redis->stop;
done_testing();
