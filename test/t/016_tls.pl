# Copyright (c) 2026, rlock developers
#
# rediss:// (TLS, section 10 of the spec): a Redis that speaks TLS only
# (tls-port, port 0) and asks for client certificates.
#   - full verification (CA and host name, client certificate) works, with
#     the URL's address or with rlock.tls_server_name; the background worker
#     renews over TLS;
#   - a Redisson client on the TLS port and rlock exclude each other and
#     wake each other;
#   - each handshake failure is an ERROR 08001 naming the cause in its
#     DETAIL (unknown CA, host name mismatch, no client certificate,
#     expired certificate), within rlock.connect_timeout;
#     rlock.tls_verify = ca / none relax what is checked;
#   - a handshake that never completes ends within rlock.connect_timeout and
#     can be cancelled;
#   - Redis restarted: the next call reconnects by itself.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use RlockTest;

my $connect_timeout = 2;     # seconds: rlock.connect_timeout below
my $slack = 3;               # what an error may take beyond it

my $redis = RlockTest::Redis->new(tls => 1);    # tls-auth-clients yes
my $port = $redis->port;
my %good = (
	'rlock.redis_url' => $redis->url,
	'rlock.tls_ca_file' => $redis->ca_file,
	'rlock.tls_cert_file' => $redis->client_cert_file,
	'rlock.tls_key_file' => $redis->client_key_file,
	'rlock.tls_verify' => 'full',
	'rlock.tls_server_name' => '');
my $node = RlockTest::new_node('tls', $redis,
	extra_conf => join('', map { "$_ = '$good{$_}'\n" } sort keys %good)
	  . "rlock.connect_timeout = '${connect_timeout}s'\n");

sub q1
{
	my ($s, $sql) = @_;
	my ($out, $err) = RlockTest::query_err($s, $sql);
	return $out;
}

sub session { return $node->background_psql('postgres', on_error_stop => 0); }

# Everything below needs the first rlock call to work: when it does not,
# stop this file (it has failed) instead of meeting a timeout at each step.
sub stop_here { return RlockTest::stop_file(@_); }

sub set_gucs { return RlockTest::set_gucs($node, @_); }

# Run $sql in a new session; returns (stdout, stderr, SQLSTATE, seconds).
sub in_new_session
{
	my ($sql) = @_;
	my $s = session();
	my $t0 = time();
	my ($out, $err, $state) = RlockTest::run_sql($s, $sql);
	my $elapsed = time() - $t0;
	$s->quit;
	return ($out, $err, $state, $elapsed);
}

# A handshake failure: ERROR 08001 naming Redis and the lock, a DETAIL
# starting with the cause, within connect_timeout.
sub handshake_fails
{
	my ($what, $lock, $cause) = @_;
	my ($out, $err, $state, $elapsed) =
	  in_new_session("SELECT rlock_try_acquire('$lock', '10s')");
	is($state, '08001', "$what: SQLSTATE 08001");
	like($err,
		qr/ERROR:  TLS handshake with Redis at 127\.0\.0\.1:$port failed for lock "$lock"\n/,
		"$what: the error names the TLS handshake, Redis and the lock");
	like($err, qr/^DETAIL:  \Q$cause\E(:|$)/m, "$what: the DETAIL starts with \"$cause\"");
	note "$what: $err";
	note sprintf('%s: the error came after %.3f s', $what, $elapsed);
	cmp_ok($elapsed, '<', $connect_timeout + $slack,
		"$what: within connect_timeout ($connect_timeout s) + $slack s");
	return;
}

my ($out, $err, $state, $elapsed);

# ---- full verification: CA, host name (the URL's address), client certificate ----

my $s = session();
my $other = session();
($out, $err, $state) = RlockTest::run_sql($s, 'SELECT rlock_ping() IS NOT NULL');
is("$out/$err", 't/', 'rlock_ping answers over TLS with full verification')
  or stop_here('rlock does not reach a TLS Redis with full verification');
my $holder = q1($s, 'SELECT rlock_holder_id()');
my $pid = q1($s, 'SELECT pg_backend_pid()');
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_acquire('tls_basic', '1 minute')");
is("$out/$err", '/', 'rlock_acquire over rediss://');
is($redis->cli('HGET', 'tls_basic', $holder), '1', 'the lock is in Redis (read over TLS)');
my $pttl = $redis->cli('PTTL', 'tls_basic');
ok($pttl > 50000 && $pttl <= 60000, "with its lease ($pttl ms)");
is(q1($other, "SELECT rlock_try_acquire('tls_basic', '1 minute')"), 'f',
	'another session cannot take it');
