# Copyright (c) 2026, rlock developers
#
# Redis Cluster (rlock.redis_url = 'redis-cluster://...'): 3 masters and 3
# replicas on loopback, two databases of one PostgreSQL server, and a
# Redisson-protocol client driven with redis-cli -c.
#   - rlock reads the slot map from the seeds (one seed down included), with
#     the nodes' password from the URL (masked in SHOW); a cluster nobody
#     answers for, or a wrong password, is a clear ERROR;
#   - locks of many names spread over all three masters, each on the master
#     of its slot (rlock_locks.node, EXISTS on that master);
#   - on every master, rlock in two databases and the Redisson client
#     exclude each other, and wake each other's waiters, with sharded
#     pub/sub where the cluster has it (Redis 7: SPUBLISH / SSUBSCRIBE);
#   - what spans several masters never goes into one script (CROSSSLOT):
#     the check before COMMIT, rlock_release_all, the release at session
#     exit; read/write, fair and fenced locks keep their keys in one slot;
#   - replica acknowledgement applies per master (WAIT after each
#     acquisition, on the master that took it);
#   - rlock_nodes shows each master, rlock_ping asks them all.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use RlockTest;

my $c = RlockTest::Cluster->new(masters => 3, replicas => 1,
	password => 'cl5ecret');
my @masters = $c->masters;
my $sharded = RlockTest::redis_version() >= 70000;
my $verb = $sharded ? 'spublish' : 'publish';

# the first seed of the URL is a port nothing listens on
my $dead_seed = PostgreSQL::Test::Cluster::get_free_port();
my $url = 'redis-cluster://:cl5ecret@'
  . join(',', map { "127.0.0.1:$_" } $dead_seed, map { $_->port } @masters);
my $node = RlockTest::new_node('cluster', undef, url => $url,
	dbs => [ 'postgres', 'db2' ], watchdog_timeout => '6s');
my $s1 = $node->background_psql('postgres', on_error_stop => 0);
my $s2 = $node->background_psql('db2', on_error_stop => 0);

sub sql
{
	my ($s, $q) = @_;
	my ($out, $err, $state) = RlockTest::run_sql($s, $q);
	return wantarray ? ($out, $err, $state) : $out;
}

# ---- the slot map, from the seeds ----

is(sql($s1, 'SELECT count(*) FROM rlock_nodes()'), '3',
	'rlock_nodes: one row per master, read through the seeds (the first one down)');
is( sql($s1, "SELECT string_agg(node, ',' ORDER BY node) FROM rlock_nodes() WHERE role = 'master' AND replicas = 1"),
	join(',', sort map { '127.0.0.1:' . $_->port } @masters),
	'... the three masters, each with its replica');
like(sql($s1, 'SELECT rlock_ping() < interval \'5s\''), qr/^t$/,
	'rlock_ping asks every master');

