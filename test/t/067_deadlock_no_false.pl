# Copyright (c) 2026, rlock developers
#
# No false deadlocks (SPEC.md section 5.6, issue 42).  Two PostgreSQL
# servers, "alpha" and "beta", on one Redis.
#
#   1. Eight sessions, four per server, take the names of ordered subsets of
#      {a, b, c} in that order and release them in reverse, in a loop, for
#      60 s; half check for deadlocks after 20 ms, half after 1 s, so checks
#      run during many hand-offs and along chains of waits (W waits for b,
#      whose holder waits for c).  Lock order is global: there is no cycle,
#      so no session may ever get 40P01; each makes progress.
#   2. With rlock.deadlock_timeout = 10 ms two sessions pass x back and forth
#      while A, holding x, waits for y, and B takes y only when it holds
#      nothing else (no cycle), 300 rounds each: no 40P01.
#   3. A try with no wait (wait => '0') in a would-be cycle returns false
#      (or NULL, the fenced kind's), never 40P01, for every kind with a try
#      function, while the other session of the would-be cycle waits with
#      checks every 20 ms and, once the try gave up, acquires.
#
# Without the deadlock check (no src/locks/deadlock.c) parts 1-3 pass
# trivially; they fail when the check finds cycles that are not there: a
# hand-off seen half-way (the lock's old holder read as still holding, or a
# wait record of a wait that has just ended), a chain taken for a knot, or
# a try's failed attempt taken for a wait.  Each of these makes some session
# of 1 or 2 raise 40P01, which the loops count.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use RlockTest;

my $redis = RlockTest::Redis->new;
my $rl_conf = "rlock.redlock_urls = '" . $redis->url . "'\n";
my $one = RlockTest::new_node('dl_alpha', $redis,
	extra_conf => "rlock.server_name = 'alpha'\n$rl_conf");
my $two = RlockTest::new_node('dl_beta', $redis,
	extra_conf => "rlock.server_name = 'beta'\n$rl_conf");

# The loop of part 1: returns "cycles deadlocks" once $secs have passed.  A
# 40P01 is counted and its session's holds are let go, and the loop goes on.
my $loop_fn = <<'EOS';
CREATE FUNCTION nf_loop(secs float8, seed float8, dt interval) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	names text[] := ARRAY['nf_a', 'nf_b', 'nf_c'];
	taken text[];
	n int := 0;
	dl int := 0;
	checked int := 0;
	t timestamptz;
	stop timestamptz := clock_timestamp() + secs * interval '1 s';
BEGIN
	PERFORM setseed(seed);
	WHILE clock_timestamp() < stop LOOP
		taken := ARRAY[]::text[];
		FOR i IN 1..3 LOOP
			IF random() < 0.7 OR (i = 3 AND cardinality(taken) = 0) THEN
				taken := taken || names[i];
			END IF;
		END LOOP;
		BEGIN
			FOR i IN 1..cardinality(taken) LOOP
				t := clock_timestamp();
				PERFORM rlock_acquire(taken[i]);
				IF clock_timestamp() - t > dt THEN
					checked := checked + 1;
				END IF;
			END LOOP;
			PERFORM pg_sleep(random() * 0.02);
			FOR i IN REVERSE cardinality(taken)..1 LOOP
				PERFORM rlock_release(taken[i]);
			END LOOP;
			n := n + 1;
		EXCEPTION WHEN deadlock_detected THEN
			dl := dl + 1;
			RAISE WARNING 'nf_loop: %', SQLERRM;
			PERFORM rlock_release_all();
		END;
	END LOOP;
	RETURN n || ' ' || dl || ' ' || checked;
END $$;
EOS
$_->safe_psql('postgres', $loop_fn) foreach ($one, $two);

# ---------------------------------------------------------------------------
# 1. eight sessions, one global lock order, 60 s
# ---------------------------------------------------------------------------
my @s;
for my $i (0 .. 7)
{
	my $node = $i % 2 ? $two : $one;
	my $dt = ($i / 2) % 2 ? '1s' : '20ms';
	my $sess = $node->background_psql('postgres', on_error_stop => 0);
	$sess->query_safe("SET rlock.deadlock_timeout = '$dt'");
	push @s, { sess => $sess, node => $node->name, dt => $dt };
}
my $t0 = time();
for my $i (0 .. 7)
{
	RlockTest::start_bg($s[$i]{sess},
		'SELECT nf_loop(60, ' . (($i + 1) / 10) . ", '$s[$i]{dt}')");
}
ok(RlockTest::wait_until(sub { !grep { !RlockTest::bg_done($_->{sess}) } @s }, 150),
	'part 1: the eight loops end');
