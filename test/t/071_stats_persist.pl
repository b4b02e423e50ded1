# Copyright (c) 2026, rlock developers
#
# rlock_stats and rlock_stats_histograms (SPEC 12): the histograms count one
# wait per acquisition call and one hold per holding, per kind, in
# cumulative buckets; a wait and a hold known to last more than a second
# land above the 1 s bucket and in the one their measured bounds allow; a
# clean restart (fast, or even an immediate stop) keeps every counter and
# bucket as it was, a crash restart starts them from zero without counting
# anything twice, a corrupt or truncated file is ignored with a LOG line,
# and rlock_stats_reset() empties them all.
#
# No assertion depends on timing: durations are asserted against bounds
# the server's clock measured around them, and waits are polled.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use RlockTest;
use RlockTest::Docs;

my $redis = RlockTest::Redis->new;
my $node = RlockTest::new_node('stats_persist', $redis,
	extra_conf => 'restart_after_crash = on');

my @BOUNDS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60, 300, 3600);
my @WAIT_KINDS = qw(exclusive read write fair redlock semaphore multi latch);
my @HOLD_KINDS = qw(exclusive read write fair redlock semaphore);

sub sq { return RlockTest::sql($node, $_[0]); }

# The histograms: "kind/measure/le" => count, and "kind/measure" => sum.
sub hist
{
	my %h;
	my $out = sq("SELECT kind, measure, le, count, sum FROM rlock_stats_histograms");
	for my $line (split /\n/, $out)
	{
		my ($k, $m, $le, $c, $s) = split /\|/, $line;
		$h{"$k/$m/$le"} = $c;
		$h{"$k/$m"} = $s;
	}
	return \%h;
}

# The counters nothing but this test's lock calls moves, and reset_at.
my $COUNTERS = 'acquisitions, contended_acquisitions, failed_acquisitions, '
  . 'releases, locks_lost, stats_reset';
sub counters { return sq("SELECT $COUNTERS FROM rlock_stats"); }

