# Copyright (c) 2026, rlock developers
#
# A multi-lock whose names live on several masters of a Redis Cluster:
#   - an attempt sends every name's script to its slot's master, one
#     pipelined round trip per master, the masters at once: 30 names on 3
#     masters cost 3 round trips (rlock_stats.redis_round_trips), not 30;
#   - all or nothing across masters: a Redisson-protocol client holding one
#     name on one master makes the attempt fail, and no name is left on any
#     master; a blocked multi-lock gets the whole set when that client
#     releases (its release message published the way the cluster's
#     clients publish);
#   - its members are renewed by the watchdog on every master, like single
#     locks, and rlock_locks shows each of them on its master.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use RlockTest;

my $c = RlockTest::Cluster->new(masters => 3, replicas => 0);
my @masters = $c->masters;
my $verb = RlockTest::redis_version() >= 70000 ? 'spublish' : 'publish';
my $java = '6f1c2b9e-3d4a-4e5f-8a7b-9c0d1e2f3a4b:57';

# 10 names on each master, interleaved so that no master's names are
# together in the array
my $per = $c->names_on_each_master(10, 'multi');
my @names;
foreach my $i (0 .. 9)
{
	push @names, $per->{ $_->port }[$i] foreach @masters;
}
my $array = 'ARRAY[' . join(',', map { "'$_'" } @names) . ']';

# A 10-minute watchdog_timeout: the worker's cycles (every 200 s) stay out
# of the round trips counted here; what one costs anyway is subtracted.
my $node = RlockTest::new_node('multicl', undef, url => $c->url,
	watchdog_timeout => '10min');
my $s = $node->background_psql('postgres', on_error_stop => 0);

sub sql
{
	my ($q) = @_;
	my ($out, $err, $state) = RlockTest::run_sql($s, $q);
	return wantarray ? ($out, $err, $state) : $out;
}

sub round_trips
{
	return split /\|/,
	  $node->safe_psql('postgres',
		'SELECT redis_round_trips, renewal_batches FROM rlock_stats');
}

sub session_round_trips
{
	my @before = @_;
	my @now = round_trips();
	return ($now[0] - $before[0]) - ($now[1] - $before[1]);
}

# ---- one round trip per master per attempt ----

# Warm up: the slot map read, the masters connected, and the scripts an
# attempt, a giving back and a release use loaded on every master (the
# first EVALSHA of a script on a master costs a second round trip).
my $warm = $per->{ $masters[0]->port }[9];
RlockTest::Redisson::try_lock($c, $warm, 60000, $java);
sql("SELECT rlock_multi_try_acquire($array, '1 min')");
RlockTest::Redisson::unlock($c, $warm, $java, $verb);
sql("SELECT rlock_multi_try_acquire($array, '1 min')");
sql("SELECT rlock_multi_release($array)");

my @before = round_trips();
is(sql("SELECT rlock_multi_try_acquire($array, '1 min')"), 't',
	'30 names spread over 3 masters are taken at once');
is(session_round_trips(@before), 3,
	'... in 3 round trips, one per master (not one per name)');
my $on_its_master = 0;
foreach my $m (@masters)
{
	foreach my $n (@{ $per->{ $m->port } })
	{
		$on_its_master++ if $m->cli('EXISTS', $n) eq '1';
	}
}
is($on_its_master, 30, '... each name on the master of its slot');
is( sql("SELECT count(*) FROM rlock_locks WHERE name LIKE 'multi%' AND kind = 'exclusive' AND hold_count = 1 AND node IS NOT NULL"),
	'30', 'rlock_locks shows each member, with its master');

@before = round_trips();
is(sql("SELECT rlock_multi_release($array)"), 't', 'the set is released');
is(session_round_trips(@before), 3, '... again in one round trip per master');
my $still = 0;
foreach my $m (@masters)
{
	$still += grep { $m->cli('EXISTS', $_) eq '1' } @{ $per->{ $m->port } };
}
is($still, 0, '... nothing of it is left on any master');

# The release's unlock latches are deleted in front of the next round trip
# to each master: one DEL per latch, since a master refuses one DEL over
# keys of several slots (CROSSSLOT) and the latches would stay their TTL.
is(sql("SELECT rlock_multi_try_acquire($array, '1 min')"), 't',
	'the set is taken again');
my $latches = 0;
foreach my $m (@masters)
{
	foreach my $n (@{ $per->{ $m->port } })
	{
		next if $n eq $warm;    # (the Redisson client's own latch)
		$latches += () = $m->cli('--scan', '--pattern',
			"redisson_unlock_latch:{$n}:*") =~ /\S+/g;
	}
}
is($latches, 0, "... and the release's unlock latches are gone from every master");
is(sql("SELECT rlock_multi_release($array)"), 't', '... and released');

# ---- all or nothing across masters ----

my $busy = $per->{ $masters[1]->port }[4];
is(RlockTest::Redisson::try_lock($c, $busy, 60000, $java), '',
	"a Redisson-protocol client holds \"$busy\" (on the second master)");
@before = round_trips();
is(sql("SELECT rlock_multi_try_acquire($array, '1 min')"), 'f',
	'the multi-lock is refused');
my $left = 0;
foreach my $m (@masters)
{
	foreach my $n (@{ $per->{ $m->port } })
	{
		next if $n eq $busy;
		$left++ if $m->cli('EXISTS', $n) eq '1';
	}
}
is($left, 0, '... and no other name is left held on any master');
cmp_ok(session_round_trips(@before), '<=', 6,
	'... the attempt and the giving back: one round trip per master each');
is(sql("SELECT count(*) FROM rlock_locks"), '0',
	'... and the session holds nothing');

# a blocked multi-lock gets the whole set once the client releases
$s->query_until(qr/waiting\n/,
	"\\echo waiting\nSELECT rlock_multi_acquire($array, '1 min');\n");
RlockTest::wait_for_rlock_waiters($node, 'postgres', 1,
	'%rlock_multi_acquire(%');
is(RlockTest::Redisson::unlock($c, $busy, $java, $verb), '1',
	'the Redisson client releases');
ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 30 FROM rlock_locks WHERE name LIKE 'multi%'"),
	'... and the blocked multi-lock got all 30 names');
like(sql("SELECT rlock_multi_release($array)"), qr/^\n?t$/,
	'... which it releases');

# ---- the watchdog renews members on every master ----

my $node2 = RlockTest::new_node('multicl2', undef, url => $c->url,
	watchdog_timeout => '3s');
my $s2 = $node2->background_psql('postgres', on_error_stop => 0);
my ($out) = RlockTest::run_sql($s2, "SELECT rlock_multi_acquire($array)");
is(RlockTest::sql($node2, "SELECT count(*) FROM rlock_locks WHERE state = 'held'"),
	'30', 'a multi-lock without a lease is held');
my @pairs = map { [ $c, $per->{ $_->port }[0] ] } @masters;
my ($renewed) = RlockTest::all_renewed_on(\@pairs, 30);
ok($renewed, '... and the watchdog renews its members on every master');
($out) = RlockTest::run_sql($s2, "SELECT rlock_multi_release($array)");
is($out, 't', '... until it is released');

$s->quit;
$s2->quit;
$node->stop;
$node2->stop;
done_testing();
