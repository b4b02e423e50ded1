# Copyright (c) 2026, rlock developers
#
# Semaphores and count-down latches on a Redis Cluster (3 masters): every
# key and channel of one name lives in the name's slot, so each script
# runs on the master of that slot; waiters are woken with sharded pub/sub
# where the cluster has it (Redis 7); the watchdog renews permits on every
# master in its batched cycle; the check before COMMIT, rlock_release_all
# and the release at session exit span several masters without CROSSSLOT.
# A Java client (RlockTest::Redisson, publishing with SPUBLISH on Redis 7
# as Redisson 3.22+ does) shares a semaphore and a latch with SQL.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use RlockTest;

my $c = RlockTest::Cluster->new(masters => 3, replicas => 0);
my $node = RlockTest::new_node('synccl', undef, url => $c->url,
	watchdog_timeout => '2s');
my $s1 = $node->background_psql('postgres', on_error_stop => 0);
my $s2 = $node->background_psql('postgres', on_error_stop => 0);

sub sql
{
	my ($s, $q) = @_;
	my ($out, $err, $state) = RlockTest::run_sql($s, $q);
	return wantarray ? ($out, $err, $state) : $out;
}

# two names on each master
my $by_master = $c->names_on_each_master(2, 'sem');
my @names = map { @$_ } values %$by_master;
is(scalar(@names), 6, 'six semaphore names, two on each master');
my $list = join(',', map { "'$_'" } @names);

is(sql($s1, "SELECT count(*) FROM unnest(ARRAY[$list]) n WHERE rlock_semaphore_set_permits(n, 2)"),
	'6', 'two permits set on each');
is(sql($s1, "SELECT count(*) FROM unnest(ARRAY[$list]) n WHERE rlock_semaphore_try_acquire(n, 2)"),
	'6', 'the session takes both permits of each (NULL lease)');
is(sql($s1, "SELECT count(DISTINCT node) FROM rlock_locks WHERE kind = 'semaphore'"),
	'3', 'rlock_locks: its permits live on all three masters');
foreach my $port (keys %$by_master)
{
	my $n = $by_master->{$port}[0];
	my ($master) = grep { $_->port == $port } $c->masters;
	is($master->cli('ZCARD', "{$n}:timeout"), '2', "$n: the permit ids on its master ($port)");
}
sleep 3;    # longer than the watchdog's lease: renewed on every master
is(sql($s2, "SELECT count(*) FROM unnest(ARRAY[$list]) n WHERE rlock_semaphore_try_acquire(n)"),
	'0', 'after longer than the lease, no permit came free (renewed)');
is(sql($s1, "SELECT count(*) FROM rlock_locks WHERE kind = 'semaphore' AND state = 'held' AND renewed_at IS NOT NULL"),
	'6', 'renewed and held');

# a waiter on each master, woken by a release there
foreach my $port (sort keys %$by_master)
{
	my $n = $by_master->{$port}[1];
	RlockTest::start_bg($s2, "SELECT rlock_semaphore_acquire('$n', 1, '1 minute')");
	ok(RlockTest::wait_until(sub {
			$node->safe_psql('postgres',
				"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Extension' AND query LIKE '%rlock_semaphore_acquire%'") eq '1' }, 20),
		"a waiter for $n (on $port)");
	is(sql($s1, "SELECT rlock_semaphore_release('$n')"), 't', "$n: one permit given back");
	ok(RlockTest::wait_until(sub { RlockTest::bg_done($s2) }, 20), "$n: the waiter is woken");
	my ($out, $err, $st) = RlockTest::bg_result($s2);
	is($st, '00000', "$n: and has the permit") or diag($err);
}
is(sql($s2, 'SELECT rlock_release_all()'), '3', 'the waiter session gives back its three');

# transaction permits on every master: the check before COMMIT
is(sql($s1, 'SELECT rlock_release_all()'), '6', 'rlock_release_all across the masters');
my ($out, $err, $st) = sql($s2,
	"BEGIN; SELECT count(*) FROM unnest(ARRAY[$list]) n WHERE rlock_semaphore_xact_try_acquire(n); COMMIT;");
is("$st", '00000', 'transaction permits on three masters commit') or diag($err);
is(sql($s1, "SELECT sum(rlock_semaphore_available(n)) FROM unnest(ARRAY[$list]) n"),
	'12', 'and are given back at COMMIT');

