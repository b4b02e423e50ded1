# Copyright (c) 2026, rlock developers
#
# A release that meets an outage is not lost (SPEC 6): it is handed to the
# background worker ("stranded": rlock_locks shows it so), a LOG line names
# the lock, its holder and how long it stays in Redis at most, and the
# worker releases it within about a second of Redis answering again, not
# after its lease (30 s here); another LOG line says so.  The explicit
# release (rlock_release returns true with a WARNING), the release at
# session exit and the release at transaction end alike.  The worker's
# retry removes its holder's field only: a Redisson holder of the same
# name (another read hold, or an exclusive lock taken after ours went) is
# never touched.  While a name's release is stranded, its session's
# acquisition of it is refused with 55P03.  A lease that runs out while
# Redis stays away ends the worker's tries, with a LOG line.
#
# Redis is made unreachable by a proxy that refuses connections and cuts
# the open ones (its data kept); nothing waits a fixed time: every step
# polls, with generous bounds.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use RlockTest;

my $redis = RlockTest::Redis->new;
my $proxy = RlockTest::Proxy->new($redis);
my $node = RlockTest::new_node('stranded', $proxy, watchdog_timeout => '30s');

# Redis unreachable for PostgreSQL: new connections refused, open ones cut.
sub outage
{
	$proxy->refuse;
	$proxy->cut;
	return;
}

# Redis back: returns when it was, for the delay measured after it.
sub back
{
	my $t0 = time();
	$proxy->accept;
	return $t0;
}

sub exists_in_redis
{
	my ($key) = @_;
	return $redis->cli('EXISTS', $key) eq '1';
}

sub state_of
{
	my ($name) = @_;
	return RlockTest::sql($node,
		"SELECT string_agg(state, ',') FROM rlock_locks WHERE name = '$name'");
}

# Wait until the worker released $key in Redis ($gone->() true), after Redis
# came back at $t0; checks the delay is about a retry, not the lease.
sub released_soon
{
	my ($what, $t0, $gone) = @_;
	my $ok = RlockTest::wait_until($gone, 25);
	my $delay = time() - $t0;
	ok($ok, "$what: released in Redis once Redis answers again");
	note sprintf("%s: released %.2f s after Redis came back", $what, $delay);
	diag sprintf("%s: released %.2f s after Redis came back", $what, $delay);
	# typically 0.25 s (the worker's retry period); the lease had 25 s left
	cmp_ok($delay, '<', 5, "$what: within a few seconds, not after its 30 s lease");
	return;
}

my $s = $node->background_psql('postgres', on_error_stop => 0);
my $holder = RlockTest::holder_of($s);

# ---- an explicit release ----
my ($out, $err, $state) =
  RlockTest::run_sql($s, "SELECT rlock_acquire('st_explicit', '30s')");
is($state, '00000', 'explicit: a session holds a lock with a 30 s lease') or diag($err);
my $offset = -s $node->logfile;
outage();
($out, $err, $state) = RlockTest::run_sql($s, "SELECT rlock_release('st_explicit')");
is($state, '00000', 'explicit: rlock_release during the outage raises no ERROR') or diag($err);
is($out, 't', 'explicit: and returns true: the lock is no longer the session\'s');
like($err, qr/WARNING:.*"st_explicit" could not be released in Redis now/,
	'explicit: a WARNING names the lock');
like($err, qr/background worker releases it/, 'explicit: and says the worker finishes it');
is(state_of('st_explicit'), 'stranded', 'explicit: rlock_locks shows it stranded');
ok(exists_in_redis('st_explicit'), 'explicit: Redis still has it meanwhile');
ok( RlockTest::wait_until(
		sub {
			RlockTest::log_has($node, $offset,
				qr/release of lock "st_explicit" held by \Q$holder\E could not reach Redis.*\n.*at most \d+ ms/
			);
		},
		10),
	'explicit: a LOG line names the lock, its holder and how long it stays in Redis');

# the same name again while its release is stranded: refused, before any I/O
($out, $err, $state) = RlockTest::run_sql($s, "SELECT rlock_try_acquire('st_explicit')");
is($state, '55P03', 'explicit: taking the name again meanwhile is refused (55P03)');
like($err, qr/"st_explicit" is still being released by the background worker/,
	'explicit: the refusal names the lock');

my $t0 = back();
released_soon('explicit', $t0, sub { !exists_in_redis('st_explicit') });
ok( RlockTest::wait_until(
		sub {
			RlockTest::log_has($node, $offset,
				qr/stranded release of exclusive lock "st_explicit" held by \Q$holder\E done: released in Redis/
			);
		},
		10),
	'explicit: a LOG line says the worker released it');