note sprintf('part 1: the loops took %.1f s', time() - $t0);
my ($total, $total_dl, $checked_20ms) = (0, 0, 0);
for my $i (0 .. 7)
{
	my ($out, $err, $st) = RlockTest::bg_result($s[$i]{sess});
	my ($n, $dl, $ck) = $out =~ /^(\d+) (\d+) (\d+)$/ ? ($1, $2, $3) : (0, -1, 0);
	note "part 1: session $i ($s[$i]{node}, deadlock_timeout $s[$i]{dt}): "
	  . "$n cycles, $dl deadlocks, $ck waits that outlasted the timeout";
	$checked_20ms += $ck if $s[$i]{dt} eq '20ms';
	is($st, '00000', "part 1: session $i ended without an error") or diag($err);
	is($dl, 0, "part 1: session $i never got 40P01") or diag($err);
	cmp_ok($n, '>', 0, "part 1: session $i made progress");
	$total += $n;
	$total_dl += $dl if $dl > 0;
}
note "part 1: $total cycles in all, $total_dl deadlocks";
# a wait that lasted longer than its session's deadlock_timeout ran a check
cmp_ok($checked_20ms, '>', 50,
	'part 1: the 20 ms sessions checked for deadlocks during many waits');
my $contended = 0;
$contended += RlockTest::stat_of($_, 'contended_acquisitions') foreach ($one, $two);
note "part 1: $contended contended acquisitions";
cmp_ok($contended, '>', 100, 'part 1: the sessions waited for one another');
$_->{sess}->quit foreach @s;

# ---------------------------------------------------------------------------
# 2. a hand-off racing the check, deadlock_timeout 10 ms
# ---------------------------------------------------------------------------
# A: x, then y while holding x; B: x alone, then y alone.  Each holds what
# it took for 15 ms, so each wait outlasts the 10 ms before a check.
my $ho_fn = <<'EOS';
CREATE FUNCTION ho_take(name text) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
	t timestamptz := clock_timestamp();
BEGIN
	PERFORM rlock_acquire(name);
	RETURN CASE WHEN clock_timestamp() - t > interval '10 ms' THEN 1 ELSE 0 END;
END $$;
CREATE FUNCTION ho_loop(rounds int, nested bool) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	dl int := 0;
	checked int := 0;
BEGIN
	FOR r IN 1..rounds LOOP
		BEGIN
			checked := checked + ho_take('ho_x');
			IF nested THEN
				checked := checked + ho_take('ho_y');
				PERFORM pg_sleep(0.015);
				PERFORM rlock_release('ho_y');
			ELSE
				PERFORM pg_sleep(0.015);
			END IF;
			PERFORM rlock_release('ho_x');
			IF NOT nested THEN
				checked := checked + ho_take('ho_y');
				PERFORM pg_sleep(0.015);
				PERFORM rlock_release('ho_y');
			END IF;
		EXCEPTION WHEN deadlock_detected THEN
			dl := dl + 1;
			RAISE WARNING 'ho_loop: %', SQLERRM;
			PERFORM rlock_release_all();
		END;
	END LOOP;
	RETURN rounds || ' ' || dl || ' ' || checked;
END $$;
EOS
$_->safe_psql('postgres', $ho_fn) foreach ($one, $two);
$_->safe_psql('postgres', 'SELECT rlock_stats_reset()') foreach ($one, $two);

my $ha = $one->background_psql('postgres', on_error_stop => 0);
my $hb = $two->background_psql('postgres', on_error_stop => 0);
$_->query_safe("SET rlock.deadlock_timeout = '10ms'") foreach ($ha, $hb);
$t0 = time();
RlockTest::start_bg($ha, 'SELECT ho_loop(250, true)');
RlockTest::start_bg($hb, 'SELECT ho_loop(250, false)');
ok(RlockTest::wait_until(sub { RlockTest::bg_done($ha) && RlockTest::bg_done($hb) }, 120),
	'part 2: both hand-off loops end');
note sprintf('part 2: 250 rounds each took %.1f s', time() - $t0);
my $checked2 = 0;
for my $p ([ 'A', $ha ], [ 'B', $hb ])
{
	my ($out, $err, $st) = RlockTest::bg_result($p->[1]);
	is($st, '00000', "part 2: session $p->[0] ended without an error") or diag($err);
	like($out, qr/^250 0 \d+$/, "part 2: session $p->[0]: 250 rounds, no 40P01")
	  or diag($err);
	$checked2 += $1 if $out =~ / (\d+)$/;
}
note "part 2: $checked2 waits outlasted the 10 ms deadlock_timeout";
cmp_ok($checked2, '>', 50, 'part 2: many waits were checked for deadlocks');
my ($waits2, $wait_s) = (0, 0);
foreach my $n ($one, $two)
{
	$waits2 += RlockTest::stat_of($n, 'contended_acquisitions');
	$wait_s += RlockTest::stat_of($n, 'wait_time');
}
note sprintf('part 2: %d contended acquisitions, wait_time %.1f', $waits2, $wait_s);
cmp_ok($waits2, '>', 50, 'part 2: the sessions waited for one another often');

