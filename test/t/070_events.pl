# Copyright (c) 2026, rlock developers
#
# rlock_events (SPEC 12): the ring of this server's recent events, each
# also a LOG line with the same words.  Every event comes from a real
# fault:
#   - lost: a lock's key deleted in Redis; the watchdog finds it gone;
#   - force_release: rlock_force_release of another session's lock;
#   - deadlock: two sessions, each waiting for the other's lock (40P01);
#   - an outage (a proxy refusing connections and cutting the open ones):
#     a release during it is stranded (stranded_release) and finished by
#     the worker once Redis answers (stranded_settled), the watchdog's
#     renewals fail (renew_failing) and recover (renew_recovered), a
#     waiter pauses (outage_wait) and rides it out (outage_ridden_out), a
#     session reconnects after its connection failed (reconnect);
#   - crash_cleanup: a backend holding a lock is SIGKILLed, the server
#     restarts, the worker releases what the dead run held (last: the
#     ring is shared memory, which a crash restart makes anew).
# A third server behind Sentinel: its master killed, the failover is an
# event too.
# On a second server, with rlock.events_max = 10: 25 force releases leave
# exactly the 10 newest, their sequence numbers contiguous; an owner
# token's hold is masked (superuser: "<owner token>"; a plain role: not
# even that), a holder identity is not.
# Nothing waits a fixed time: every step polls with generous bounds.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use RlockTest;

my $t_start = time();
my ($out, $err, $st);
my $redis = RlockTest::Redis->new;
my $proxy = RlockTest::Proxy->new($redis);
my $node = RlockTest::new_node('events', $proxy,
	watchdog_timeout => '15s',
	extra_conf => "restart_after_crash = on\n"
	  . "deadlock_timeout = '200ms'\n"
	  . "rlock.deadlock_timeout = '200ms'\n");

sub q1
{
	my ($s, $sql) = @_;
	my ($out, $err) = RlockTest::query_err($s, $sql);
	note "$sql: $err" if $err ne '';
	return $out;
}

# The newest event of $event (on $lock, when given) as a hash, or undef.
# (recent: compared with clock_timestamp(), not now(): an event recorded
# by another process while this query starts may be later than now().)
sub event_of
{
	my ($n, $event, $lock) = @_;
	my $where = "event = '$event'";
	$where .= " AND lock = '$lock'" if defined $lock;
	my $row = RlockTest::sql($n,
		"SELECT seq, pid, coalesce(database::text, '-'), coalesce(lock, '-'), "
		  . "coalesce(kind, '-'), coalesce(holder, '-'), detail, "
		  . "at > now() - interval '10 minutes' AND at <= clock_timestamp() "
		  . "FROM rlock_events WHERE $where ORDER BY seq DESC LIMIT 1");
	return undef if !defined $row || $row eq '';
	my @f = split /\|/, $row, 8;
	my %e;
	@e{qw(seq pid database lock kind holder detail recent)} = @f[0 .. 5, 6, 7];
	# (the detail may hold a '|': the last column is the boolean)
	($e{detail}, $e{recent}) = $row =~ /^(?:[^|]*\|){6}(.*)\|([tf])$/s;
	return \%e;
}

# Wait for an event (30 s at most); returns it or undef.
sub await_event
{
	my ($n, $event, $lock) = @_;
	my $e;
	RlockTest::wait_until(sub { $e = event_of($n, $event, $lock); defined $e },
		30);
	return $e;
}

# Whether the server log (from $offset) has these words, within 10 s.
sub logged
{
	my ($n, $offset, $words) = @_;
	return 0 if !defined $words || $words eq '';
	return RlockTest::wait_until(
		sub { RlockTest::log_has($n, $offset, qr/\Q$words\E/) }, 10);
}

my $s = $node->background_psql('postgres', on_error_stop => 0);
my $s_pid = q1($s, 'SELECT pg_backend_pid()');
my $s_holder = RlockTest::holder_of($s);
my $offset = -s $node->logfile;