# a cluster whose seeds all refuse: a clear error, not a hang
{
	my $n2 = RlockTest::new_node('noseed', undef,
		url => "redis-cluster://127.0.0.1:$dead_seed");
	my ($out, $err) = ('', '');
	my $t0 = time();
	$n2->psql('postgres', "SELECT rlock_try_acquire('x', '10s')",
		stdout => \$out, stderr => \$err);
	like($err, qr/could not connect to Redis at 127\.0\.0\.1:$dead_seed for lock "x"/,
		'a cluster no seed answers for: "could not connect" naming the seed');
	cmp_ok(time() - $t0, '<', 10, '... within the timeouts');
	$n2->stop;

	# the wrong password: every node refuses it
	my $n3 = RlockTest::new_node('wrongpw', undef,
		url => $c->url(password => 'wrong'));
	($out, $err) = ('', '');
	$n3->psql('postgres', "SELECT rlock_try_acquire('x', '10s')",
		stdout => \$out, stderr => \$err);
	like($err, qr/ERROR:  Redis at 127\.0\.0\.1:\d+ rejected the credentials of rlock\.redis_url for lock "x"/,
		'a wrong password: the nodes reject the credentials');
	my $st = '';
	$n3->psql('postgres', "SELECT rlock_try_acquire('x', '10s')",
		on_error_stop => 0, extra_params => [ '-v', 'VERBOSITY=sqlstate' ],
		stderr => \$st);
	like($st, qr/28P01/, '... SQLSTATE 28P01 (invalid_password), as with one Redis');
	unlike($err, qr/wrong/, '... and the password is not shown');
	$n3->stop;
}
like(sql($s1, 'SHOW rlock.redis_url'), qr{^redis-cluster://:\*+\@127\.0\.0\.1:$dead_seed,},
	'SHOW masks the password of a Cluster URL');

# ---- locks of many names spread over all three masters ----

is(sql($s1, "SELECT count(rlock_acquire('spread' || g)) FROM generate_series(1, 60) g"),
	'60', 'one session takes 60 locks');
my $spread = sql($s1,
	"SELECT string_agg(node || '=' || n, ' ' ORDER BY node) FROM (SELECT node, count(*) n FROM rlock_locks WHERE name LIKE 'spread%' GROUP BY node) x");
note "60 names over the masters: $spread";
my %by_node = map { split /=/ } split / /, $spread;
is(scalar(keys %by_node), 3, 'rlock_locks.node: they live on all three masters');
my $placed = 0;
foreach my $row (split /\n/, sql($s1, "SELECT name, node FROM rlock_locks WHERE name LIKE 'spread%'"))
{
	my ($name, $n) = split /\|/, $row;
	my $m = $c->master_of($name);
	$placed++ if $n eq '127.0.0.1:' . $m->port && $m->cli('EXISTS', $name) eq '1';
}
is($placed, 60, 'each lock is on the master of its slot, and rlock_locks.node says which');
is(sql($s1, 'SELECT rlock_release_all()'), '60',
	'rlock_release_all releases the locks of every master');
is($c->cli('EXISTS', 'spread1'), '0', 'nothing is left in the cluster');

# ---- exclusion and wake-ups on every master, with a Redisson client ----

my $java = '7c3d9e1a-2b4f-4c6d-8e0a-1f2b3c4d5e6f:41';
my $names = $c->names_on_each_master(1, 'acct');

sub java_lock
{
	my ($name) = @_;
	return scalar $c->cli('EVAL', $RlockTest::Redisson::acquire, 1, $name,
		30000, $java);
}

sub java_unlock
{
	my ($name) = @_;
	my $latch = sprintf('redisson_unlock_latch:{%s}:%032x', $name, int(rand(1 << 30)));
	return scalar $c->cli('EVAL', $RlockTest::Redisson::release, 3, $name,
		"redisson_lock__channel:{$name}", $latch, '0', 30000, $java, $verb,
		13500);
}

foreach my $m (@masters)
{
	my $name = $names->{ $m->port }[0];
	my $at = 'on master ' . $m->port;

	is(sql($s1, "SELECT rlock_try_acquire('$name', NULL)"), 't',
		"db postgres takes \"$name\" $at");
	is(sql($s2, "SELECT rlock_try_acquire('$name', NULL)"), 'f',
		'db2 cannot take it');
	like(java_lock($name), qr/^\d+$/,
		'the Redisson client (redis-cli -c) cannot take it: it gets the PTTL');

	# a Redisson-style waiter listens where Redisson listens
	my ($sub, $subout) = $m->cli_bg($sharded ? 'SSUBSCRIBE' : 'SUBSCRIBE',
		"redisson_lock__channel:{$name}");
	ok(RlockTest::wait_until(sub { $sub->pump_nb; $$subout =~ /subscribe/ }, 10),
		'a Redisson waiter subscribes on the master of the slot');
	# and an rlock waiter in db2
	$s2->query_until(qr/waiting\n/,
		"\\echo waiting\nSELECT rlock_acquire('$name', '30s'), 'got';\n");
	RlockTest::wait_for_rlock_waiters($node, 'db2', 1, "%rlock_acquire('$name'%");
	if ($sharded)
	{
		is($m->cli('PUBSUB', 'SHARDNUMSUB', "redisson_lock__channel:{$name}"),
			"redisson_lock__channel:{$name}\n2",
			'sharded pub/sub: both waiters are SSUBSCRIBEd on the slot\'s master');
	}
	my $t_rel = time();
	is(sql($s1, "SELECT rlock_release('$name')"), 't', 'db postgres releases');
	my $got = $s2->query_until(qr/got\n/, '');
	my $ms = (time() - $t_rel) * 1000;
	like($got, qr/got/, 'the rlock waiter in db2 gets the lock');
	cmp_ok($ms, '<', 3000, sprintf('... woken by the release message (%.1f ms; its recheck is 5 s)', $ms));
	ok(RlockTest::wait_until(
			sub {
				$sub->pump_nb;
				$$subout =~ /message\nredisson_lock__channel:\{\Q$name\E\}\n0\n/;
			},
			10),
		'the Redisson waiter got the release message "0" too');
	$sub->kill_kill;
	like(java_lock($name), qr/^\d+$/, 'db2 holds it now: Redisson still cannot');
	is(sql($s2, "SELECT rlock_release('$name')"), 't', 'db2 releases');

	# the other way round: Redisson holds, rlock waits and is woken
	is(java_lock($name), '', 'the Redisson client takes it');
	is(sql($s1, "SELECT rlock_try_acquire('$name', NULL)"), 'f',
		'rlock cannot take a lock the Redisson client holds');
	$s1->query_until(qr/waiting\n/,
		"\\echo waiting\nSELECT rlock_acquire('$name', '30s'), 'got';\n");
	RlockTest::wait_for_rlock_waiters($node, 'postgres', 1, "%rlock_acquire('$name'%");
	$t_rel = time();
	is(java_unlock($name), '1', "the Redisson client releases ($verb)");
	$got = $s1->query_until(qr/got\n/, '');
	$ms = (time() - $t_rel) * 1000;
	like($got, qr/got/, 'the rlock waiter gets it');
	cmp_ok($ms, '<', 3000, sprintf('... woken by Redisson\'s release (%.1f ms)', $ms));
	is(sql($s1, "SELECT rlock_release('$name')"), 't', 'and releases it');
}

# ---- what spans several masters: no CROSSSLOT ----

my @acct = map { $names->{ $_->port }[0] } @masters;
my $list = join(', ', map { "'$_'" } @acct);
my ($out, $err, $state) = sql($s1, "BEGIN;
SELECT count(rlock_xact_acquire(n)) FROM unnest(ARRAY[$list]) n;
CREATE TEMP TABLE guarded AS SELECT 1 AS v;
COMMIT;");
is($state, '00000', 'a transaction holding locks on three masters commits (the check before COMMIT goes per slot)');
is($err, '', '... without an error');
is(sql($s1, "SELECT count(*) FROM rlock_locks WHERE name IN ($list)"), '0',
	'... and its locks are released on every master');
is(join(',', map { scalar $c->call($_, 'EXISTS', $_) } @acct), '0,0,0',
	'nothing is left in the cluster');

($out, $err, $state) = sql($s1, "BEGIN;
SELECT count(rlock_xact_acquire(n)) FROM unnest(ARRAY[$list]) n;
COMMIT;");
is($state, '00000', 'another such transaction');

# a lost one among them still fails the commit
($out, $err, $state) = sql($s1, "BEGIN;
SELECT count(rlock_xact_acquire(n)) FROM unnest(ARRAY[$list]) n;");
$c->call($acct[1], 'DEL', $acct[1]);
($out, $err, $state) = sql($s1, 'COMMIT');
like($err, qr/cannot commit: lock "\Q$acct[1]\E" held by this transaction was lost/,
	'a transaction whose lock on one master vanished cannot COMMIT');
is(join(',', map { scalar $c->call($_, 'EXISTS', $_) } @acct), '0,0,0',
	'... and its other locks are released');

# the release at session exit, over three masters
{
	my $s3 = $node->background_psql('db2', on_error_stop => 0);
	is(sql($s3, "SELECT count(rlock_acquire(n)) FROM unnest(ARRAY[$list]) n"),
		'3', 'a session takes a lock on each master');
	my $pid = sql($s3, 'SELECT pg_backend_pid()');
	$s3->quit;
	$node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid");
	ok(RlockTest::wait_until(
			sub { join(',', map { scalar $c->call($_, 'EXISTS', $_) } @acct) eq '0,0,0' }, 10),
		'its exit released all three');
}

# ---- the other kinds keep their keys in one slot ----

my $rw = $names->{ $masters[0]->port }[0];
is(sql($s1, "SELECT rlock_read_acquire('$rw', NULL), rlock_read_acquire('$rw', NULL)"),
	'|', 'read lock, twice (two timeout keys)');
is(sql($s2, "SELECT rlock_read_try_acquire('$rw', NULL)"), 't', 'another reader shares it');
is(sql($s2, "SELECT rlock_write_try_acquire('$rw.w', NULL)"), 't', 'a write lock elsewhere');
is(sql($s1, "SELECT rlock_read_release('$rw'), rlock_read_release('$rw')"), 't|t',
	'read releases');
is(sql($s2, "SELECT rlock_read_release('$rw'), rlock_write_release('$rw.w')"),
	't|t', 'the others too');
is(sql($s1, "SELECT rlock_fair_acquire('fair:$rw', NULL)"), '', 'fair lock');
is(sql($s2, "SELECT rlock_fair_try_acquire('fair:$rw', NULL, '200ms')"), 'f',
	'a fair waiter queues and gives up');
is(sql($s1, "SELECT rlock_fair_release('fair:$rw')"), 't', 'fair release');
my $t1 = sql($s1, "SELECT rlock_fenced_acquire('fence:$rw', NULL)");
is(sql($s1, "SELECT rlock_release('fence:$rw')"), 't', 'fenced lock released');
my $t2 = sql($s2, "SELECT rlock_fenced_acquire('fence:$rw', NULL)");
cmp_ok($t2, '>', $t1, "fencing tokens increase ($t1, $t2)");
is(sql($s2, "SELECT rlock_release('fence:$rw')"), 't', 'released');

# ---- replica acknowledgement per master ----

sub wait_calls { return RlockTest::command_calls($_[0], 'wait'); }
my $m2 = $c->master_of($acct[2]);
my %w0 = map { $_->port => wait_calls($_) } @masters;
is(sql($s1, "SELECT rlock_try_acquire('$acct[2]', NULL)"), 't', 'an acquisition');
is(join(',', map { wait_calls($_) - $w0{ $_->port } } @masters),
	join(',', map { $_->port == $m2->port ? 1 : 0 } @masters),
	'was followed by one WAIT, on its own master (which has a replica)');
is(sql($s1, "SELECT rlock_release('$acct[2]')"), 't', 'released');

# no warnings or lost locks in all this, no CROSSSLOT
my $log = slurp_file($node->logfile);
my %lost = map { $_ => 1 } $log =~ /lock "([^"]+)"[^\n]*(?:was lost|is lost)/g;
is(join(',', sort keys %lost), $acct[1],
	'the only lock reported lost in all this is the one deleted by hand');
unlike($log, qr/CROSSSLOT/, 'no CROSSSLOT error in the server log');

$s1->quit;
$s2->quit;
$node->stop;
done_testing();