# ---------------------------------------------------------------------------
# 3. a try with no wait in a would-be cycle: false, never 40P01
# ---------------------------------------------------------------------------
# Each case: [ label, A takes n1, B takes n2, A waits for n2, B tries n1,
# B lets n2 go, A lets go of all ].  A is on alpha and checks every 20 ms;
# B on beta.
$two->safe_psql('postgres',
	"SELECT rlock_semaphore_set_permits(s, 1) FROM unnest(ARRAY['tr_s1', 'tr_s2']) s");
my @cases = (
	[ 'exclusive', "SELECT rlock_acquire('tr_e1')", "SELECT rlock_acquire('tr_e2')",
	  "SELECT rlock_acquire('tr_e2')", "SELECT rlock_try_acquire('tr_e1', wait => '0')",
	  "SELECT rlock_release('tr_e2')", 'f' ],
	[ 'exclusive, transaction-level', "SELECT rlock_acquire('tr_x1')", "SELECT rlock_acquire('tr_x2')",
	  "SELECT rlock_acquire('tr_x2')",
	  "BEGIN; SELECT rlock_xact_try_acquire('tr_x1', wait => '0'); COMMIT",
	  "SELECT rlock_release('tr_x2')", 'f' ],
	[ 'fenced', "SELECT rlock_fenced_acquire('tr_f1') > 0", "SELECT rlock_fenced_acquire('tr_f2') > 0",
	  "SELECT rlock_fenced_acquire('tr_f2') > 0",
	  "SELECT coalesce(rlock_fenced_try_acquire('tr_f1', wait => '0')::text, 'null')",
	  "SELECT rlock_release('tr_f2')", 'null' ],
	[ 'fenced, transaction-level', "SELECT rlock_fenced_acquire('tr_g1') > 0",
	  "SELECT rlock_fenced_acquire('tr_g2') > 0", "SELECT rlock_fenced_acquire('tr_g2') > 0",
	  "BEGIN; SELECT coalesce(rlock_fenced_xact_try_acquire('tr_g1', wait => '0')::text, 'null'); COMMIT",
	  "SELECT rlock_release('tr_g2')", 'null' ],
	[ 'read', "SELECT rlock_write_acquire('tr_r1')", "SELECT rlock_write_acquire('tr_r2')",
	  "SELECT rlock_read_acquire('tr_r2')", "SELECT rlock_read_try_acquire('tr_r1', wait => '0')",
	  "SELECT rlock_write_release('tr_r2')", 'f' ],
	[ 'read, transaction-level', "SELECT rlock_write_acquire('tr_q1')", "SELECT rlock_write_acquire('tr_q2')",
	  "SELECT rlock_read_acquire('tr_q2')",
	  "BEGIN; SELECT rlock_read_xact_try_acquire('tr_q1', wait => '0'); COMMIT",
	  "SELECT rlock_write_release('tr_q2')", 'f' ],
	[ 'write', "SELECT rlock_read_acquire('tr_w1')", "SELECT rlock_read_acquire('tr_w2')",
	  "SELECT rlock_write_acquire('tr_w2')", "SELECT rlock_write_try_acquire('tr_w1', wait => '0')",
	  "SELECT rlock_read_release('tr_w2')", 'f' ],
	[ 'write, transaction-level', "SELECT rlock_read_acquire('tr_v1')", "SELECT rlock_read_acquire('tr_v2')",
	  "SELECT rlock_write_acquire('tr_v2')",
	  "BEGIN; SELECT rlock_write_xact_try_acquire('tr_v1', wait => '0'); COMMIT",
	  "SELECT rlock_read_release('tr_v2')", 'f' ],
	[ 'fair', "SELECT rlock_fair_acquire('tr_a1')", "SELECT rlock_fair_acquire('tr_a2')",
	  "SELECT rlock_fair_acquire('tr_a2')", "SELECT rlock_fair_try_acquire('tr_a1', wait => '0')",
	  "SELECT rlock_fair_release('tr_a2')", 'f' ],
	[ 'fair, transaction-level', "SELECT rlock_fair_acquire('tr_b1')", "SELECT rlock_fair_acquire('tr_b2')",
	  "SELECT rlock_fair_acquire('tr_b2')",
	  "BEGIN; SELECT rlock_fair_xact_try_acquire('tr_b1', wait => '0'); COMMIT",
	  "SELECT rlock_fair_release('tr_b2')", 'f' ],
	[ 'multi', "SELECT rlock_acquire('tr_m1')", "SELECT rlock_acquire('tr_m2')",
	  "SELECT rlock_acquire('tr_m2')",
	  "SELECT rlock_multi_try_acquire(ARRAY['tr_m0', 'tr_m1'], wait => '0')",
	  "SELECT rlock_release('tr_m2')", 'f' ],
	[ 'multi, transaction-level', "SELECT rlock_acquire('tr_n1')", "SELECT rlock_acquire('tr_n2')",
	  "SELECT rlock_acquire('tr_n2')",
	  "BEGIN; SELECT rlock_multi_xact_try_acquire(ARRAY['tr_n0', 'tr_n1'], wait => '0'); COMMIT",
	  "SELECT rlock_release('tr_n2')", 'f' ],
	[ 'redlock', "SELECT rlock_redlock_acquire('tr_d1')", "SELECT rlock_redlock_acquire('tr_d2')",
	  "SELECT rlock_redlock_acquire('tr_d2')",
	  "SELECT rlock_redlock_try_acquire('tr_d1', wait => '0')",
	  "SELECT rlock_redlock_release('tr_d2')", 'f' ],
	[ 'redlock, transaction-level', "SELECT rlock_redlock_acquire('tr_c1')",
	  "SELECT rlock_redlock_acquire('tr_c2')", "SELECT rlock_redlock_acquire('tr_c2')",
	  "BEGIN; SELECT rlock_redlock_xact_try_acquire('tr_c1', wait => '0'); COMMIT",
	  "SELECT rlock_redlock_release('tr_c2')", 'f' ],
	[ 'semaphore', "SELECT rlock_semaphore_acquire('tr_s1')", "SELECT rlock_semaphore_acquire('tr_s2')",
	  "SELECT rlock_semaphore_acquire('tr_s2')",
	  "SELECT rlock_semaphore_try_acquire('tr_s1', wait => '0')",
	  "SELECT rlock_semaphore_release('tr_s2')", 'f' ],
	[ 'semaphore, transaction-level', "SELECT rlock_semaphore_acquire('tr_s1')",
	  "SELECT rlock_semaphore_acquire('tr_s2')", "SELECT rlock_semaphore_acquire('tr_s2')",
	  "BEGIN; SELECT rlock_semaphore_xact_try_acquire('tr_s1', wait => '0'); COMMIT",
	  "SELECT rlock_semaphore_release('tr_s2')", 'f' ],);

