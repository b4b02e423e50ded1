# Copyright (c) 2026, rlock developers
#
# Redis faults: stopped, restarted, slow, wrong password, wrong database.
# Every failure is a clear ERROR with a SQLSTATE within its time bound, the
# session stays usable, the next call after Redis is back reconnects by
# itself, and an acquire interrupted in flight never leaves a hold behind.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use RlockTest;

my $redis =
  RlockTest::Redis->new(args => [ RlockTest::Redis::debug_command_args() ]);
my $node = RlockTest::new_node('faults', $redis);
my $s = $node->background_psql('postgres', on_error_stop => 0);


# Start DEBUG SLEEP $secs in the background and return once Redis is busy
# in it (a PING gets no answer within 0.3 s), so that the next call surely
# meets a Redis that does not answer.
sub redis_sleep
{
	my ($secs) = @_;
	my ($sleeper) = $redis->cli_bg('DEBUG', 'SLEEP', $secs);
	RlockTest::wait_until(
		sub {
			my ($o, $e);
			IPC::Run::run([ 'timeout', '0.3', 'redis-cli', '-h', '127.0.0.1',
					'-p', $redis->port, 'PING' ],
				'<', \undef, '>', \$o, '2>', \$e);
			return ($o // '') !~ /PONG/;
		},
		10)
	  or die 'Redis did not start sleeping';
	return $sleeper;
}

my ($out, $err, $state, $t0, $elapsed);

# ---- Redis stopped ----

($out) = RlockTest::run_sql($s, "SELECT rlock_acquire('kept', '1 minute')");
RlockTest::run_sql($s, "SET rlock.connect_timeout = '500ms'");
$redis->stop;

$t0 = time();
($out, $err, $state) = RlockTest::run_sql($s, "SELECT rlock_try_acquire('down', '10s')");
$elapsed = time() - $t0;
like($state, qr/^080(01|06)$/, "Redis down: SQLSTATE $state");
like($err, qr/ERROR:  (could not connect to|lost connection to) Redis at 127\.0\.0\.1:\d+ for lock "down"/,
	'the error names Redis and the lock');
like($err, qr/HINT:.*rlock\.redis_url/, 'the hint names rlock.redis_url');
note sprintf('the error came after %.3f s', $elapsed);
# (a refused connection is retried for rlock.retry_timeout, 2 s: SPEC 6)
cmp_ok($elapsed, '<', 2 + 0.5 + 2.5,
	'within retry_timeout + connect_timeout + margin');

($out, $err, $state) = RlockTest::run_sql($s, 'SELECT rlock_ping()');
is($state, '08001', 'rlock_ping fails with 08001 while Redis is down');
($out, $err, $state) = RlockTest::run_sql($s, 'SELECT 40 + 2');
is($out, '42', 'the session stays usable');

# Redis comes back empty, as after a restart without persistence.
$redis->start;
($out, $err, $state) = RlockTest::run_sql($s, "SELECT rlock_try_acquire('down', '10s')");
is($out, 't', 'after Redis is back the next call works, no reconnect by hand');
is($err, '', 'without any error');
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_release('kept')");
is($out, 'f', 'a lock held before the restart is reported lost on release');
like($err, qr/WARNING:  lock "kept" was lost/, 'with a WARNING naming it');
($out) = RlockTest::run_sql($s, "SELECT rlock_release('down')");
is($out, 't', 'release works');

# A restart while the session is idle: the broken connection is replaced.
$redis->stop;
$redis->start;
($out, $err, $state) = RlockTest::run_sql($s, "SELECT rlock_try_acquire('again', '10s'), rlock_release('again')");
is("$out/$err", 't|t/', 'a restart between calls goes unnoticed');

# ---- Redis slow: command_timeout, and an acquire interrupted in flight ----

RlockTest::run_sql($s, "SET rlock.command_timeout = '300ms'");
my $sleeper = redis_sleep(5);
$t0 = time();
($out, $err, $state) = RlockTest::run_sql($s, "SELECT rlock_try_acquire('slow', '1 minute')");
$elapsed = time() - $t0;
is($state, '08006', 'Redis not answering: SQLSTATE 08006');
like($err, qr/Redis at 127\.0\.0\.1:\d+ did not answer in time for lock "slow"/,
	'the error says Redis did not answer, naming the lock');
# each round trip of the failed call (the acquire, and taking back what it
# may have granted) is bounded by command_timeout; a call that waited for
# Redis to answer would take the rest of the 5 s sleep
note sprintf('the error came after %.3f s', $elapsed);
cmp_ok($elapsed, '<', 3, 'within command_timeout + margin, not after Redis woke up');
$sleeper->finish;
ok( RlockTest::wait_until(
		sub { ($redis->cli('PING') // '') eq 'PONG' }, 15),
	'Redis answers again');
# The timed-out script may still have run once Redis woke up.  The next
# call reconciles: whatever it granted is taken back.
($out, $err, $state) = RlockTest::run_sql($s,
	"SELECT rlock_is_locked('slow'), rlock_hold_count('slow')");
is($out, 'f|0', 'the interrupted acquire left no hold behind');
is($redis->cli('EXISTS', 'slow'), '0', 'and nothing in Redis');

# The same with statement_timeout interrupting the round trip.
RlockTest::run_sql($s, "SET rlock.command_timeout = '10s'");
RlockTest::run_sql($s, "SET statement_timeout = '200ms'");
$sleeper = redis_sleep(3);
($out, $err, $state) = RlockTest::run_sql($s, "SELECT rlock_acquire('slow2', '1 minute')");
is($state, '57014', 'statement_timeout interrupts a Redis round trip');
RlockTest::run_sql($s, 'RESET statement_timeout');
$sleeper->finish;
($out, $err, $state) = RlockTest::run_sql($s,
	"SELECT rlock_is_locked('slow2'), rlock_hold_count('slow2')");
is($out, 'f|0', 'the cancelled acquire left no hold behind');
is($redis->cli('EXISTS', 'slow2'), '0', 'and nothing in Redis');
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_try_acquire('slow2', '1 minute'), rlock_hold_count('slow2'), rlock_release('slow2')");
is("$out/$err", 't|1|t/', 'the session then locks normally');
$s->quit;

# ---- authentication and database number ----

my $secured = RlockTest::Redis->new(password => 'sekret');
my $port = $secured->port;

# Point the server at a URL, reload, wait until new sessions see it.
sub set_url
{
	my ($url, $shown) = @_;
	$node->safe_psql('postgres', "ALTER SYSTEM SET rlock.redis_url = '$url'");
	$node->reload;
	$node->poll_query_until('postgres',
		"SELECT current_setting('rlock.redis_url') = '$shown'")
	  or die "rlock.redis_url did not become $shown";
}

set_url("redis://default:wrongpw\@127.0.0.1:$port/0",
	"redis://default:********\@127.0.0.1:$port/0");
$s = $node->background_psql('postgres', on_error_stop => 0);
($out, $err, $state) = RlockTest::run_sql($s, "SELECT rlock_try_acquire('auth', '10s')");
is($state, '28P01', 'a wrong password: SQLSTATE 28P01');
like($err, qr/rejected the credentials of rlock\.redis_url for lock "auth"/,
	'the error says the credentials were rejected');
unlike($err, qr/wrongpw/, 'without showing the password');
($out) = RlockTest::run_sql($s, 'SHOW rlock.redis_url');
unlike($out, qr/wrongpw/, 'SHOW hides the password');
$s->quit;

# A '#' in the password is the password's, as the URL is read: masked too,
# in SHOW, pg_settings and the reload's log line.
{
	my $logpos = -s $node->logfile;
	# (the statement itself is not logged)
	my $q = $node->background_psql('postgres', on_error_stop => 0);
	my ($o, $e) = RlockTest::run_sql($q,
		"SET log_statement = 'none'; SET log_min_error_statement = 'panic'");
	($o, $e) = RlockTest::run_sql($q,
		"ALTER SYSTEM SET rlock.redis_url = 'redis://default:wr#ngpw\@127.0.0.1:$port/2'");
	is($e, '', "a password with a '#' in it set");
	$q->quit;
	$node->reload;
	$node->poll_query_until('postgres',
		"SELECT current_setting('rlock.redis_url') LIKE '%127.0.0.1:$port/2'")
	  or die "rlock.redis_url did not change";
	is($node->safe_psql('postgres', 'SHOW rlock.redis_url'),
		"redis://default:********\@127.0.0.1:$port/2",
		"a password with a '#' in it is masked in SHOW");
	is($node->safe_psql('postgres',
			"SELECT setting FROM pg_settings WHERE name = 'rlock.redis_url'"),
		"redis://default:********\@127.0.0.1:$port/2", '... and in pg_settings');
	ok(RlockTest::wait_until(
			sub { slurp_file($node->logfile, $logpos) =~ /"rlock\.redis_url" changed/ }, 30),
		'... the reload is logged');
	unlike(slurp_file($node->logfile, $logpos), qr/wr#ngpw/, '... without it');
}

set_url("redis://127.0.0.1:$port/0", "redis://127.0.0.1:$port/0");
$s = $node->background_psql('postgres', on_error_stop => 0);
($out, $err, $state) = RlockTest::run_sql($s, "SELECT rlock_try_acquire('auth', '10s')");
is($state, '28000', 'no password for a Redis that needs one: SQLSTATE 28000');
like($err, qr/Redis requires authentication for lock "auth"/,
	'the error says Redis requires authentication');

# The session follows a reload by reconnecting on its next call.
set_url("redis://:sekret\@127.0.0.1:$port/0",
	"redis://:********\@127.0.0.1:$port/0");
usleep(100_000);
($out, $err, $state) = RlockTest::run_sql($s, "SELECT rlock_try_acquire('auth', '10s'), rlock_release('auth')");
is("$out/$err", 't|t/', 'after a reload with the right password the same session works');
$s->quit;

set_url("redis://:sekret\@127.0.0.1:$port/99",
	"redis://:********\@127.0.0.1:$port/99");
$s = $node->background_psql('postgres', on_error_stop => 0);
($out, $err, $state) = RlockTest::run_sql($s, "SELECT rlock_try_acquire('db', '10s')");
is($state, '08001', 'a database number Redis does not have: SQLSTATE 08001');
like($err, qr/rejected the database number of rlock\.redis_url for lock "db"/,
	'the error says the database number was rejected');
$s->quit;

set_url("redis://:sekret\@127.0.0.1:$port/3",
	"redis://:********\@127.0.0.1:$port/3");
$s = $node->background_psql('postgres', on_error_stop => 0);
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_try_acquire('db', '10s')");
is($out, 't', 'with database 3 the lock is taken');
is($secured->cli('-n', '3', 'EXISTS', 'db'), '1', 'in Redis database 3');
is($secured->cli('-n', '0', 'EXISTS', 'db'), '0', 'not in database 0');
$s->quit;

# ---- without shared_preload_libraries ----

my $plain = PostgreSQL::Test::Cluster->new('plain');
$plain->init;
$plain->append_conf('postgresql.conf',
	"rlock.redis_url = '" . $redis->url . "'\n");
$plain->start;
$plain->safe_psql('postgres', 'CREATE EXTENSION rlock');
$s = $plain->background_psql('postgres', on_error_stop => 0);
($out, $err, $state) = RlockTest::run_sql($s, "SELECT rlock_acquire('np')");
is($state, '55000', 'not preloaded: a NULL lease (automatic renewal) is refused');
like($err, qr/HINT:  Add rlock to shared_preload_libraries/,
	'the hint says to preload rlock');
($out, $err, $state) = RlockTest::run_sql($s, 'SELECT * FROM rlock_locks');
is($state, '55000', 'not preloaded: rlock_locks is refused');
like($err, qr/HINT:  Add rlock to shared_preload_libraries/,
	'the hint says to preload rlock');
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_try_acquire('np', '10s'), rlock_release('np')");
is("$out/$err", 't|t/', 'locks with a lease work without preloading');
$s->quit;

done_testing();