ok(RlockTest::wait_until(sub { state_of('st_explicit') eq '' }, 10),
	'explicit: rlock_locks no longer shows it');
($out, $err, $state) = RlockTest::run_sql($s,
	"SELECT rlock_try_acquire('st_explicit'), rlock_release('st_explicit')");
is($out, 't|t', 'explicit: the session takes the name again afterwards') or diag($err);

# ---- the release at transaction end ----
($out, $err, $state) = RlockTest::run_sql($s,
	"BEGIN; SELECT rlock_xact_acquire('st_xact', '30s')");
is($state, '00000', 'xact: a transaction holds a lock with a 30 s lease') or diag($err);
$offset = -s $node->logfile;
outage();
($out, $err, $state) = RlockTest::run_sql($s, 'ROLLBACK');
is($state, '00000', 'xact: the transaction ends during the outage') or diag($err);
like($err, qr/"st_xact" could not be released in Redis now/,
	'xact: a WARNING says the worker finishes the release');
is(state_of('st_xact'), 'stranded', 'xact: rlock_locks shows it stranded');
ok( RlockTest::wait_until(
		sub {
			RlockTest::log_has($node, $offset,
				qr/release of lock "st_xact" held by \Q$holder\E could not reach Redis.*\n.*at most \d+ ms/
			);
		},
		10),
	'xact: a LOG line names the lock and its holder');
ok(exists_in_redis('st_xact'), 'xact: Redis still has it meanwhile');
$t0 = back();
released_soon('xact', $t0, sub { !exists_in_redis('st_xact') });

# ---- the release at session exit ----
my $s2 = $node->background_psql('postgres', on_error_stop => 0);
my $holder2 = RlockTest::holder_of($s2);
($out, $err, $state) = RlockTest::run_sql($s2, "SELECT rlock_acquire('st_exit', '30s')");
is($state, '00000', 'exit: another session holds a lock with a 30 s lease') or diag($err);
$offset = -s $node->logfile;
outage();
$s2->quit;
ok( RlockTest::wait_until(
		sub {
			RlockTest::log_has($node, $offset,
				qr/release of lock "st_exit" held by \Q$holder2\E could not reach Redis.*\n.*at most \d+ ms/
			);
		},
		30),
	'exit: the session ends during the outage; a LOG line names the lock and its holder');
ok(RlockTest::wait_until(sub { state_of('st_exit') eq 'stranded' }, 10),
	'exit: rlock_locks shows it stranded after its session is gone');
ok(exists_in_redis('st_exit'), 'exit: Redis still has it meanwhile');
$t0 = back();
released_soon('exit', $t0, sub { !exists_in_redis('st_exit') });
ok( RlockTest::wait_until(
		sub {
			RlockTest::log_has($node, $offset,
				qr/stranded release of exclusive lock "st_exit" held by \Q$holder2\E done: released in Redis/
			);
		},
		10),
	'exit: a LOG line says the worker released it');

# ---- a semaphore's permits ----
($out, $err, $state) = RlockTest::run_sql($s,
	"SELECT rlock_semaphore_set_permits('st_sem', 2); SELECT rlock_semaphore_acquire('st_sem', 2, '30s')");
is($state, '00000', 'semaphore: the session holds both permits with a 30 s lease') or diag($err);
is($redis->cli('GET', 'st_sem'), '0', 'semaphore: none is available');
$offset = -s $node->logfile;
outage();
($out, $err, $state) = RlockTest::run_sql($s, "SELECT rlock_semaphore_release('st_sem', 2)");
is($out, 't', 'semaphore: the release during the outage returns true') or diag($err);
like($err, qr/semaphore "st_sem" could not be released in Redis now/,
	'semaphore: a WARNING says the worker finishes it');
is(state_of('st_sem'), 'stranded', 'semaphore: rlock_locks shows its permits stranded');
$t0 = back();
released_soon('semaphore', $t0, sub { $redis->cli('GET', 'st_sem') eq '2' });
ok( RlockTest::wait_until(
		sub {
			RlockTest::log_has($node, $offset,
				qr/stranded release of the permits of semaphore "st_sem" held by \Q$holder\E done: released in Redis/
			);
		},
		10),
	'semaphore: a LOG line says the worker gave the permits back');