# ---- lost: the key deleted in Redis, found by the watchdog ----
q1($s, "SELECT rlock_acquire('ev_lost')");
is($redis->cli('DEL', 'ev_lost'), '1', 'lost: the lock\'s key is deleted in Redis');
my $e = await_event($node, 'lost', 'ev_lost');
ok($e, 'lost: recorded');
is_deeply(
	[ @$e{qw(database lock kind holder recent)} ],
	[ '-', 'ev_lost', 'exclusive', $s_holder, 't' ],
	'lost: the watchdog\'s (no database), the lock, its kind, its holder, when');
isnt($e->{pid}, $s_pid, 'lost: recorded by the watchdog, not by the session');
like($e->{detail},
	qr/^rlock watchdog: lock "ev_lost" held by \Q$s_holder\E \(pid $s_pid\) was lost: Redis no longer had the lock/,
	'lost: the detail names the lock, its holder and the cause');
ok(logged($node, $offset, "rlock watchdog: lock \"ev_lost\" held by $s_holder (pid $s_pid) was lost"),
	'lost: the LOG line says the same');
q1($s, "SELECT rlock_release('ev_lost')");

# ---- force_release: another session's lock deleted ----
q1($s, "SELECT rlock_acquire('ev_force', '1 min')");
my $f = $node->background_psql('postgres', on_error_stop => 0);
my $f_pid = q1($f, 'SELECT pg_backend_pid()');
is(q1($f, "SELECT rlock_force_release('ev_force')"), 't',
	'force_release: another session deletes the lock');
$e = await_event($node, 'force_release', 'ev_force');
ok($e, 'force_release: recorded');
is_deeply(
	[ @$e{qw(pid database lock holder recent)} ],
	[ $f_pid, 'postgres', 'ev_force', $s_holder, 't' ],
	'force_release: the pid and database of the session that did it, the lock, the holder it was taken from');
is($e->{detail},
	"rlock: lock \"ev_force\" was force-released by pid $f_pid, taken from 1 holder(s)",
	'force_release: the detail');
ok(logged($node, $offset, $e->{detail}), 'force_release: the LOG line says the same');

# ---- deadlock: two sessions wait for each other ----
my $d1 = $node->background_psql('postgres', on_error_stop => 0);
my $d2 = $node->background_psql('postgres', on_error_stop => 0);
my $d1_holder = RlockTest::holder_of($d1);
my $d2_holder = RlockTest::holder_of($d2);
q1($d1, "SELECT rlock_acquire('ev_dl_a', '1 min')");
q1($d2, "SELECT rlock_acquire('ev_dl_b', '1 min')");
RlockTest::start_bg($d1, "SELECT rlock_try_acquire('ev_dl_b', '1 min', '60 s')");
RlockTest::wait_for_rlock_waiters($node, 'postgres', 1, '%ev_dl_b%');
RlockTest::start_bg($d2, "SELECT rlock_try_acquire('ev_dl_a', '1 min', '60 s')");
ok(RlockTest::wait_until(sub { RlockTest::bg_done($d1) || RlockTest::bg_done($d2) }, 30),
	'deadlock: one of the two waits ends');
$e = await_event($node, 'deadlock');
ok($e, 'deadlock: recorded');
my ($victim_lock, $victim_holder) =
  $e && $e->{lock} eq 'ev_dl_b' ? ('ev_dl_b', $d1_holder) : ('ev_dl_a', $d2_holder);
is_deeply(
	[ @$e{qw(database lock kind holder recent)} ],
	[ 'postgres', $victim_lock, 'exclusive', $victim_holder, 't' ],
	'deadlock: the victim\'s database, the lock it waited for, its kind, its holder id');
like($e->{detail}, qr/^deadlock detected: Process \d+ .* waits for /,
	'deadlock: the detail is the 40P01\'s, its lines run on');
ok(logged($node, $offset, 'ERROR:  deadlock detected'),
	'deadlock: the server log has the ERROR');
# the victim's wait ends with 40P01; the other's once the victim lets go
my ($victim, $other) = RlockTest::bg_done($d1) ? ($d1, $d2) : ($d2, $d1);
($out, $err, $st) = RlockTest::bg_result($victim);
is($st, '40P01', 'deadlock: the victim\'s wait failed with 40P01') or diag($err);
q1($victim, "SELECT rlock_release_all()");
ok(RlockTest::wait_until(sub { RlockTest::bg_done($other) }, 30),
	'deadlock: the other wait ends once the victim lets go');
