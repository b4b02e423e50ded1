# Copyright (c) 2026, rlock developers
#
# Semaphores and count-down latches across sessions and with a Java client
# (Redisson's RPermitExpirableSemaphore and RCountDownLatch, played at the
# protocol level by RlockTest::Redisson's scripts: raw 16-byte permit ids,
# the ':<score>' / nil answers, the messages).  Each side's releases wake
# the other's waiters, Java's answers are bounded by rlock's leases, a
# Java permit without lease sits beside rlock's renewed ones, and with
# rlock.cancel_on_lost a statement whose permits Redis dropped is
# cancelled.  A permit of the session that Redis still has after the
# session gave it back (a release lost in a failover) is given back by its
# next acquisition, never waited for.  A session killed with SIGKILL while
# holding permits loses them within their lease (rlock.watchdog_timeout is
# 2 s here), never for good; so does a whole server stopped (immediate)
# while sessions hold permits.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use RlockTest;

# the Java client's calls (RlockTest::Redisson)
BEGIN
{
	no strict 'refs';
	*{"main::$_"} = \&{"RlockTest::Redisson::$_"}
	  foreach qw(sem_try_acquire sem_release sem_try_set_permits sem_add_permits
	  sem_available sem_permits latch_try_set_count latch_count_down
	  latch_count latch_delete);
}
my $NON_EXPIRABLE = $RlockTest::Redisson::NON_EXPIRABLE;

my $redis = RlockTest::Redis->new;
my $node = RlockTest::new_node('sem', $redis,
	extra_conf => "restart_after_crash = on\nrlock.cancel_on_lost = on\n");

sub q1
{
	my ($s, $sql) = @_;
	my ($out, $err) = RlockTest::query_err($s, $sql);
	return $out;
}

sub epoch_ms { return int(time() * 1000); }

