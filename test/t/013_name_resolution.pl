# Copyright (c) 2026, rlock developers
#
# Resolving the host of rlock.redis_url (resolve.c) is bounded by
# rlock.connect_timeout and interruptible.  With a DNS server that never
# answers, rlock_ping() fails with 08001 within connect_timeout instead of
# blocking in getaddrinfo() for the resolver's timeout times its attempts
# (10 s); the wait shows as an Extension wait; cancel, statement_timeout and
# termination end it at once; and a name that does resolve still works.
#
# The DNS server that never answers comes from test/run: it runs the TAP
# suite in a private mount namespace whose /etc/resolv.conf names only a
# loopback UDP listener that reads queries and never replies, and passes a
# name to resolve through it in RLOCK_TEST_SLOW_DNS_HOST.  Without that
# (not run by test/run as root, or no mount namespace) the test skips.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use RlockTest;

my $slow = $ENV{RLOCK_TEST_SLOW_DNS_HOST} // '';
if ($slow eq '')
{
	plan skip_all => 'no DNS server that never answers: '
	  . ($ENV{RLOCK_TEST_SLOW_DNS_UNAVAILABLE}
		  // 'RLOCK_TEST_SLOW_DNS_HOST is not set (test/run, as root, sets one up)');
}

# test/run promised a name whose resolution hangs: make sure, or every
# timing below would prove nothing.
my $t0 = time();
system("timeout 2 getent ahosts \Q$slow\E >/dev/null 2>&1");
my $getent = $? >> 8;
if (!ok($getent == 124, "resolving $slow hangs (getent still waiting after 2 s)"))
{
	diag(sprintf('getent exited %d after %.3f s: the slow DNS server is not in effect',
			$getent, time() - $t0));
	done_testing();
	exit 0;
}

# Redis on both loopback addresses, so that "localhost" works whichever
# address /etc/hosts lists first.
my $redis = RlockTest::Redis->new(args => [ '--bind', '127.0.0.1', '-::1' ]);
my $port = $redis->port;
my $node = RlockTest::new_node('resolve', $redis);


# Point the server at a URL, reload, wait until new sessions see it.
sub set_url
{
	my ($url) = @_;
	RlockTest::set_gucs($node, 'rlock.redis_url' => $url);
	return;
}

# Start $sql in $s without waiting for it; returns the session's pid.
sub start_sql
{
	my ($s, $sql) = @_;
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	chomp $pid;
	$s->{stderr} = '';
	$s->query_until(qr/started\n/, "\\echo started\n$sql;\n\\echo done\n");
	return $pid;
}

# Wait (at most $secs) until backend $pid shows $cond in pg_stat_activity.
sub wait_activity
{
	my ($pid, $cond, $secs) = @_;
	return RlockTest::wait_until(
		sub {
			$node->safe_psql('postgres',
				"SELECT count(*) FROM pg_stat_activity WHERE pid = $pid AND $cond"
			) eq '1';
		},
		$secs);
}

my ($out, $err, $state, $elapsed);
my $s = $node->background_psql('postgres', on_error_stop => 0);
($out, $err, $state) = RlockTest::run_sql($s, 'SELECT rlock_ping() IS NOT NULL');
is("$out/$err", 't/', 'rlock_ping works with a numeric address');
$s->quit;

# ---- a host name whose resolution never finishes ----

set_url("redis://$slow:$port/0");
$s = $node->background_psql('postgres', on_error_stop => 0);
RlockTest::run_sql($s, "SET rlock.connect_timeout = '500ms'");
for my $try (1 .. 2)
{
	$t0 = time();
	($out, $err, $state) = RlockTest::run_sql($s, 'SELECT rlock_ping()');
	$elapsed = time() - $t0;
	is($state, '08001', "unresolvable host, try $try: SQLSTATE 08001");
	like($err, qr/ERROR:  .*Redis at \Q$slow\E:$port/,
		"try $try: the error names the host");
	cmp_ok($elapsed, '<', 0.5 + 1.5,
		sprintf('try %d: it came within connect_timeout + margin (%.3f s), not after the resolver gave up',
			$try, $elapsed));
}
($out, $err) = RlockTest::run_sql($s, 'SELECT 40 + 2');
is("$out/$err", '42/', 'the session stays usable');

# ---- cancel, statement_timeout and termination end the wait ----

RlockTest::run_sql($s, "SET rlock.connect_timeout = '1min'");
my $pid = start_sql($s, 'SELECT rlock_ping()');
ok(wait_activity($pid, "state = 'active' AND query LIKE 'SELECT rlock_ping()%'", 10),
	'rlock_ping is running');
ok( wait_activity($pid, "wait_event_type = 'Extension'", 5),
	'resolving the host shows as an Extension wait in pg_stat_activity');
usleep(200_000);
$t0 = time();
$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
$s->query_until(qr/done\n/, '');
$elapsed = time() - $t0;
like($s->{stderr}, qr/canceling statement due to user request/,
	'pg_cancel_backend cancels rlock_ping while it resolves the host');
cmp_ok($elapsed, '<', 1.5,
	sprintf('at once (%.3f s), with connect_timeout 1 min', $elapsed));

RlockTest::run_sql($s, "SET statement_timeout = '300ms'");
$t0 = time();
($out, $err, $state) = RlockTest::run_sql($s, 'SELECT rlock_ping()');
$elapsed = time() - $t0;
is($state, '57014', 'statement_timeout ends the resolution wait');
cmp_ok($elapsed, '<', 0.3 + 1.2,
	sprintf('within statement_timeout + margin (%.3f s)', $elapsed));
RlockTest::run_sql($s, 'RESET statement_timeout');
($out, $err) = RlockTest::run_sql($s, 'SELECT 40 + 2');
is("$out/$err", '42/', 'the session stays usable');
$s->quit;

my $victim = $node->background_psql('postgres', on_error_stop => 0);
RlockTest::run_sql($victim, "SET rlock.connect_timeout = '1min'");
$pid = start_sql($victim, 'SELECT rlock_ping()');
ok( wait_activity($pid, "wait_event_type = 'Extension'", 5),
	'another session waits resolving the host');
$t0 = time();
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
ok( RlockTest::wait_until(
		sub {
			$node->safe_psql('postgres',
				"SELECT count(*) FROM pg_stat_activity WHERE pid = $pid") eq '0';
		},
		10),
	'pg_terminate_backend ends it');
$elapsed = time() - $t0;
cmp_ok($elapsed, '<', 1.5, sprintf('at once (%.3f s)', $elapsed));
eval { $victim->quit; };

# ---- a name that resolves ----

set_url("redis://localhost:$port/0");
$s = $node->background_psql('postgres', on_error_stop => 0);
($out, $err, $state) = RlockTest::run_sql($s, 'SELECT rlock_ping() IS NOT NULL');
is("$out/$err", 't/', 'rlock_ping works with a host name that resolves (localhost)');
($out, $err) = RlockTest::run_sql($s,
	"SELECT rlock_try_acquire('resolved', '10s'), rlock_release('resolved')");
is("$out/$err", 't|t/', 'and locks work through it');
$s->quit;

ok($node->safe_psql('postgres', 'SELECT 1') eq '1', 'the server is still up');
my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal|PANIC|TRAP:/,
	'no backend crashed');

done_testing();
