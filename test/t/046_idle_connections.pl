# Copyright (c) 2026, rlock developers
#
# Idle connections are closed even in a session that issues nothing
# (rlock.connection_idle_timeout, here 1 s; connection.c's idle timer), and
# rlock_stats.open_connections counts the Redis connections open now:
#   - a session that took and released a lock, then sits idle, loses its
#     connection (its client rlock:<server>:<pid> leaves Redis's CLIENT LIST) while
#     it sends nothing at all; open_connections, read from a session that
#     never uses Redis, drops with it; the session's next lock reconnects
#     without an error or a WARNING;
#   - a session that holds a session-level lock while idle keeps it (the
#     watchdog renews it after the connection closed) and releases it fine;
#   - a session waiting for a lock keeps its subscriber connection, and
#     gets the lock when it is released; idle then, its two connections,
#     last used at different times, are closed in turn;
#   - 20 idle sessions: every backend's connection closes, and
#     open_connections falls to the watchdog's own;
#   - over TLS too.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use RlockTest;

my $redis = RlockTest::Redis->new;
my $node = RlockTest::new_node('idle', $redis,
	extra_conf => "rlock.connection_idle_timeout = '1s'\nmax_connections = 40\n");

sub q1
{
	my ($s, $sql) = @_;
	my ($out, $err) = RlockTest::query_err($s, $sql);
	return $out;
}

sub session { return $node->background_psql('postgres', on_error_stop => 0); }

# (stdout/stderr) of $sql in session $s: "out/" when there was no message.
sub out_err
{
	my ($s, $sql) = @_;
	my ($out, $err) = RlockTest::query_err($s, $sql);
	return "$out/$err";
}

# Ids of the connections of $r's CLIENT LIST named $name, or matching a
# regular expression.
sub conn_ids
{
	my ($r, $name) = @_;
	my @ids = sort { $a <=> $b } map { $_->{id} }
	  grep {
		my $n = $_->{name} // '';
		ref $name ? $n =~ $name : $n eq $name
	  } $r->clients;
	return @ids;
}

# The monitor: a session that only ever reads rlock_stats, which needs no
# Redis connection of its own.
my $mon = session();
sub open_connections { return q1($mon, 'SELECT open_connections FROM rlock_stats'); }