RlockTest::bg_result($other);
q1($other, "SELECT rlock_release_all()");

# ---- an outage: a release stranded, renewals failing, a wait riding it out ----
my $a = $node->background_psql('postgres', on_error_stop => 0);
my $a_pid = q1($a, 'SELECT pg_backend_pid()');
my $a_holder = RlockTest::holder_of($a);
my $b = $node->background_psql('postgres', on_error_stop => 0);
my $b_pid = q1($b, 'SELECT pg_backend_pid()');
my $b_holder = RlockTest::holder_of($b);
q1($s, "SELECT rlock_acquire('ev_renewed')");    # the watchdog renews it
q1($a, "SELECT rlock_acquire('ev_strand', '1 min'), rlock_acquire('ev_wait', '1 min')");
RlockTest::start_bg($b, "SELECT rlock_try_acquire('ev_wait', '1 min', '90 s')");
RlockTest::wait_for_rlock_waiters($node, 'postgres', 1, '%ev_wait%');
my $before = RlockTest::sql($node, 'SELECT coalesce(max(seq), 0) FROM rlock_events');

$proxy->refuse;
$proxy->cut;
($out, $err, $st) = RlockTest::run_sql($a, "SELECT rlock_release('ev_strand')");
is("$out/$st", 't/00000', 'stranded_release: a release during the outage returns true');
$e = await_event($node, 'stranded_release', 'ev_strand');
ok($e, 'stranded_release: recorded');
is_deeply(
	[ @$e{qw(pid database lock kind holder)} ],
	[ $a_pid, 'postgres', 'ev_strand', 'exclusive', $a_holder ],
	'stranded_release: the session, the lock, its kind, its holder');
like($e->{detail},
	qr/^rlock: release of lock "ev_strand" held by \Q$a_holder\E could not reach Redis; the background worker will finish it$/,
	'stranded_release: the detail');
ok(logged($node, $offset, $e->{detail}), 'stranded_release: the LOG line says the same');

$e = await_event($node, 'renew_failing');
ok($e && $e->{seq} > $before, 'renew_failing: recorded');
is($e->{detail}, 'rlock watchdog: renewals failing: Redis could not be reached, retrying',
	'renew_failing: the detail');
ok(logged($node, $offset, $e->{detail}), 'renew_failing: the LOG line says the same');

$e = await_event($node, 'outage_wait');
ok($e && $e->{seq} > $before, 'outage_wait: recorded');
is_deeply([ @$e{qw(pid database lock holder)} ], [ $b_pid, 'postgres', 'ev_wait', $b_holder ],
	'outage_wait: the waiting session, the lock it waits for');
is($e->{detail}, 'rlock: waiting for lock "ev_wait" through a Redis outage',
	'outage_wait: the detail');
ok(logged($node, $offset, $e->{detail}), 'outage_wait: the LOG line says the same');
ok(!RlockTest::bg_done($b), 'the waiter still waits');

$proxy->accept;
$e = await_event($node, 'stranded_settled', 'ev_strand');
ok($e, 'stranded_settled: the worker finished the release once Redis answers');
is_deeply([ @$e{qw(database kind holder)} ], [ '-', 'exclusive', $a_holder ],
	'stranded_settled: the worker\'s, the kind, the holder');
like($e->{detail},
	qr/^rlock worker: stranded release of exclusive lock "ev_strand" held by \Q$a_holder\E done: released in Redis$/,
	'stranded_settled: the detail');
ok(logged($node, $offset, $e->{detail}), 'stranded_settled: the LOG line says the same');

$e = await_event($node, 'renew_recovered');
ok($e && $e->{seq} > $before, 'renew_recovered: recorded');
is($e->{detail}, 'rlock watchdog: Redis answers again, renewals resumed',
	'renew_recovered: the detail');
ok(logged($node, $offset, $e->{detail}), 'renew_recovered: the LOG line says the same');

$e = await_event($node, 'outage_ridden_out');
ok($e && $e->{seq} > $before, 'outage_ridden_out: recorded');
is_deeply([ @$e{qw(pid lock holder)} ], [ $b_pid, 'ev_wait', $b_holder ],
	'outage_ridden_out: the waiting session, the lock it waits for');