# ---- a Redisson holder of another field of the same name is not touched ----
# A Redisson client holds a read lock on st_shared (its layout, by hand:
# mode, its field, its read timeout key), and so does the session.
my $rholder = '3a7f0c1e-0000-4000-8000-00000000beef:7';
$redis->cli('HSET', 'st_shared', 'mode', 'read', $rholder, '1');
$redis->cli('SET', "{st_shared}:$rholder:rwlock_timeout:1", '1', 'PX', '60000');
$redis->cli('PEXPIRE', 'st_shared', '60000');
($out, $err, $state) = RlockTest::run_sql($s,
	"SELECT rlock_read_acquire('st_shared', '30s')");
is($state, '00000', 'shared: the session takes a read hold beside Redisson\'s') or diag($err);
is($redis->cli('HGET', 'st_shared', $holder), '1', 'shared: its field is there');
$offset = -s $node->logfile;
outage();
($out, $err, $state) = RlockTest::run_sql($s, "SELECT rlock_read_release('st_shared')");
is($out, 't', 'shared: the read release during the outage returns true') or diag($err);
is(state_of('st_shared'), 'stranded', 'shared: rlock_locks shows it stranded');
$t0 = back();
released_soon('shared', $t0,
	sub { $redis->cli('HEXISTS', 'st_shared', $holder) eq '0' });
is($redis->cli('HGET', 'st_shared', $rholder), '1',
	'shared: the Redisson holder\'s field is untouched');
ok($redis->cli('PTTL', "{st_shared}:$rholder:rwlock_timeout:1") > 0,
	'shared: and so is its read timeout key');
is($redis->cli('HGET', 'st_shared', 'mode'), 'read', 'shared: the lock is still a read lock');

# ---- a lock taken by someone else after ours went is not touched ----
($out, $err, $state) = RlockTest::run_sql($s, "SELECT rlock_acquire('st_retaken', '30s')");
is($state, '00000', 'retaken: the session holds a lock') or diag($err);
$offset = -s $node->logfile;
outage();
($out, $err, $state) = RlockTest::run_sql($s, "SELECT rlock_release('st_retaken')");
is($out, 't', 'retaken: its release during the outage is stranded') or diag($err);
# meanwhile the lock goes (as if it expired) and a Redisson client takes it
$redis->cli('DEL', 'st_retaken');
my $jholder = '3a7f0c1e-0000-4000-8000-00000000cafe:9';
is(RlockTest::Redisson::try_lock($redis, 'st_retaken', 60000, $jholder), '',
	'retaken: a Redisson client takes the name');
back();
ok( RlockTest::wait_until(
		sub {
			RlockTest::log_has($node, $offset,
				qr/stranded release of exclusive lock "st_retaken" held by \Q$holder\E done: Redis no longer had it/
			);
		},
		25),
	'retaken: the worker settles the stranded release, finding nothing of its holder');
ok(RlockTest::wait_until(sub { state_of('st_retaken') eq '' }, 10),
	'retaken: rlock_locks no longer shows it');
is($redis->cli('HGET', 'st_retaken', $jholder), '1',
	'retaken: the Redisson holder keeps the lock');
ok($redis->cli('PTTL', 'st_retaken') > 30000, 'retaken: with its lease');

# ---- a lease that runs out while Redis stays away: the entry is dropped ----
# (the release strands at once, not after rlock.retry_timeout's retries:
# well before the lease ends, whatever the machine's pace)
RlockTest::run_sql($s, "SET rlock.retry_timeout = 0");
($out, $err, $state) = RlockTest::run_sql($s, "SELECT rlock_acquire('st_short', '5s')");
is($state, '00000', 'short: the session holds a lock with a 5 s lease') or diag($err);
$offset = -s $node->logfile;
outage();
($out, $err, $state) = RlockTest::run_sql($s, "SELECT rlock_release('st_short')");
is($out, 't', 'short: its release during the outage is stranded') or diag($err);
ok( RlockTest::wait_until(
		sub {
			RlockTest::log_has($node, $offset,
				qr/stranded release of exclusive lock "st_short" held by \Q$holder\E given up: its lease has run out/
			);
		},
		30),
	'short: with Redis still away, the worker gives it up once the lease ran out, with a LOG line');
ok(RlockTest::wait_until(sub { state_of('st_short') eq '' }, 10),
	'short: rlock_locks no longer shows it');
ok(!exists_in_redis('st_short'), 'short: Redis let it expire by itself');
back();
($out, $err, $state) = RlockTest::run_sql($s,
	"SELECT rlock_try_acquire('st_short'), rlock_release('st_short')");
is($out, 't|t', 'short: the name is the session\'s to take again') or diag($err);

$s->quit;
done_testing();