# open_connections matches Redis's count of rlock's clients (backends and
# the watchdog), at some moment before $timeout_s.
sub gauge_matches_redis
{
	my ($r, $timeout_s) = @_;
	return RlockTest::wait_until(
		sub {
			my $before = scalar(conn_ids($r, qr/^rlock:/));
			my $gauge = open_connections();
			return $gauge eq $before && $before == scalar(conn_ids($r, qr/^rlock:/));
		},
		$timeout_s // 60);
}

# Are the only rlock clients of $r the watchdog's, and does open_connections
# count just those?
sub watchdog_only
{
	my ($r) = @_;
	my @w = conn_ids($r, qr/^rlock:idle:watchdog:/);
	return conn_ids($r, qr/^rlock:/) == @w && open_connections() eq scalar(@w)
	  && conn_ids($r, qr/^rlock:/) == @w;
}

# Wait (no fixed sleep) until no connection named rlock:<server>:<pid> is left.
sub gone_within
{
	my ($r, $pid, $timeout_s) = @_;
	return RlockTest::wait_until(sub { conn_ids($r, "rlock:idle:$pid") == 0 },
		$timeout_s // 60);
}

# ---- a session that sits idle ----

my $a = session();
my $a_pid = q1($a, 'SELECT pg_backend_pid()');
is(q1($a, 'SHOW rlock.connection_idle_timeout'), '1s',
	'rlock.connection_idle_timeout is 1 s here');
is(out_err($a, "SELECT rlock_try_acquire('ic_a', '1 minute'), rlock_release('ic_a')"),
	't|t/', 'a session takes and releases a lock');
my @a_ids = conn_ids($redis, "rlock:idle:$a_pid");
cmp_ok(scalar(@a_ids), '>=', 1, "its connection shows in CLIENT LIST as rlock:$a_pid")
  or RlockTest::stop_file('the session has no connection to watch');
cmp_ok(open_connections(), '>=', scalar(@a_ids),
	'rlock_stats.open_connections counts it');
ok(gauge_matches_redis($redis),
	'open_connections is the number of rlock clients Redis shows');
ok(gone_within($redis, $a_pid),
	'the session sends nothing, and its connection is closed after 1 s unused');
ok(gauge_matches_redis($redis), 'open_connections dropped with it');
ok(RlockTest::wait_until(sub { watchdog_only($redis) }, 60),
	'what is left open is the watchdog\'s')
  or diag(join("\n", map { "$_->{id} $_->{name}" } $redis->clients));

is(out_err($a, "SELECT rlock_try_acquire('ic_a2', '1 minute')"), 't/',
	'the idle session takes a lock again: no error, no WARNING');
my @a_ids2 = conn_ids($redis, "rlock:idle:$a_pid");
cmp_ok(scalar(@a_ids2), '>=', 1, 'its connection is back');
ok(!(grep { my $i = $_; grep { $_ eq $i } @a_ids } @a_ids2),
	'a new one (not the closed one)');
is($redis->cli('HGET', 'ic_a2', RlockTest::holder_of($a)), '1',
	'the lock is in Redis');
is(out_err($a, "SELECT rlock_release('ic_a2')"), 't/', 'and released');

# A second round: the timer is armed again at each transaction end.
ok(gone_within($redis, $a_pid), 'idle again: closed again');
is(out_err($a, "SELECT rlock_try_acquire('ic_a3', '1 minute'), rlock_release('ic_a3')"),
	't|t/', 'and reopened again on demand');

# ---- a session holding a session-level lock while idle ----

my $b = session();
my $b_pid = q1($b, 'SELECT pg_backend_pid()');
my $b_holder = RlockTest::holder_of($b);
is(out_err($b, "SELECT rlock_acquire('ic_held')"), '/',
	'a session takes a lock renewed by the watchdog');
ok(gone_within($redis, $b_pid), 'idle: its connection is closed');
is($redis->cli('HGET', 'ic_held', $b_holder), '1',
	'the lock is still held in Redis');
my ($renewed) = RlockTest::renewed_on($redis, 'ic_held', 30);
ok($renewed, 'the watchdog renews it after the connection closed');
is(conn_ids($redis, "rlock:idle:$b_pid"), 0, 'the session still has no connection');
is(out_err($b, "SELECT rlock_release('ic_held')"), 't/',
	'the session releases it fine');
is($redis->cli('EXISTS', 'ic_held'), '0', 'and it is gone from Redis');

# ---- a session waiting for a lock ----

my $c = session();
my $c_pid = q1($c, 'SELECT pg_backend_pid()');
my $d = session();
my $d_pid = q1($d, 'SELECT pg_backend_pid()');
is(out_err($c, "SELECT rlock_acquire('ic_wait', '10 minutes')"), '/',
	'a session holds a lock');
RlockTest::start_bg($d, "SELECT rlock_acquire('ic_wait', '10 minutes')");
RlockTest::wait_for_rlock_waiters($node, 'postgres', 1, "%rlock_acquire('ic_wait'%");
my ($sub) = grep { ($_->{name} // '') eq "rlock:idle:$d_pid" && ($_->{sub} // 0) > 0 }
  $redis->clients;
ok($sub, 'another waits for it on a subscribed connection')
  or diag(join("\n", map { "$_->{id} $_->{name} sub=$_->{sub}" } $redis->clients));
my $sub_id = $sub ? $sub->{id} : -1;
my $sub_seen = time();
ok(gone_within($redis, $c_pid), 'the idle holder\'s connection is closed');
# (what is checked is that nothing happens: time must pass, twice the
# idle timeout at least)
my $left = $sub_seen + 2.5 - time();
usleep(int($left * 1e6)) if $left > 0;
ok(!RlockTest::bg_done($d), 'the waiter is still waiting');
ok((grep { $_ == $sub_id } conn_ids($redis, "rlock:idle:$d_pid")),
	'on the same subscribed connection, 2.5 s later');
is(out_err($c, "SELECT rlock_release('ic_wait')"), 't/',
	'the holder releases (reconnecting)');
ok(RlockTest::wait_until(sub { RlockTest::bg_done($d) }, 60),
	'the waiter gets the lock');
my ($out, $err, $state) = RlockTest::bg_result($d);
is("$err/$state", '/00000', 'without an error or a WARNING');
is(q1($d, "SELECT rlock_hold_count('ic_wait')"), '1', 'it holds it');
# Its two connections were last used at different times (the subscriber at
# the release message, the commands one at its own release, later): the
# timer, armed for the older, closes it, then re-arms for the other.
q1($d, 'SELECT pg_sleep(0.5)');
is(out_err($d, "SELECT rlock_release('ic_wait')"), 't/', 'and releases it');
cmp_ok(scalar(conn_ids($redis, "rlock:idle:$d_pid")), '==', 2,
	'it has two connections open, a subscriber and a commands one');
ok(gone_within($redis, $d_pid),
	'idle: both close in turn (the timer re-arms for the younger one)');

# ---- a pool of 20 idle sessions ----

my @pool = map { session() } 1 .. 20;
my @pids;
my $all_ok = 1;
foreach my $i (0 .. $#pool)
{
	push @pids, q1($pool[$i], 'SELECT pg_backend_pid()');
	$all_ok &&= out_err($pool[$i],
		"SELECT rlock_try_acquire('ic_pool_$i', '1 minute'), rlock_release('ic_pool_$i')")
	  eq 't|t/';
}
ok($all_ok, '20 sessions each take and release a lock');
my $opened = grep { my $p = $_; conn_ids($redis, "rlock:idle:$p") > 0 } @pids;
note "$opened of the 20 still have their connection open";
ok( RlockTest::wait_until(
		sub {
			!(grep { my $p = $_; conn_ids($redis, "rlock:idle:$p") > 0 } @pids);
		},
		60),
	'then sit idle: every one of their connections is closed');
ok(RlockTest::wait_until(sub { watchdog_only($redis) }, 60),
	'open_connections falls to the watchdog\'s own, as Redis sees them');
$_->quit foreach @pool;

# ---- over TLS ----

my $tls = RlockTest::Redis->new(tls => 1);
RlockTest::set_gucs($node,
	'rlock.redis_url' => $tls->url,
	'rlock.tls_ca_file' => $tls->ca_file,
	'rlock.tls_cert_file' => $tls->client_cert_file,
	'rlock.tls_key_file' => $tls->client_key_file);
my $t = session();
my $t_pid = q1($t, 'SELECT pg_backend_pid()');
is(out_err($t, "SELECT rlock_try_acquire('ic_tls', '1 minute'), rlock_release('ic_tls')"),
	't|t/', 'over TLS: a session takes and releases a lock');
cmp_ok(scalar(conn_ids($tls, "rlock:idle:$t_pid")), '>=', 1, 'over a TLS connection');
ok(gone_within($tls, $t_pid), 'idle: the TLS connection is closed');
is(out_err($t, "SELECT rlock_try_acquire('ic_tls', '1 minute'), rlock_release('ic_tls')"),
	't|t/', 'and the next lock reconnects without an error or a WARNING');
ok(gauge_matches_redis($tls), 'open_connections matches the TLS Redis\'s clients');
$t->quit;

$_->quit foreach ($a, $b, $c, $d, $mon);

my @bad = grep { /PANIC|TRAP|server process .* was terminated/ }
  split /\n/, slurp_file($node->logfile);
is(scalar(@bad), 0, 'no crash in the server log') or diag(join("\n", @bad));

done_testing();