sub dcount
{
	my ($a, $b, $key) = @_;
	return ($b->{$key} // 'undef') - ($a->{$key} // 0);
}

# The smallest bound at least $secs (the bucket an observation of at most
# $secs surely falls in); 'Infinity' past the last.
sub bucket_for
{
	my ($secs) = @_;
	for my $b (@BOUNDS) { return $b if $secs <= $b; }
	return 'Infinity';
}

# ---- the view's shape ----

is(sq("SELECT count(*) FROM rlock_stats_histograms"),
	(8 + 6) * 13, 'one row per kind, measure and bucket');
is(sq("SELECT string_agg(DISTINCT kind || '/' || measure, ',' ORDER BY kind || '/' || measure) FROM rlock_stats_histograms"),
	join(',', sort((map { "$_/wait" } @WAIT_KINDS), (map { "$_/hold" } @HOLD_KINDS))),
	'the kinds: the lock kinds, multi and latch waits');

# ---- N acquisitions of several kinds: one wait and one hold each ----

sq("SELECT rlock_semaphore_set_permits('hp_sem', 3)");
sq("SELECT rlock_latch_set_count('hp_latch', 1)");
my $h0 = hist();
my $N = 5;
sq(join('', map { "SELECT rlock_try_acquire('hp_a', '1 minute'), rlock_release('hp_a');\n" } 1 .. $N));
sq("SELECT rlock_read_try_acquire('hp_rw', '1 minute'), rlock_read_release('hp_rw');
   SELECT rlock_write_try_acquire('hp_rw', '1 minute'), rlock_write_release('hp_rw');
   SELECT rlock_fair_try_acquire('hp_f', '1 minute'), rlock_fair_release('hp_f');
   SELECT rlock_semaphore_try_acquire('hp_sem', 2, '1 minute'), rlock_semaphore_release('hp_sem', 2);
   SELECT rlock_multi_try_acquire(ARRAY['hp_m1', 'hp_m2'], '1 minute'), rlock_multi_release(ARRAY['hp_m1', 'hp_m2']);
   SELECT rlock_latch_await('hp_latch', '10 ms');");
my $h1 = hist();
is(dcount($h0, $h1, 'exclusive/wait/Infinity'), $N,
	"$N exclusive acquisitions: $N waits (+Inf)");
is(dcount($h0, $h1, 'exclusive/hold/Infinity'), $N + 2,
	"... and $N holds, and the multi-lock's two names held as exclusive");
for my $k (qw(read write fair semaphore))
{
	is(dcount($h0, $h1, "$k/wait/Infinity"), 1, "one $k wait");
	is(dcount($h0, $h1, "$k/hold/Infinity"), 1,
		"one $k hold" . ($k eq 'semaphore' ? ' (its two permits, taken and released together)' : ''));
}
is(dcount($h0, $h1, 'multi/wait/Infinity'), 1, 'one multi-lock wait');
is(dcount($h0, $h1, 'latch/wait/Infinity'), 1,
	'one latch await (not at zero: it waited its 10 ms)');
cmp_ok($h1->{'latch/wait'} - $h0->{'latch/wait'}, '>=', 0.009,
	'the latch await\'s 10 ms are in its sum');
is(dcount($h0, $h1, 'redlock/wait/Infinity'), 0, 'no Redlock was asked for');

# every histogram's buckets are cumulative: non-decreasing in le
is(sq("SELECT count(*) FROM (SELECT count < lag(count) OVER (PARTITION BY kind, measure ORDER BY le) AS down FROM rlock_stats_histograms) s WHERE down"),
	'0', 'buckets never decrease with le');

# ---- a hold known to last more than 1.2 s ----

my $a = $node->background_psql('postgres', on_error_stop => 0);
my $b = $node->background_psql('postgres', on_error_stop => 0);
sub q1 { my ($s, $sql) = @_; my ($o) = RlockTest::query_err($s, $sql); return $o; }

$h0 = hist();
# (the clock before the acquisition bounds the hold from above, the clock
# after it from below)
my ($t0, undef, $t0a) = split /\|/, q1($a,
	"SELECT extract(epoch FROM clock_timestamp()), rlock_acquire('hp_long', '1 minute'), extract(epoch FROM clock_timestamp())");
ok(RlockTest::wait_until(sub {
	q1($a, "SELECT extract(epoch FROM clock_timestamp()) - $t0a > 1.2") eq 't' }, 60),
	'1.2 s passed with the lock held');
my $t1 = q1($a, "SELECT rlock_release('hp_long'), extract(epoch FROM clock_timestamp())");
$t1 = (split /\|/, $t1)[1];
$h1 = hist();
my $upper = $t1 - $t0;
my $bucket = bucket_for($upper);
note "hold between 1.2 s and $upper s: bucket le=$bucket";
is(dcount($h0, $h1, 'exclusive/hold/Infinity'), 1, 'one hold');
is(dcount($h0, $h1, 'exclusive/hold/1'), 0, 'not in the 1 s bucket');
is(dcount($h0, $h1, "exclusive/hold/$bucket"), 1,
	"in the le=$bucket bucket its measured bounds allow");
my $held = $h1->{'exclusive/hold'} - $h0->{'exclusive/hold'};
ok($held > 1.2 && $held <= $upper + 0.001, "its sum grew by its length ($held s)");

# ---- a wait known to last more than 1.2 s ----

q1($a, "SELECT rlock_acquire('hp_w', '1 minute')");
$h0 = hist();
my $s0 = counters();
RlockTest::start_bg($b,
	"SELECT rlock_acquire('hp_w', '1 minute'), extract(epoch FROM clock_timestamp() - statement_timestamp())");
RlockTest::wait_for_rlock_waiters($node, 'postgres', 1, "%rlock_acquire('hp_w'%");
my $seen = q1($a, "SELECT extract(epoch FROM clock_timestamp())");
ok(RlockTest::wait_until(sub {
	q1($a, "SELECT extract(epoch FROM clock_timestamp()) - $seen > 1.2") eq 't' }, 60),
	'the waiter waited 1.2 s');
q1($a, "SELECT rlock_release('hp_w')");
ok(RlockTest::wait_until(sub { RlockTest::bg_done($b) }, 60), 'the waiter got it');
my ($wout) = RlockTest::bg_result($b);
my ($got, $wupper) = split /\|/, $wout;
is($got, '', 'rlock_acquire returned');
$bucket = bucket_for($wupper);
note "wait between 1.2 s and $wupper s: bucket le=$bucket";
q1($b, "SELECT rlock_release('hp_w')");
$h1 = hist();
is(dcount($h0, $h1, 'exclusive/wait/Infinity'), 1, 'one wait');
is(dcount($h0, $h1, 'exclusive/wait/1'), 0, 'not in the 1 s bucket');
is(dcount($h0, $h1, "exclusive/wait/$bucket"), 1, "in the le=$bucket bucket");
is(dcount($h0, $h1, 'exclusive/hold/Infinity'), 2, "two holds ended (the waiter's and the holder's)");
# ---- a hold found lost ends there, once ----

q1($a, "SELECT rlock_acquire('hp_lost')");    # (renewed by the watchdog)
$h0 = hist();
$redis->cli('DEL', 'hp_lost');
ok(RlockTest::wait_until(sub {
	sq("SELECT state FROM rlock_locks WHERE name = 'hp_lost'") eq 'lost' }, 60),
	'the watchdog finds the lock lost');
$h1 = hist();
is(dcount($h0, $h1, 'exclusive/hold/Infinity'), 1, 'its hold ended when it was found lost');
q1($a, "SELECT rlock_release('hp_lost')");    # (false, a WARNING)
my $h2 = hist();
is(dcount($h1, $h2, 'exclusive/hold/Infinity'), 0, 'and its release does not count it again');
is(dcount($h0, $h2, 'exclusive/wait/Infinity'), 0, 'a release is no wait');

$a->quit;
$b->quit;

# ---- doc/metrics.md: its SQL runs, and so does every query of its
# sql_exporter collector, with the columns its metrics name ----

for my $blk (grep { $_->{file} eq 'doc/metrics.md' } RlockTest::Docs::sql_blocks('sql'))
{
	my ($rc, $o, $e) = $node->psql('postgres', $blk->{text});
	is("$rc $e", '0 ', "doc/metrics.md:$blk->{line} runs");
}
{
	my $yaml = RlockTest::Docs::block('metrics-sql-exporter');
	my @queries = $yaml =~ /query: \|\n((?:[ ]{6,}.*\n)+)/g;
	my @want = $yaml =~ /values: \[(\w+)\]/g;
	push @want, map { split /,\s*/ } $yaml =~ /key_labels: \[([\w, ]+)\]/g;
	my %cols;
	ok(@queries >= 5, scalar(@queries) . ' queries in the collector');
	for my $sql (@queries)
	{
		my ($rc, $o, $e) = $node->psql('postgres', "$sql \\gdesc");
		is("$rc $e", '0 ', 'a collector query runs');
		$cols{ (split /\|/)[0] } = 1 for split /\n/, $o;
	}
	is(join(' ', grep { !$cols{$_} } @want), '', 'every value and label is a column');
	is(sq("SELECT count(*) FROM rlock_stats_histograms WHERE le = 'Infinity' AND measure = 'wait'"),
		8, 'one wait series per kind');
}

# ---- a clean restart keeps every counter and bucket ----

my $c0 = counters();
my $hs0 = sq("SELECT kind, measure, le, count, sum FROM rlock_stats_histograms ORDER BY 1, 2, 3");
like($c0, qr/^[1-9]\d*\|/, 'acquisitions counted');
$node->restart;    # (fast)
my $pgstat = $node->data_dir . '/pg_stat/rlock_stats.stat';
ok(!-e $pgstat, 'the file is removed once read');
is(counters(), $c0, 'the counters and reset time survive a clean restart');
is(sq("SELECT kind, measure, le, count, sum FROM rlock_stats_histograms ORDER BY 1, 2, 3"),
	$hs0, 'so does every bucket and sum');
my ($acq0) = split /\|/, $c0;
sq("SELECT rlock_try_acquire('hp_a', '1 minute'), rlock_release('hp_a')");
my ($acq1) = split /\|/, counters();
is($acq1, $acq0 + 1, 'and they go on from there');
is(sq("SELECT open_connections >= 0 FROM rlock_stats"), 't', 'the gauge is there');

# ---- a crash restart starts from zero, and counts nothing twice ----

my $v = $node->background_psql('postgres', on_error_stop => 0);
my $victim = q1($v, "SELECT pg_backend_pid()");
my $log = -s $node->logfile;
ok(RlockTest::kill_backend_and_wait_restart($node, $victim), 'crash restart');
eval { $v->quit };
my ($acqc) = split /\|/, counters();
is($acqc, 0, 'after a crash the counters start from zero');
is(sq("SELECT sum(count) FROM rlock_stats_histograms WHERE le = 'Infinity'"), '0',
	'and so do the histograms');
sq("SELECT rlock_try_acquire('hp_a', '1 minute'), rlock_release('hp_a')") for 1 .. 2;
$c0 = counters();
like($c0, qr/^2\|/, 'two acquisitions since the crash');
$node->restart;
is(counters(), $c0, 'a clean restart after a crash restart saves them once');

# ---- an immediate stop: the postmaster exits normally once its children
# are gone, and saves them (PostgreSQL 15 does; a version whose postmaster
# exits with an error saves nothing: either way, nothing half) ----

sq("SELECT rlock_try_acquire('hp_a', '1 minute'), rlock_release('hp_a')");
$c0 = counters();
$node->stop('immediate');
my $saved = -e $pgstat;
$node->start;
my $ci = counters();
note "after an immediate stop: " . ($saved ? 'saved' : 'not saved');
ok(($saved && $ci eq $c0) || (!$saved && $ci =~ /^0\|0\|0\|0\|0\|/),
	'an immediate stop keeps the counters whole, or starts them from zero');

# ---- a damaged file is ignored with a LOG line ----

for my $case (['truncated', sub { truncate($_[0], 10) }],
	['a flipped byte', sub {
		open(my $fh, '+<', $_[0]) or die; binmode $fh;
		seek($fh, 40, 0); my $c; read($fh, $c, 1);
		seek($fh, 40, 0); print $fh chr(ord($c) ^ 0x55); close $fh; }],
	['garbage', sub {
		open(my $fh, '>', $_[0]) or die; print $fh "not rlock's" x 100; close $fh; }])
{
	my ($what, $damage) = @$case;
	sq("SELECT rlock_try_acquire('hp_a', '1 minute'), rlock_release('hp_a')");
	$node->stop('fast');
	ok(-e $pgstat, "$what: the stop wrote the file");
	$damage->($pgstat);
	$log = -s $node->logfile;
	$node->start;
	ok(RlockTest::log_has($node, $log, qr/rlock: ignoring file "pg_stat\/rlock_stats\.stat"/),
		"$what: a LOG line says the file is ignored");
	like(counters(), qr/^0\|0\|0\|0\|0\|/, "$what: the counters start from zero");
	is(sq("SELECT sum(count) FROM rlock_stats_histograms"), '0',
		"$what: the histograms too");
	ok(!-e $pgstat, "$what: the file is gone");
}

# ---- rlock_stats_reset() empties everything ----

sq("SELECT rlock_try_acquire('hp_a', '1 minute'), rlock_release('hp_a')");
isnt(sq("SELECT sum(count) FROM rlock_stats_histograms"), '0', 'counted');
sq("SELECT rlock_stats_reset()");
like(counters(), qr/^0\|0\|0\|0\|0\|/, 'the reset zeroes the counters');
is(sq("SELECT sum(count) || '/' || sum(sum) FROM rlock_stats_histograms"), '0/0',
	'and every bucket and sum');
# ... and the reset is what a clean restart keeps
$c0 = counters();
$node->restart;
is(counters(), $c0, 'a reset survives a clean restart');

$node->stop;
done_testing();