like($e->{detail},
	qr/^rlock: waiting for lock "ev_wait": Redis answers again after \d+ ms, the wait goes on$/,
	'outage_ridden_out: the detail');
ok(logged($node, $offset, $e->{detail}), 'outage_ridden_out: the LOG line says the same');

is(q1($a, "SELECT rlock_release('ev_wait')"), 't', 'the holder releases after the outage');
ok(RlockTest::wait_until(sub { RlockTest::bg_done($b) }, 30), 'the waiter ends');
($out, $err, $st) = RlockTest::bg_result($b);
is("$out/$st", 't/00000', 'the waiter acquired: it rode the outage out') or diag($err);

my $rc = RlockTest::sql($node,
	"SELECT count(*) FROM rlock_events WHERE event = 'reconnect' AND pid = $a_pid AND seq > $before");
cmp_ok($rc, '>=', 1, 'reconnect: the session that met the outage reconnected, recorded');
$e = await_event($node, 'reconnect');
like($e->{detail}, qr/^rlock: connected again to Redis at 127\.0\.0\.1:\d+ after a failure$/,
	'reconnect: the detail');
ok(logged($node, $offset, $e->{detail}), 'reconnect: the LOG line says the same');
q1($b, "SELECT rlock_release_all()");
q1($s, "SELECT rlock_release_all()");

# what the view shows now (for the log of the test; doc/events.md's sample)
my (undef, $view) = $node->psql('postgres',
	'SELECT seq, at, pid, database, event, lock, kind, holder, detail FROM rlock_events ORDER BY seq',
	extra_params => [ '-P', 'format=aligned', '-P', 'footer=off' ]);
note "rlock_events:\n$view";
# ... and the counters and the histograms' non-empty buckets after those
# faults (the closing note's sample of rlock_stats)
for my $q ('SELECT * FROM rlock_stats',
	"SELECT kind, measure, le, count, round(sum::numeric, 3) AS sum FROM rlock_stats_histograms WHERE count > 0 AND le IN (0.001, 0.01, 0.1, 1, 5, 'Infinity') ORDER BY 1, 2, 3")
{
	my (undef, $out) = $node->psql('postgres', $q,
		extra_params =>
		  [ ($q =~ /histograms/ ? () : ('-x')), '-P', 'footer=off' ]);
	note "$q:\n$out";
}

# ---- crash_cleanup: a backend holding a lock is SIGKILLed ----
my $k = $node->background_psql('postgres', on_error_stop => 0);
my $k_pid = q1($k, 'SELECT pg_backend_pid()');
my $k_holder = RlockTest::holder_of($k);
q1($k, "SELECT rlock_acquire('ev_crash')");
my $file = $node->data_dir . '/pg_stat_tmp/rlock_holds';
ok( RlockTest::wait_until(
		sub { -e $file && index(slurp_file($file), 'ev_crash') >= 0 }, 30),
	'crash_cleanup: the worker lists the hold where a crash restart finds it');
my ($old_uuid) = $k_holder =~ /^(.*):\d+$/;
$s->quit;
$f->quit;
$d1->quit;
$d2->quit;
$a->quit;
$b->quit;
ok(RlockTest::kill_backend_and_wait_restart($node, $k_pid),
	'crash_cleanup: the server restarts after the SIGKILL');
$k->{run}->kill_kill;
$e = await_event($node, 'crash_cleanup');
ok($e, 'crash_cleanup: recorded after the restart');
is_deeply([ @$e{qw(database lock kind holder)} ], [ '-', 'ev_crash', 'exclusive', $k_holder ],
	'crash_cleanup: the worker\'s, the (first) lock released, its kind, its holder');
like($e->{detail},
	qr/^rlock watchdog: crash clean-up released 1 locks of instance \Q$old_uuid\E: Released: exclusive "ev_crash" \(pid $k_pid\)\./,
	'crash_cleanup: the detail');
ok(logged($node, $offset, "rlock watchdog: crash clean-up released 1 locks of instance $old_uuid"),
	'crash_cleanup: the LOG line says the same');
is($redis->cli('EXISTS', 'ev_crash'), '0', 'crash_cleanup: released in Redis');