# ZREM the permit ids ("<holder>:<k>") a holder has out; how many
sub drop_permits_of
{
	my ($holder, $name) = @_;
	my $n = 0;
	foreach my $m (split /\n/, $redis->cli('ZRANGE', "{$name}:timeout", 0, -1) // '')
	{
		$n += $redis->cli('ZREM', "{$name}:timeout", $m)
		  if index($m, "$holder:") == 0;
	}
	return $n;
}

my $a = $node->background_psql('postgres', on_error_stop => 0);
my $b = $node->background_psql('postgres', on_error_stop => 0);
my $a_pid = q1($a, 'SELECT pg_backend_pid()');

# ---- a semaphore shared with a Java client ----

is(q1($a, "SELECT rlock_semaphore_set_permits('exports', 3)"), 't',
	'three permits set');
is($redis->cli('GET', 'exports'), '3', 'in the permits key, as Redisson keeps them');
is(sem_try_set_permits($redis, 'exports', 5), '0',
	"Java's trySetPermits is refused: already set");
is(sem_available($redis, 'exports'), '3', "Java's availablePermits: 3");
q1($a, "SELECT rlock_semaphore_acquire('exports', 2)");
is($redis->cli('ZCARD', '{exports}:timeout'), '2',
	'two permit ids out in {exports}:timeout');
is(sem_available($redis, 'exports'), '1', "Java's availablePermits: 1 left");

# the Java client takes the last permit (tryAcquire(1, 60 s))
my $t0 = epoch_ms();
my ($ids, $answer) = sem_try_acquire($redis, 'exports', 1, 60000);
is("$answer/" . scalar(@$ids), 'OK/1', "Java's tryAcquire takes the last permit");
my $java_id = $ids->[0];
my $permits = sem_permits($redis, 'exports');
ok(defined $permits->{$java_id} && $permits->{$java_id} >= $t0 + 60000
	  && $permits->{$java_id} <= epoch_ms() + 60000,
	'its id is out, in raw bytes, scored by its expiry (epoch ms)')
  or diag(explain($permits));
is(q1($b, "SELECT rlock_semaphore_available('exports')"), '0',
	'none left for SQL once the Java client holds one');
is(q1($b, "SELECT rlock_semaphore_try_acquire('exports', 1, '1 minute')"), 'f',
	'so a try from SQL fails');
is(q1($b, "SELECT count(*) FROM rlock_locks WHERE name = 'exports' AND pid = pg_backend_pid()"), '0',
	'and holds nothing');

# Java asks again: refused, told when the soonest permit out expires --
# a permit of the SQL session (NULL lease: the watchdog's 2 s, renewed)
my $t_ask = epoch_ms();
($ids, $answer) = sem_try_acquire($redis, 'exports', 1, 60000);
my ($score) = $answer =~ /^:(\d+)$/;
ok(!@$ids && defined $score, "Java's second tryAcquire is refused with ':<score>'")
  or diag("answer: $answer");
ok(defined $score && $score > $t_ask - 1000 && $score <= epoch_ms() + 2000 + 1000,
	"the score is an expiry within rlock's lease (watchdog_timeout 2 s), not the Java permit's")
  or diag("score $score, asked at $t_ask");

# a waiter from SQL, woken by the Java client's release
RlockTest::start_bg($b,
	"SET lock_timeout = '20s'; SELECT rlock_semaphore_acquire('exports', 1, '1 minute')");
ok(RlockTest::wait_until(sub {
		$node->safe_psql('postgres',
			"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Extension' AND query LIKE '%rlock_semaphore_acquire%'") eq '1' }, 20),
	'the SQL waiter waits (an Extension wait)');
is(sem_release($redis, 'exports', $java_id), '1',
	"Java's release gives its permit back (publishes the permits available)");
ok(RlockTest::wait_until(sub { RlockTest::bg_done($b) }, 20),
	'the Java release wakes it');
my ($out, $err, $st) = RlockTest::bg_result($b);
is($st, '00000', 'and it has the permit') or diag($err);
is(sem_release($redis, 'exports', $java_id), '0',
	'a second Java release of that id finds nothing');

# the other way: a Java waiter (subscribed to redisson_sc:{exports}) is
# told by an SQL release how many permits are available
($ids, $answer) = sem_try_acquire($redis, 'exports', 1, 60000);
like($answer, qr/^:\d+$/, 'all three out to SQL: Java is refused');
my ($sub, $subout) = $redis->cli_bg('SUBSCRIBE', 'redisson_sc:{exports}');
ok(RlockTest::wait_until(sub { $sub->pump_nb; $$subout =~ /subscribe/ }, 10),
	'a Java waiter subscribed to redisson_sc:{exports}');
is(q1($b, "SELECT rlock_semaphore_release('exports')"), 't', 'SQL gives one back');
ok(RlockTest::wait_until(sub { $sub->pump_nb;
		$$subout =~ /message\nredisson_sc:\{exports\}\n1\n/ }, 10),
	'the Java waiter hears "1" (permits available)')
  or diag($$subout);
$sub->kill_kill;
($ids, $answer) = sem_try_acquire($redis, 'exports', 1, 60000);
is("$answer/" . scalar(@$ids), 'OK/1', 'and its tryAcquire then takes it');
is(sem_release($redis, 'exports', $ids->[0]), '1', 'Java gives it back');

# ---- SQL permits out with a lease: Java's answer is bounded by it ----

is(sem_try_set_permits($redis, 'leased', 2), '1', "Java's trySetPermits sets 2");
is(q1($b, "SELECT rlock_semaphore_set_permits('leased', 7)"), 'f',
	'and SQL cannot set them again');
$t0 = epoch_ms();
is(q1($b, "SELECT rlock_semaphore_try_acquire('leased', 2, '1 minute')"), 't',
	'SQL takes both with a lease of 1 minute');
my $t1 = epoch_ms();
($ids, $answer) = sem_try_acquire($redis, 'leased', 1, 1000);
($score) = $answer =~ /^:(\d+)$/;
ok(!@$ids && defined $score && $score >= $t0 + 60000 - 1000 && $score <= $t1 + 60000 + 1000,
	"Java's tryAcquire is refused with ':<score>', the expiry of rlock's lease")
  or diag("answer $answer, acquired between $t0 and $t1");
is(q1($b, "SELECT rlock_semaphore_release('leased', 2)"), 't', 'SQL gives them back');
is(sem_available($redis, 'leased'), '2', "Java's availablePermits: 2");

# ---- a Java permit without lease (score 922337203685477) beside rlock ----

is(sem_try_set_permits($redis, 'forever', 1), '1', 'a semaphore of 1 from Java');
($ids, $answer) = sem_try_acquire($redis, 'forever', 1, undef);
is("$answer/" . scalar(@$ids), 'OK/1', 'Java takes it without lease');
my $forever_id = $ids->[0];
is(sem_permits($redis, 'forever')->{$forever_id}, $NON_EXPIRABLE,
	'scored 922337203685477 (never expires)');
is(q1($b, "SELECT rlock_semaphore_available('forever')"), '0',
	"rlock's available does not take it back");
($ids, $answer) = sem_try_acquire($redis, 'forever', 1, 1000);
is("$answer/" . scalar(@$ids), '/0',
	'another Java tryAcquire is refused with nil (only permits without lease out)');
RlockTest::start_bg($b,
	"SET lock_timeout = '20s'; SELECT rlock_semaphore_acquire('forever', 1, '1 minute')");
ok(RlockTest::wait_until(sub {
		$node->safe_psql('postgres',
			"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Extension' AND query LIKE '%rlock_semaphore_acquire%forever%'") eq '1' }, 20),
	'an SQL waiter waits for it (no expiry to wait for)');
is(sem_release($redis, 'forever', $forever_id), '1', 'Java gives it back');
ok(RlockTest::wait_until(sub { RlockTest::bg_done($b) }, 20),
	'which wakes the SQL waiter');
($out, $err, $st) = RlockTest::bg_result($b);
is($st, '00000', 'and it has the permit') or diag($err);
is(q1($b, "SELECT rlock_semaphore_release('forever')"), 't', 'SQL gives it back');

# side by side: rlock's watchdog renews its permit, Java's stays as it is
sem_add_permits($redis, 'forever', 1);
is(sem_available($redis, 'forever'), '2', "Java's addPermits(1): 2 available");
($ids, $answer) = sem_try_acquire($redis, 'forever', 1, undef);
is($answer, 'OK', 'Java takes one without lease');
$forever_id = $ids->[0];
is(q1($b, "SELECT rlock_semaphore_try_acquire('forever')"), 't',
	'SQL takes the other (NULL lease: renewed by the watchdog)');
my $renewed0 = q1($b, "SELECT coalesce(renewed_at, acquired_at) FROM rlock_locks WHERE name = 'forever'");
ok(RlockTest::wait_until(sub {
		q1($b, "SELECT renewed_at > '$renewed0' FROM rlock_locks WHERE name = 'forever'") eq 't' }, 20),
	"rlock's permit is renewed (renewed_at moves)");
$permits = sem_permits($redis, 'forever');
is(join(',', map { "$_=$permits->{$_}" } grep { /^[0-9a-f]{32}$/ } sort keys %$permits),
	"$forever_id=$NON_EXPIRABLE", "Java's permit is there, untouched");
is(scalar(grep { !/^[0-9a-f]{32}$/ } keys %$permits), 1, "beside rlock's one");
is(q1($b, "SELECT rlock_semaphore_release('forever')"), 't', 'SQL gives its permit back');
is(sem_release($redis, 'forever', $forever_id), '1', 'Java gives its permit back');

# a Java permit whose lease runs out comes back to an SQL waiter
($ids, $answer) = sem_try_acquire($redis, 'forever', 2, 300);
is($answer, 'OK', 'Java takes both with a lease of 300 ms');
($out, $err) = RlockTest::query_err($b,
	"SELECT rlock_semaphore_try_acquire('forever', 2, '1 minute', wait => '30 s')");
is("$out/$err", 't/', 'an SQL try with a wait gets them once that lease ran out');
is(q1($b, "SELECT rlock_semaphore_release('forever', 2)"), 't', 'and gives them back');
is(sem_release($redis, 'forever', $ids->[0]), '0',
	"Java's release of an expired permit: 0");

# ---- rlock.cancel_on_lost: a statement guarded by lost permits stops ----

# (set from the start: the worker has it before the first loss)
my $holder_b = RlockTest::holder_of($b);
q1($b, "SELECT rlock_semaphore_set_permits('guard', 2)");
is(q1($b, "SELECT rlock_semaphore_try_acquire('guard')"), 't',
	'a session permit (NULL lease)');
$b->{stderr} = '';
$b->query_until(qr/sleeping\n/, "\\echo sleeping\nSELECT pg_sleep(60);\n");
is(drop_permits_of($holder_b, 'guard'), 1,
	'Redis drops it (ZREM of its id) while the session runs a long statement');
ok(RlockTest::wait_until(sub {
		$b->{run}->pump_nb;
		return $b->{stderr} =~ /canceling statement: permits of rlock semaphore "guard" were lost/; }, 30),
	'the worker cancels the statement');
($out, $err) = RlockTest::query_err($b, "SELECT rlock_semaphore_release('guard')");
is($out, 'f', 'the release returns false');
like($err, qr/WARNING:  permits of semaphore "guard" were lost/, 'with a WARNING');

# transaction permits, lost during the statement that took them
$b->{stderr} = '';
$b->query_until(qr/sleeping\n/,
	"BEGIN;\n\\echo sleeping\nSELECT rlock_semaphore_xact_acquire('guard', 1), pg_sleep(60);\n");
ok(RlockTest::wait_until(sub { ($redis->cli('ZCARD', '{guard}:timeout') // '') eq '1' }, 20),
	'a transaction permit taken in a statement that then sleeps');
is(drop_permits_of($holder_b, 'guard'), 1, 'Redis drops it');
ok(RlockTest::wait_until(sub {
		$b->{run}->pump_nb;
		return $b->{stderr} =~ /canceling statement: permits of rlock semaphore "guard" were lost/; }, 30),
	'the worker cancels that statement too');
($out, $err) = RlockTest::query_err($b, 'ROLLBACK');
is(q1($b, "SELECT count(*) FROM rlock_locks WHERE name = 'guard'"), '0',
	'after the ROLLBACK the session holds nothing of it');

# ---- SIGKILL of a session holding permits (NULL lease) ----

is(q1($a, "SELECT hold_count FROM rlock_locks WHERE name = 'exports'"), '2',
	'the session holds two permits');
$t0 = time();
ok(RlockTest::kill_backend_and_wait_restart($node, $a_pid),
	'the server restarts after the SIGKILL');
my $c = $node->background_psql('postgres', on_error_stop => 0);
# nobody renews the killed session's permits: they come back when their
# lease (2 s) runs out, to whoever asks (a waiter sleeps no longer than
# the soonest expiry of a permit out)
my ($got, $kerr) = RlockTest::query_err($c,
	"SET lock_timeout = '10s'; SELECT rlock_semaphore_acquire('exports', 3, '1 minute'); RESET lock_timeout;");
is("$got/$kerr", '/', 'all three permits can be taken again within the lease + margin');
note sprintf('%.2f s after the kill (which restarted the server)', time() - $t0);
is(q1($c, "SELECT rlock_semaphore_release('exports', 3)"), 't', 'and given back');
is($redis->cli('GET', 'exports'), '3', 'three permits available again');

# ---- permits Redis dropped: the LOG line, the WARNING ----

my $log_offset = -s $node->logfile;
q1($c, "SELECT rlock_semaphore_set_permits('dropped', 2)");
q1($c, "SELECT rlock_semaphore_acquire('dropped', 2)");
$redis->cli('DEL', '{dropped}:timeout');
ok( RlockTest::wait_until(sub {
		RlockTest::log_has($node, $log_offset,
			qr/rlock watchdog: permits of semaphore "dropped" held by [^ ]+ \(pid \d+\) were lost/) }, 20),
	'the watchdog logs the permits Redis dropped as lost');
is(q1($c, "SELECT state FROM rlock_locks WHERE name = 'dropped'"), 'lost',
	'rlock_locks shows them lost');
($got, $kerr) = RlockTest::query_err($c, "SELECT rlock_semaphore_release('dropped', 2)");
is($got, 'f', 'the release returns false');
like($kerr, qr/WARNING:  permits of semaphore "dropped" were lost before this session gave them back/,
	'with a WARNING');

# ---- a release Redis never saw (lost in a failover) ----

# Redis still has a permit of the session that the session gave back (its
# release went to a master that died before replicating it): the session's
# next acquisition gives it back first, and never waits for it.
my $holder_c = RlockTest::holder_of($c);
q1($c, "SELECT rlock_semaphore_set_permits('stale', 2)");
$redis->cli('ZADD', '{stale}:timeout', epoch_ms() + 600000, "$holder_c:1");
$redis->cli('DECRBY', 'stale', 1);
is(q1($c, "SELECT rlock_semaphore_available('stale')"), '1',
	'one permit available, the other out under this session\'s holder id');
($got, $kerr) = RlockTest::query_err($c, "SELECT rlock_semaphore_try_acquire('stale', 2)");
is("$got/$kerr", 't/', 'a try for both gets them at once, no warning');
is(q1($c, "SELECT hold_count, state FROM rlock_locks WHERE name = 'stale'"), '2|held',
	'the session holds two');
is($redis->cli('GET', 'stale') . '/' . $redis->cli('ZCARD', '{stale}:timeout'), '0/2',
	'and Redis has exactly those two out');
is(q1($c, "SELECT rlock_semaphore_release('stale', 2)"), 't', 'given back');

# ---- the whole server stopped while holding permits ----

q1($c, "SELECT rlock_semaphore_acquire('exports', 2)");
q1($c, "BEGIN; SELECT rlock_semaphore_xact_acquire('exports', 1)");
is($redis->cli('GET', 'exports'), '0', 'all three permits out (two session, one transaction)');
$b->quit;
$c->quit;
$t0 = time();
$node->stop('immediate');
$node->start;
$c = $node->background_psql('postgres', on_error_stop => 0);
($got, $kerr) = RlockTest::query_err($c,
	"SET lock_timeout = '10s'; SELECT rlock_semaphore_acquire('exports', 3, '1 minute'); RESET lock_timeout;");
is("$got/$kerr", '/', 'after an immediate stop and a start, the permits come back within their lease');
note sprintf('%.2f s after the stop began (the stop and start included)', time() - $t0);
is(q1($c, "SELECT rlock_semaphore_release('exports', 3)"), 't', 'and are given back');

# ---- a latch shared with a Java client ----

$b = $node->background_psql('postgres', on_error_stop => 0);
is(q1($c, "SELECT rlock_latch_set_count('loads', 2)"), 't', 'a latch of 2 from SQL');
is(latch_count($redis, 'loads'), '2', "Java's getCount: 2");
is(latch_try_set_count($redis, 'loads', 5), '0', "Java's trySetCount is refused while it counts");
RlockTest::start_bg($b, "SELECT rlock_latch_await('loads', '30 s')");
ok(RlockTest::wait_until(sub {
		$redis->cli('PUBSUB', 'NUMSUB', 'redisson_countdownlatch__channel__{loads}') =~ /\n1$/ }, 20),
	'the awaiting session listens on the latch channel');
is(q1($c, "SELECT rlock_latch_count_down('loads')"), '1', 'counted down once from SQL');
is(latch_count($redis, 'loads'), '1', "Java's getCount: 1");
ok(!RlockTest::bg_done($b), 'the await still waits');
is(latch_count_down($redis, 'loads'), '0', "Java's countDown reaches zero (publishes \"0\")");
ok(RlockTest::wait_until(sub { RlockTest::bg_done($b) }, 20),
	'the Java count-down to zero wakes the await');
($out, $err, $st) = RlockTest::bg_result($b);
is("$out/$st", 't/00000', 'which returns true') or diag($err);
is($redis->cli('EXISTS', 'loads'), '0', 'the latch key is gone at zero');

# a count set from Java, awaited in SQL
is(latch_try_set_count($redis, 'loads', 1), '1', "Java's trySetCount(1) (publishes \"1\")");
is(q1($c, "SELECT rlock_latch_count('loads')"), '1', 'SQL reads the count Java set');
is(q1($c, "SELECT rlock_latch_set_count('loads', 3)"), 'f', 'and cannot set another while it counts');
RlockTest::start_bg($b, "SELECT rlock_latch_await('loads', '30 s')");
ok(RlockTest::wait_until(sub {
		$redis->cli('PUBSUB', 'NUMSUB', 'redisson_countdownlatch__channel__{loads}') =~ /\n1$/ }, 20),
	'an SQL await listens');
is(latch_count_down($redis, 'loads'), '0', 'Java counts it down to zero');
ok(RlockTest::wait_until(sub { RlockTest::bg_done($b) }, 20), 'the await ends');
($out, $err, $st) = RlockTest::bg_result($b);
is("$out/$st", 't/00000', 'returning true') or diag($err);

# Java's delete publishes "1" (a new count): the await reads the count, finds none
is(latch_try_set_count($redis, 'loads', 4), '1', "Java's trySetCount(4)");
RlockTest::start_bg($b, "SELECT rlock_latch_await('loads', '30 s')");
ok(RlockTest::wait_until(sub {
		$redis->cli('PUBSUB', 'NUMSUB', 'redisson_countdownlatch__channel__{loads}') =~ /\n1$/ }, 20),
	'an SQL await listens');
is(latch_delete($redis, 'loads'), '1', "Java's delete (publishes \"1\")");
ok(RlockTest::wait_until(sub { RlockTest::bg_done($b) }, 20),
	'the await reads the count again on that message and ends');
($out, $err, $st) = RlockTest::bg_result($b);
is("$out/$st", 't/00000', 'returning true: the latch is absent, at zero') or diag($err);

# and the other way: Java's await (subscribed) is told "1" and "0" by SQL
my ($lsub, $lsubout) = $redis->cli_bg('SUBSCRIBE', 'redisson_countdownlatch__channel__{loads}');
ok(RlockTest::wait_until(sub { $lsub->pump_nb; $$lsubout =~ /subscribe/ }, 10),
	'a Java waiter subscribed');
q1($c, "SELECT rlock_latch_set_count('loads', 1)");
is(latch_count($redis, 'loads'), '1', "Java's getCount sees SQL's count");
q1($c, "SELECT rlock_latch_count_down('loads')");
ok(RlockTest::wait_until(sub { $lsub->pump_nb;
		$$lsubout =~ /message\nredisson_countdownlatch__channel__\{loads\}\n1\n.*message\nredisson_countdownlatch__channel__\{loads\}\n0\n/s }, 10),
	'it hears "1" (a new count) and then "0" (zero reached)')
  or diag($$lsubout);
$lsub->kill_kill;
is(latch_count($redis, 'loads'), '0', "Java's getCount: 0");

$b->quit;
$c->quit;
done_testing();