# latches on each master
my $latches = $c->names_on_each_master(1, 'latch');
foreach my $port (sort keys %$latches)
{
	my $l = $latches->{$port}[0];
	is(sql($s1, "SELECT rlock_latch_set_count('$l', 2)"), 't', "$l: a latch of 2 (on $port)");
	RlockTest::start_bg($s2, "SELECT rlock_latch_await('$l', '30 s')");
	sql($s1, "SELECT rlock_latch_count_down('$l')");
	sql($s1, "SELECT rlock_latch_count_down('$l')");
	ok(RlockTest::wait_until(sub { RlockTest::bg_done($s2) }, 20), "$l: the await ends");
	($out, $err, $st) = RlockTest::bg_result($s2);
	is("$out/$st", 't/00000', "$l: at zero") or diag($err);
}

# a Java client (RlockTest::Redisson on the cluster: each script on the
# master of the name's slot; Redisson 3.22+ publishes with SPUBLISH on a
# Redis 7 cluster, where rlock's waiters listen)
my $verb = RlockTest::redis_version() >= 70000 ? 'spublish' : 'publish';
my $jn = $by_master->{ (sort keys %$by_master)[0] }[0];
my ($ids, $answer) = RlockTest::Redisson::sem_try_acquire($c, $jn, 2, 60000, $verb);
is("$answer/" . scalar(@$ids), 'OK/2', "Java takes both permits of $jn");
my @java = @$ids;
is(sql($s1, "SELECT rlock_semaphore_available('$jn')"), '0', 'SQL sees none left');
RlockTest::start_bg($s2, "SELECT rlock_semaphore_acquire('$jn', 1, '1 minute')");
ok(RlockTest::wait_until(sub {
		$node->safe_psql('postgres',
			"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Extension' AND query LIKE '%rlock_semaphore_acquire%'") eq '1' }, 20),
	'an SQL waiter waits');
is(RlockTest::Redisson::sem_release($c, $jn, shift(@java), $verb), '1', "Java's release ($verb)");
ok(RlockTest::wait_until(sub { RlockTest::bg_done($s2) }, 20), 'wakes the SQL waiter');
($out, $err, $st) = RlockTest::bg_result($s2);
is($st, '00000', 'which has the permit') or diag($err);
($ids, $answer) = RlockTest::Redisson::sem_try_acquire($c, $jn, 1, 60000, $verb);
like($answer, qr/^:\d+$/, "Java's next tryAcquire is refused with ':<score>'");
is(sql($s2, "SELECT rlock_semaphore_release('$jn')"), 't', 'SQL gives its permit back');
($ids, $answer) = RlockTest::Redisson::sem_try_acquire($c, $jn, 1, 60000, $verb);
is($answer, 'OK', 'and Java takes it');
push @java, @$ids;
is(RlockTest::Redisson::sem_available($c, $jn, $verb), '0', "Java's availablePermits: 0");
is(join(',', map { RlockTest::Redisson::sem_release($c, $jn, $_, $verb) } @java), '1,1',
	'Java gives back its two');
is(sql($s1, "SELECT rlock_semaphore_available('$jn')"), '2', 'both available to SQL');
my $jl = $latches->{ (sort keys %$latches)[0] }[0];
is(RlockTest::Redisson::latch_try_set_count($c, $jl, 1, $verb), '1', "Java's trySetCount on $jl");
RlockTest::start_bg($s2, "SELECT rlock_latch_await('$jl', '30 s')");
ok(RlockTest::wait_until(sub {
		$node->safe_psql('postgres',
			"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Extension' AND query LIKE '%rlock_latch_await%'") eq '1' }, 20),
	'an SQL await waits');
is(RlockTest::Redisson::latch_count_down($c, $jl, $verb), '0', "Java's countDown to zero ($verb)");
ok(RlockTest::wait_until(sub { RlockTest::bg_done($s2) }, 20), 'ends the await');
($out, $err, $st) = RlockTest::bg_result($s2);
is("$out/$st", 't/00000', 'returning true') or diag($err);

# the release at session exit, across the masters
is(sql($s2, "SELECT count(*) FROM unnest(ARRAY[$list]) n WHERE rlock_semaphore_try_acquire(n)"),
	'6', 'a session takes a permit of each');
$s2->quit;
ok( RlockTest::wait_until(sub {
		sql($s1, "SELECT sum(rlock_semaphore_available(n)) FROM unnest(ARRAY[$list]) n") eq '12' }, 20),
	'its exit gives them all back');

$s1->quit;
done_testing();