my @named = grep { ($_->{name} // '') eq "rlock:tls:$pid" } $redis->clients;
cmp_ok(scalar(@named), '>=', 1, "the session's connection shows in CLIENT LIST as rlock:tls:$pid");
is(q1($s, "SELECT rlock_release('tls_basic')"), 't', 'rlock_release over rediss://');
is($redis->cli('EXISTS', 'tls_basic'), '0', 'the lock is gone from Redis');

# ---- a Redisson client on the TLS port: exclusion and wake-ups both ways ----

my $java = '6f1c2b9e-3d4a-4e5f-8a7b-9c0d1e2f3a4b:71';
is(RlockTest::Redisson::try_lock($redis, 'tls_orders', 30000, $java), '',
	'a Redisson client takes "tls_orders" over TLS');
is(q1($s, "SELECT rlock_try_acquire('tls_orders', '1 minute')"), 'f',
	'rlock cannot take it');
is(q1($s, "SELECT kind, holder, hold_count FROM rlock_status('tls_orders')"),
	"exclusive|$java|1", 'rlock_status shows the Redisson holder');

# an rlock waiter with a wait, woken by the Redisson client's release
$s->query_until(qr/waiting\n/,
	"\\echo waiting\nSELECT rlock_try_acquire('tls_orders', '1 minute', '50s'), (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;\n"
);
RlockTest::wait_for_rlock_waiters($node, 'postgres', 1,
	"%rlock_try_acquire('tls_orders'%");
my $t_rel = time();
is(RlockTest::Redisson::unlock($redis, 'tls_orders', $java), '1',
	'the Redisson client releases (publishes 0)');
$out = $s->query_until(qr/\|\d+\n/, '');
my ($got, $t_acq) = $out =~ /^(\w)\|(\d+)$/m;
is($got, 't', 'the rlock waiter gets the lock');
my $latency_ms = ($t_acq / 1e6 - $t_rel) * 1000;
diag(sprintf('Redisson release over TLS -> rlock waiter acquired: %.2f ms', $latency_ms));
# the holder's lease was 30 s; rlock rechecks at most every 5 s without a
# message
cmp_ok($latency_ms, '<', 3000, 'woken by the release message, not by a recheck');
is($redis->cli('HGET', 'tls_orders', $holder), '1', 'rlock holds it in Redisson\'s layout');

like(RlockTest::Redisson::try_lock($redis, 'tls_orders', 30000, $java), qr/^\d+$/,
	'the Redisson client cannot take it now (gets the PTTL)');
my ($sub, $subout) = $redis->cli_bg('SUBSCRIBE', 'redisson_lock__channel:{tls_orders}');
ok(RlockTest::wait_until(sub { $sub->pump_nb; $$subout =~ /subscribe/ }, 10),
	'a Redisson-style waiter subscribes over TLS');
is(q1($s, "SELECT rlock_release('tls_orders')"), 't', 'rlock releases');
ok(RlockTest::wait_until(sub { $sub->pump_nb; $$subout =~ /message\nredisson_lock__channel:\{tls_orders\}\n0\n/ }, 10),
	'the waiter gets the "0" rlock published');
$sub->kill_kill;
is(RlockTest::Redisson::try_lock($redis, 'tls_orders', 30000, $java), '',
	'now the Redisson client gets it');
is(RlockTest::Redisson::unlock($redis, 'tls_orders', $java), '1', 'and releases it');

# ---- the background worker renews over TLS ----

q1($s, "SELECT rlock_acquire('tls_wd')");
my $wpid = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'rlock watchdog'");
ok( RlockTest::wait_until(sub {
		grep { ($_->{name} // '') eq "rlock:tls:watchdog:$wpid" } $redis->clients }, 30),
	"the worker is connected over TLS (CLIENT LIST: rlock:tls:watchdog:$wpid)");
# watchdog_timeout is 2 s: without renewals the key would be gone after 2 s
for my $i (1 .. 4)
{
	sleep(2);
	$pttl = $redis->cli('PTTL', 'tls_wd');
	ok($pttl > 0 && $pttl <= 2000,
		sprintf('%d s after the acquisition the lease is still being renewed (PTTL %s ms)', 2 * $i, $pttl));
}
is(q1($other, "SELECT rlock_try_acquire('tls_wd', '1 minute')"), 'f',
	'after 4 x watchdog_timeout the lock is still held');
is(q1($s, "SELECT count(*) FROM rlock_locks WHERE name = 'tls_wd' AND state = 'held' AND renewed_at > acquired_at + interval '4 seconds'"),
	'1', 'rlock_locks shows the renewals');
is(q1($s, "SELECT rlock_release('tls_wd')"), 't', 'released');
$s->quit;
$other->quit;

# ---- host names: localhost in the URL, tls_server_name ----

SKIP:
{
	# (a bare chroot may have no /etc/hosts: then "localhost" is a DNS query)
	my $hosts = -r '/etc/hosts' ? slurp_file('/etc/hosts') : '';
	skip 'no "127.0.0.1 localhost" line in /etc/hosts', 1
	  unless $hosts =~ /^\s*127\.0\.0\.1\s.*\blocalhost\b/m;
	set_gucs('rlock.redis_url' => $redis->url(host => 'localhost'));
	($out, $err) = in_new_session("SELECT rlock_try_acquire('tls_name', '10s'), rlock_release('tls_name')");
	is("$out/$err", 't|t/', 'rediss://localhost:<port> verifies (DNS:localhost in the certificate)');
}
set_gucs('rlock.redis_url' => $redis->url, 'rlock.tls_server_name' => 'localhost');
($out, $err) = in_new_session("SELECT rlock_try_acquire('tls_name', '10s'), rlock_release('tls_name')");
is("$out/$err", 't|t/', 'tls_server_name = localhost with the URL\'s 127.0.0.1 verifies');

# ---- handshake failures ----

set_gucs('rlock.tls_server_name' => 'not-the-server.example');
handshake_fails('tls_server_name not in the certificate', 'tls_mismatch', 'host name mismatch');
set_gucs('rlock.tls_verify' => 'ca');
($out, $err) = in_new_session("SELECT rlock_try_acquire('tls_mismatch', '10s'), rlock_release('tls_mismatch')");
is("$out/$err", 't|t/', 'tls_verify = ca: the same name mismatch connects (CA checked only)');

set_gucs('rlock.tls_verify' => 'full', 'rlock.tls_server_name' => '',
	'rlock.tls_ca_file' => $redis->wrong_ca_file);
handshake_fails('a CA that did not sign the server certificate', 'tls_wrong_ca',
	'unknown certificate authority');
($out, $err, $state) = in_new_session('SELECT rlock_ping()');
is($state, '08001', 'rlock_ping: 08001 too');
like($err, qr/ERROR:  TLS handshake with Redis at 127\.0\.0\.1:$port failed\n/,
	'rlock_ping: the message names no lock');
set_gucs('rlock.tls_verify' => 'ca');
($out, $err, $state) = in_new_session("SELECT rlock_try_acquire('tls_wrong_ca', '10s')");
is($state, '08001', 'tls_verify = ca still refuses the unknown CA');
set_gucs('rlock.tls_verify' => 'none');
($out, $err) = in_new_session("SELECT rlock_try_acquire('tls_wrong_ca', '10s'), rlock_release('tls_wrong_ca')");
is("$out/$err", 't|t/', 'tls_verify = none connects with the wrong CA');

set_gucs('rlock.tls_verify' => 'full', 'rlock.tls_ca_file' => $redis->ca_file,
	'rlock.tls_cert_file' => '', 'rlock.tls_key_file' => '');
handshake_fails('no client certificate (tls-auth-clients yes)', 'tls_no_cert',
	'no client certificate');
$redis->restart(tls_auth_clients => 'optional');
($out, $err) = in_new_session("SELECT rlock_try_acquire('tls_no_cert', '10s'), rlock_release('tls_no_cert')");
is("$out/$err", 't|t/', 'without a client certificate rlock connects to a Redis with tls-auth-clients optional');
$redis->restart(tls_auth_clients => 'yes');
set_gucs('rlock.tls_cert_file' => $redis->client_cert_file,
	'rlock.tls_key_file' => $redis->client_key_file);

# A client key that cannot be loaded: the error names the setting, not its
# path (rlock.tls_key_file is hidden from plain roles, whose calls connect
# too).
$node->safe_psql('postgres', 'CREATE ROLE tls_plain LOGIN');
my $hidden_key = '/nonexistent/hidden-dir-4711/client.key';
set_gucs('rlock.tls_key_file' => $hidden_key);
{
	my ($rc, $o, $e) = $node->psql('postgres',
		"SELECT rlock_try_acquire('tls_bad_key', '10s')",
		extra_params => [ '-U', 'tls_plain' ]);
	like($e, qr/ERROR:  could not connect to Redis at 127\.0\.0\.1:$port for lock "tls_bad_key": could not load the client key of rlock\.tls_key_file: /,
		'an unloadable client key: the ERROR names rlock.tls_key_file');
	unlike($e, qr/hidden-dir-4711/, 'but not its path, which a plain role may not see');
	is($redis->cli('EXISTS', 'tls_bad_key'), '0', 'and no lock was taken');
	note "unloadable key: $e";
}
set_gucs('rlock.tls_key_file' => $redis->client_key_file);

$redis->restart(server_cert => 'expired');
handshake_fails('an expired server certificate', 'tls_expired', 'certificate expired');
set_gucs('rlock.tls_verify' => 'none');
($out, $err) = in_new_session("SELECT rlock_try_acquire('tls_expired', '10s'), rlock_release('tls_expired')");
is("$out/$err", 't|t/', 'tls_verify = none connects despite the expired certificate');
set_gucs('rlock.tls_verify' => 'full');
$redis->restart(server_cert => 'server');
($out, $err) = in_new_session("SELECT rlock_try_acquire('tls_expired', '10s'), rlock_release('tls_expired')");
is("$out/$err", 't|t/', 'full verification again with the valid certificate');

# ---- a handshake that never completes: bounded, and cancellable ----

my $proxy = RlockTest::Proxy->new($redis);
my $pport = $proxy->port;
set_gucs('rlock.redis_url' => $proxy->url);
($out, $err) = in_new_session("SELECT rlock_try_acquire('tls_stall', '10s'), rlock_release('tls_stall')");
is("$out/$err", 't|t/', 'TLS through a TCP proxy (rediss://127.0.0.1:<proxy port>) works');
$proxy->stall;    # connections are accepted, nothing passes
($out, $err, $state, $elapsed) = in_new_session("SELECT rlock_try_acquire('tls_stall', '10s')");
is($state, '08001', 'a server that accepts but never answers the handshake: SQLSTATE 08001');
like($err, qr/ERROR:  (TLS handshake with|could not connect to|timed out connecting to) Redis at 127\.0\.0\.1:$pport\b.*for lock "tls_stall"/,
	'the error names Redis and the lock');
note "stalled handshake: $err";
note sprintf('the error came after %.3f s', $elapsed);
cmp_ok($elapsed, '<', $connect_timeout + $slack,
	"within connect_timeout ($connect_timeout s) + $slack s");

$s = session();
my $s_pid = q1($s, 'SELECT pg_backend_pid()');
q1($s, "SET rlock.connect_timeout = '60s'");
my $accepted = $proxy->connections;
$s->query_until(qr/started\n/, "\\echo started\nSELECT rlock_try_acquire('tls_stall', '10s');\n");
# once the proxy has accepted its connection, the session is in the
# handshake, which cannot complete
ok(RlockTest::wait_until(sub { $proxy->connections > $accepted }, 30),
	'the session connects and starts its TLS handshake');
my $t0 = time();
$node->safe_psql('postgres', "SELECT pg_cancel_backend($s_pid)");
ok( RlockTest::wait_until(sub {
		$s->{run}->pump_nb;
		return $s->{stderr} =~ /canceling statement due to user request/; }, 30),
	'pg_cancel_backend interrupts a stalled TLS handshake');
$elapsed = time() - $t0;
note sprintf('cancelled after %.3f s', $elapsed);
cmp_ok($elapsed, '<', 10, 'well before connect_timeout (60 s)');
$s->quit;
$proxy->resume;
$proxy->stop;
set_gucs('rlock.redis_url' => $redis->url);

# ---- Redis stopped and restarted: the next call reconnects ----

$s = session();
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_acquire('tls_kept', '1 minute')");
is("$out/$err", '/', 'a session holds a lock over TLS');
$redis->stop;
($out, $err, $state) = RlockTest::run_sql($s, "SELECT rlock_try_acquire('tls_down', '10s')");
like($state, qr/^080(01|06)$/, "Redis down: SQLSTATE $state");
$redis->start;
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_try_acquire('tls_down', '10s')");
is("$out/$err", 't/', 'Redis back (TLS, empty): the next call reconnects and works');
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_release('tls_kept')");
is($out, 'f', 'the lock held before the restart is reported lost on release');
like($err, qr/WARNING:  lock "tls_kept" was lost/, 'with a WARNING naming it');
is(q1($s, "SELECT rlock_release('tls_down')"), 't', 'release works');

$redis->restart;
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_try_acquire('tls_again', '10s'), rlock_release('tls_again')");
is("$out/$err", 't|t/', 'a restart while the session is idle goes unnoticed');

# the worker reconnects too: a lock taken now is renewed
q1($s, "SELECT rlock_acquire('tls_wd2')");
ok( RlockTest::wait_until(sub {
		q1($s, "SELECT count(*) FROM rlock_locks WHERE name = 'tls_wd2' AND state = 'held' AND renewed_at > acquired_at + interval '2 seconds'") eq '1' }, 30),
	'after the restart the worker renews over TLS again');
$pttl = $redis->cli('PTTL', 'tls_wd2');
ok($pttl > 0 && $pttl <= 2000, "the key's TTL stays within the watchdog lease ($pttl ms)");
is(q1($s, "SELECT rlock_release('tls_wd2')"), 't', 'released');
$s->quit;

done_testing();