my $ta = $one->background_psql('postgres', on_error_stop => 0);
my $tb = $two->background_psql('postgres', on_error_stop => 0);
$ta->query_safe("SET rlock.deadlock_timeout = '20ms'");
my $a_pid = $ta->query_safe('SELECT pg_backend_pid()');
chomp $a_pid;
foreach my $c (@cases)
{
	my ($label, $a_take, $b_take, $a_wait, $b_try, $b_let, $want) = @$c;
	my ($o, $e, $st) = RlockTest::run_sql($ta, $a_take);
	is($st, '00000', "part 3, $label: A takes its lock") or diag($e);
	($o, $e, $st) = RlockTest::run_sql($tb, $b_take);
	is($st, '00000', "part 3, $label: B takes its lock") or diag($e);
	RlockTest::start_bg($ta, $a_wait);
	# A's wait is known (in Redis too: beta reads it there)
	ok( RlockTest::wait_until(
			sub {
				RlockTest::sql($two,
					"SELECT count(*) FROM rlock_waits WHERE server = 'alpha' AND pid = $a_pid")
				  eq '1';
			},
			30),
		"part 3, $label: A waits for B's lock");
	($o, $e, $st) = RlockTest::run_sql($tb, $b_try);
	$o =~ s/^\s+|\s+$//g;
	is($st, '00000', "part 3, $label: B's try with no wait raises nothing")
	  or diag($e);
	like($o, qr/^\Q$want\E$/m, "part 3, $label: B's try returns $want");
	($o, $e, $st) = RlockTest::run_sql($tb, $b_let);
	ok(RlockTest::wait_until(sub { RlockTest::bg_done($ta) }, 30),
		"part 3, $label: A's wait ends once B lets go");
	my ($ao, $ae, $ast) = RlockTest::bg_result($ta);
	is($ast, '00000', "part 3, $label: A acquires (no 40P01)") or diag($ae);
	RlockTest::run_sql($ta, 'SELECT rlock_release_all()');
	RlockTest::run_sql($tb, 'SELECT rlock_release_all()');
}
$_->quit foreach ($ha, $hb, $ta, $tb);

done_testing();