# ---- a second server: the ring wraps; holders masked ----
my $ring = RlockTest::new_node('events_ring', $redis,
	extra_conf => "rlock.events_max = 10\n");
$ring->safe_psql('postgres', q{
	CREATE ROLE ev_plain LOGIN;
	CREATE ROLE ev_stats LOGIN IN ROLE pg_read_all_stats;
	SELECT rlock_acquire('ev_owned', '1 min', owner => 'ev-secret-token');
	SELECT rlock_force_release('ev_owned');
	SELECT rlock_acquire('ev_mine', '1 min');
	SELECT rlock_force_release('ev_mine');
});
my $shown = q{SELECT string_agg(coalesce(holder, '-'), ',' ORDER BY seq) FROM rlock_events
	WHERE lock IN ('ev_owned', 'ev_mine') AND event = 'force_release'};
my $id_re = qr/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}:\d+/;
like($ring->safe_psql('postgres', $shown), qr/^<owner token>,$id_re$/,
	'masking: a superuser sees that an owner token held it, not the token; a holder id as it is');
like($ring->safe_psql('postgres', "SET ROLE ev_stats; $shown"), qr/^<owner token>,$id_re$/,
	'masking: so does a member of pg_read_all_stats');
like($ring->safe_psql('postgres', "SET ROLE ev_plain; $shown"),
	qr/^<insufficient privilege>,$id_re$/,
	'masking: a plain role sees no owner token, not even that there is one');
unlike($ring->safe_psql('postgres', 'SELECT string_agg(concat_ws(\' \', lock, holder, detail), \' \') FROM rlock_events'),
	qr/ev-secret-token|rlock-owner:/, 'masking: neither the token nor its digest shows anywhere');

# (held by owner tokens: no session's hold, which the watchdog could find
# gone between the force release and the session's forgetting it)
$ring->safe_psql('postgres', q{
	SELECT rlock_acquire('ev_ring_' || i, '1 min', owner => 'ev-ring-' || i),
	       rlock_force_release('ev_ring_' || i)
	FROM generate_series(1, 25) i;
});
is( $ring->safe_psql('postgres', q{
	SELECT count(*) || ' ' || (max(seq) - min(seq) + 1) || ' '
	       || bool_and(seq = prev + 1 OR prev IS NULL) || ' '
	       || string_agg(lock, ',' ORDER BY seq)
	FROM (SELECT seq, lag(seq) OVER (ORDER BY seq) AS prev, lock FROM rlock_events) r}),
	'10 10 true ' . join(',', map { "ev_ring_$_" } 16 .. 25),
	'ring: rlock.events_max = 10 keeps exactly the 10 newest of 27 events, sequence numbers contiguous');

# ---- failover: Sentinel names a new master ----
my $sen = RlockTest::Sentinel->new(replicas => 1, sentinels => 3);
my $fo = RlockTest::new_node('events_failover', undef, url => $sen->url);
my $fs = $fo->background_psql('postgres', on_error_stop => 0);
is(q1($fs, "SELECT rlock_try_acquire('ev_fo', '1 min')"), 't',
	'failover: a session of a server behind Sentinel takes a lock');
my $old_master = $sen->master;
my $fo_offset = -s $fo->logfile;
$sen->kill_master;
my $fo_secs = $sen->wait_failover($old_master->port, 60);
ok(defined $fo_secs, 'failover: the sentinels name a new master');
my $new_master = $sen->master;
# the next call asks the sentinels where the master is now
RlockTest::wait_until(
	sub { q1($fs, "SELECT rlock_try_acquire('ev_fo2', '1 min')") eq 't' }, 60);
$e = await_event($fo, 'failover');
ok($e, 'failover: recorded');
my ($new_where, $old_where) = ($new_master->where, $old_master->where);
like($e->{detail},
	qr/^rlock: Redis master "\Q${\ $sen->master_name }\E" is now \Q$new_where\E \(was \Q$old_where\E\)$/,
	'failover: the detail names the new master and the old one');
ok(logged($fo, $fo_offset, $e->{detail}), 'failover: the LOG line says the same');
$fs->quit;

note sprintf('070 took %.1f s', time() - $t_start);
done_testing();
