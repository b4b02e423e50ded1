# Copyright (c) 2026, rlock developers
#
# The README's "Recipes for pg_cron", run as printed under a real pg_cron
# (Debian's postgresql-15-cron) preloaded beside rlock on two servers, A
# and B, sharing one Redis, and on a third, C, whose Redis is down (SPEC 12
# "Scheduled jobs").  Each recipe is read from README.md by its name
# (RlockTest::Docs), never copied; the only change made to it is its
# schedule, set to the coming minute (matching once: '5 17 7 12 *'), and
# for recipes 1, 2 and 5 its quoted names (job and lock: 'import' ->
# 'import-lost') where a server runs a second case of it at the same
# minute.  cron.job_run_details must then show what the README's tables
# say:
#   1. no overlap: 'import' on A and B, one waits for the other, both run,
#      their runs do not overlap; 'import-lost' (its key deleted from Redis
#      mid-run): COMMIT refused; 'import-deadlock' (its run_import waits for
#      a lock whose holder, a session on A, waits for it): 40P01;
#   2. skip: skipped ("0 rows", a row in cron_skips) while a session on B
#      holds 'report', ran ("1 row") on a free lock;
#   3. semaphore: six heavy jobs (three per server), two permits: two at a
#      time, never three, all run; three more on A with a semaphore of their
#      own, one whose permit is deleted from Redis: that one fails at COMMIT;
#   4. latch: the report, started with the loads, waits until the third
#      load counted down, then runs; one whose latch was never armed fails;
#   5. hand-off: the lock taken by the coordinator job outlives its session
#      and is released by the worker job on the other server ("DO"); a
#      worker whose lock was lost meanwhile (deleted from Redis): failed, its
#      export rolled back;
#   6. Java: the job waits while a Redisson client (RlockTest::Redisson)
#      holds 'ledger', runs once it unlocks, and the client cannot take it
#      meanwhile;
#   and every recipe on C: failed, "could not connect to Redis".
# The user procedures the recipes call are the test's: each waits for a
# row in table gate (the test's cue), never for time to pass.  Every job
# runs once (its schedule matches one minute); the latch's loads and
# report are scheduled once its arming job ran, so everything takes two
# minutes of pg_cron.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use RlockTest;
use RlockTest::Docs;

my $pgconfig = $ENV{PG_CONFIG} // 'pg_config';
my $pkglibdir = `$pgconfig --pkglibdir`;
chomp $pkglibdir;
plan skip_all => "pg_cron is not installed in $pkglibdir"
  unless -f "$pkglibdir/pg_cron.so";
# the recipes call cron.schedule_in_database, new in pg_cron 1.4
my $sharedir = `$pgconfig --sharedir`;
chomp $sharedir;
my $cron_version = '0';
if (open my $control, '<', "$sharedir/extension/pg_cron.control")
{
	while (<$control>)
	{
		$cron_version = $1 if /^\s*default_version\s*=\s*'([\d.]+)/;
	}
	close $control;
}
my ($cmajor, $cminor) = split /\./, $cron_version;
plan skip_all => "pg_cron $cron_version has no cron.schedule_in_database (1.4 and later)"
  unless $cmajor > 1 || ($cmajor == 1 && ($cminor // 0) >= 4);

# ---- the recipes, from the README ----

# the schedule the recipes get: one coming minute (pg_cron's clock is
# GMT), at least 20 s ahead so that every job is in before it starts; a
# schedule that matches once keeps pg_cron from queuing a second run while
# the first still waits for the test's cue
my $WHEN;
sub next_minute
{
	my ($node) = @_;
	$WHEN = $node->safe_psql('postgres', q{
		SELECT to_char(date_trunc('minute', t) + interval '1 minute'
		  * CASE WHEN extract(second FROM t) > 40 THEN 2 ELSE 1 END,
		  'FMMI FMHH24 FMDD FMMM') || ' *'
		FROM (SELECT clock_timestamp() AT TIME ZONE 'GMT' AS t) n});
	note "the jobs are scheduled at '$WHEN' (GMT)";
	return;
}

# a recipe's block, its schedules set to $WHEN, 'from' names replaced by
# 'to' (quoted names only: 'import' and 'import' || ...)
sub recipe
{
	my ($name, %rename) = @_;
	my $sql = RlockTest::Docs::block($name);
	my $jobs = () = $sql =~ /cron\.schedule_in_database\(/g;
	my $n = ($sql =~ s/'(?:[0-9*\/,-]+ ){4}[0-9*\/,-]+'/'$WHEN'/g) || 0;
	die "recipe $name: $jobs jobs, $n schedules\n" unless $n == $jobs;
	foreach my $from (keys %rename)
	{
		my $to = $rename{$from};
		my $count = ($sql =~ s/'\Q$from\E'/'$to'/g);
		die "recipe $name does not name '$from'\n" unless $count;
	}
	return $sql;
}

# how long a check waits: pg_cron's next minute, a loaded machine
# (RLOCK_RECIPES_WAIT shortens it to see a broken recipe fail sooner)
my $LONG = $ENV{RLOCK_RECIPES_WAIT} // 180;
my $SHORT = $LONG < 60 ? $LONG : 60;

my $redis = RlockTest::Redis->new;
my $dead = RlockTest::Redis->new;    # C's Redis, stopped before the jobs run

# the test's side of the recipes, in database etl: the procedures they
# call, each waiting for its cue in table gate (and, for the deadlock case,
# then taking the lock the gate names)
my $setup = q{
CREATE TABLE gate (name text PRIMARY KEY, then_lock text);
CREATE TABLE job_log (proc text, arg text, started timestamptz, ended timestamptz);
CREATE FUNCTION await_gate(key text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE nxt text;
BEGIN
  LOOP
    SELECT then_lock INTO nxt FROM gate WHERE name = key;
    EXIT WHEN FOUND;
    PERFORM pg_sleep(0.05);
  END LOOP;
  IF nxt IS NOT NULL THEN PERFORM rlock_xact_acquire(nxt); END IF;
END $$;
CREATE FUNCTION log_run(p text, a text, t timestamptz) RETURNS void LANGUAGE sql
  AS $$ INSERT INTO job_log VALUES (p, a, t, clock_timestamp()) $$;
-- the lock this job session holds (the name of its case)
CREATE FUNCTION my_lock() RETURNS text LANGUAGE sql
  AS $$ SELECT min(name) FROM rlock_locks WHERE pid = pg_backend_pid() $$;
CREATE PROCEDURE run_import() LANGUAGE plpgsql AS $$
DECLARE k text := my_lock(); t timestamptz := clock_timestamp();
BEGIN PERFORM await_gate(k); PERFORM log_run('run_import', k, t); END $$;
CREATE FUNCTION nightly_report() RETURNS void LANGUAGE sql
  AS $$ SELECT log_run('nightly_report', my_lock(), clock_timestamp()) $$;
-- (the jobs of the lost permit's case wait for their own cue)
CREATE PROCEDURE export_region(r text) LANGUAGE plpgsql AS $$
DECLARE t timestamptz := clock_timestamp();
  k text := CASE WHEN current_query() LIKE '%heavy-lost%' THEN 'heavy-lost' ELSE 'heavy' END;
BEGIN PERFORM await_gate(k); PERFORM log_run('export_region', k || ' ' || r, t); END $$;
CREATE PROCEDURE load_partition(p text) LANGUAGE plpgsql AS $$
DECLARE t timestamptz := clock_timestamp();
BEGIN PERFORM await_gate('load'); PERFORM log_run('load_partition', p, t); END $$;
CREATE PROCEDURE build_report() LANGUAGE sql
  AS $$ SELECT log_run('build_report', NULL, clock_timestamp()) $$;
CREATE PROCEDURE plan_export() LANGUAGE sql
  AS $$ SELECT log_run('plan_export', NULL, clock_timestamp()) $$;
-- (the worker of the lost case waits for its own cue: its command names it)
CREATE PROCEDURE run_export() LANGUAGE plpgsql AS $$
DECLARE t timestamptz := clock_timestamp();
  k text := CASE WHEN current_query() LIKE '%export-lost:%' THEN 'export-lost' ELSE 'export' END;
BEGIN PERFORM await_gate(k); PERFORM log_run('run_export', k, t); END $$;
CREATE PROCEDURE close_ledger() LANGUAGE plpgsql AS $$
DECLARE t timestamptz := clock_timestamp();
BEGIN PERFORM await_gate('ledger'); PERFORM log_run('close_ledger', NULL, t); END $$;
};

# a node with rlock and pg_cron (libpq mode, through the node's socket)
sub cron_node
{
	my ($name, $r) = @_;
	my $node = RlockTest::new_node($name, $r, dbs => [ 'postgres', 'etl' ]);
	$node->append_conf('postgresql.conf',
		"shared_preload_libraries = 'rlock,pg_cron'\n"
		  . "cron.database_name = 'postgres'\n"
		  . "cron.host = '" . $node->host . "'\n"
		  . "max_connections = 60\n");
	$node->restart;
	$node->safe_psql('postgres', 'CREATE EXTENSION pg_cron');
	$node->safe_psql('etl', $setup);
	$node->safe_psql('etl', recipe('recipe-skip-table'));
	return $node;
}

my $A = cron_node('cron_a', $redis);
my $B = cron_node('cron_b', $redis);
my $C = cron_node('cron_c', $dead);
my %node = (A => $A, B => $B, C => $C);

my $date = $A->safe_psql('etl', 'SELECT current_date');

# the cases held before the jobs start: a session on B holds 'report', a
# Java service holds 'ledger'
# (its session outlives the 180 s a background psql is given by default)
my $report_holder = $B->background_psql('etl', on_error_stop => 0, timeout => 900);
$report_holder->query_safe("SELECT rlock_acquire('report')");
my $java = 'a1b2c3d4-0000-4000-8000-0000000000aa:1';
is(RlockTest::Redisson::try_lock($redis, 'ledger', 600000, $java), '',
	'the Java service holds "ledger"');

# ---- schedule (minute 1) ----
next_minute($A);
$A->safe_psql('postgres', recipe('recipe-no-overlap'));
$A->safe_psql('postgres', recipe('recipe-no-overlap', import => 'import-lost'));
$B->safe_psql('postgres', recipe('recipe-no-overlap'));
$B->safe_psql('postgres', recipe('recipe-no-overlap', import => 'import-deadlock'));
$A->safe_psql('postgres', recipe('recipe-skip'));
$B->safe_psql('postgres', recipe('recipe-skip', report => 'report-free'));
$A->safe_psql('postgres', recipe('recipe-semaphore'));
$B->safe_psql('postgres', recipe('recipe-semaphore'));
$A->safe_psql('postgres', recipe('recipe-semaphore',
	'heavy-jobs' => 'heavy-lost', 'export-' => 'lost-'));
$A->safe_psql('postgres', recipe('recipe-latch-arm'));
$A->safe_psql('postgres', recipe('recipe-java'));
# the hand-off: the coordinator on A, the worker on B; and a second one
# whose lock is lost before the worker releases it
$A->safe_psql('postgres', recipe('recipe-handoff-coordinator'));
$A->safe_psql('postgres', recipe('recipe-handoff-coordinator',
	'export:' => 'export-lost:', 'export-plan' => 'export-plan-lost'));
$B->safe_psql('postgres', recipe('recipe-handoff-worker'));
$B->safe_psql('postgres', recipe('recipe-handoff-worker',
	'export:' => 'export-lost:', 'export-run' => 'export-run-lost'));
# C, Redis down from the start (its jobs must not run while it is up):
# setting the permits fails there, the rest of the block schedules the jobs
$dead->stop;
foreach my $r (qw(recipe-no-overlap recipe-skip recipe-semaphore
	recipe-handoff-coordinator recipe-latch-report recipe-java))
{
	my ($ret, $out, $err) = $C->psql('postgres', recipe($r), on_error_stop => 0);
	note "$r on C: $err" if $err ne '';
}
note 'jobs scheduled; pg_cron starts them at the next minute';

# a job's run on a server: (status, return_message), or () before it
# ended
my %jobid;
sub run_of
{
	my ($server, $job) = @_;
	my $node = $node{$server};
	$jobid{"$server $job"} //= $node->safe_psql('postgres',
		"SELECT jobid FROM cron.job WHERE jobname = '$job'");
	die "no job $job on $server\n" unless $jobid{"$server $job"};
	my $row = $node->safe_psql('postgres',
		"SELECT status || '|' || coalesce(return_message, '') "
		  . "FROM cron.job_run_details WHERE jobid = " . $jobid{"$server $job"}
		  . " ORDER BY runid LIMIT 1");
	return () unless $row =~ /^(succeeded|failed)\|(.*)$/s;
	my ($status, $msg) = ($1, $2);
	$msg =~ s/\s+$//;
	return ($status, $msg);
}

sub ended
{
	my ($server, $job, $timeout) = @_;
	my @r;
	RlockTest::wait_until(sub { @r = run_of($server, $job); scalar @r },
		$timeout // $LONG);
	note "$server $job: " . (@r ? "$r[0]: $r[1]" : 'did not end');
	return @r;
}

sub sql { my ($n, $q) = @_; return $n->safe_psql('etl', $q); }

sub open_gate
{
	my ($n, $name, $then) = @_;
	sql($n, "INSERT INTO gate VALUES ('$name', "
		  . (defined $then ? "'$then'" : 'NULL') . ')');
}

# ---- 1. no overlap ----
ok( RlockTest::wait_until(sub {
		sql($A, "SELECT count(*) FROM rlock_waits WHERE name = 'import'") eq '1'
		  && sql($A, "SELECT count(*) FROM rlock_locks WHERE name = 'import'")
		  + sql($B, "SELECT count(*) FROM rlock_locks WHERE name = 'import'") == 1;
	}, $LONG),
	'recipe 1: one server\'s "import" runs, the other\'s waits for it');
open_gate($_, 'import') foreach ($A, $B);
my @runs;
foreach my $s (qw(A B))
{
	my ($status, $msg) = ended($s, 'import');
	is($status, 'succeeded', "recipe 1: \"import\" on $s succeeded");
	is($msg, 'CALL', "recipe 1: return_message CALL on $s");
	push @runs, [ split /\|/, sql($node{$s},
		"SELECT extract(epoch FROM started), extract(epoch FROM ended) "
		  . "FROM job_log WHERE proc = 'run_import' AND arg = 'import'") ];
}
ok(@{ $runs[0] } == 2 && @{ $runs[1] } == 2
	  && ($runs[0][1] <= $runs[1][0] || $runs[1][1] <= $runs[0][0]),
	'recipe 1: the two runs did not overlap');

# lost: the key deleted while run_import waits for its cue
ok(RlockTest::wait_until(sub { $redis->cli('EXISTS', 'import-lost') eq '1' }, $LONG),
	'recipe 1 (lost): the job holds "import-lost"');
$redis->cli('DEL', 'import-lost');
ok( RlockTest::wait_until(sub {
		sql($A, "SELECT state FROM rlock_locks WHERE name = 'import-lost'") eq 'lost' }, $SHORT),
	'recipe 1 (lost): the job\'s session knows it lost it');
open_gate($A, 'import-lost');
my ($status, $msg) = ended('A', 'import-lost');
is($status, 'failed', 'recipe 1 (lost): failed');
like($msg, qr/^ERROR:  cannot commit: lock "import-lost" held by this transaction was lost/,
	'recipe 1 (lost): COMMIT refused, naming the lock');
is(sql($A, "SELECT count(*) FROM job_log WHERE arg = 'import-lost'"), '0',
	'recipe 1 (lost): its writes rolled back');

# deadlock: a session on A holds "accounts" and waits for "import-deadlock",
# then B's job (holding it) waits for "accounts"
ok( RlockTest::wait_until(sub { $redis->cli('EXISTS', 'import-deadlock') eq '1' }, $LONG),
	'recipe 1 (deadlock): the job holds "import-deadlock"');
my $other = $A->background_psql('etl', on_error_stop => 0, timeout => 900);
$other->query_safe("SELECT rlock_acquire('accounts')");
$other->query_until(qr/go/, "\\echo go\nSELECT rlock_acquire('import-deadlock');\n");
ok( RlockTest::wait_until(sub {
		sql($A, "SELECT count(*) FROM rlock_waits WHERE name = 'import-deadlock'") eq '1' }, $SHORT),
	'recipe 1 (deadlock): the session waits for the job\'s lock');
open_gate($B, 'import-deadlock', 'accounts');
($status, $msg) = ended('B', 'import-deadlock');
is($status, 'failed', 'recipe 1 (deadlock): the job, the victim, failed');
like($msg, qr/^ERROR:  deadlock detected/, 'recipe 1 (deadlock): deadlock detected');
ok( RlockTest::wait_until(sub {
		sql($A, "SELECT count(*) FROM rlock_locks WHERE name = 'import-deadlock'") eq '1' }, $SHORT),
	'recipe 1 (deadlock): the other session went on and got the lock');
$other->quit;

# ---- 2. skip ----
($status, $msg) = ended('A', 'report');
is($status, 'succeeded', 'recipe 2 (busy): succeeded');
is($msg, '0 rows', 'recipe 2 (busy): return_message "0 rows"');
is(sql($A, "SELECT count(*) FROM cron_skips WHERE job = 'report'"), '1',
	'recipe 2 (busy): the skip is a row in cron_skips');
is(sql($A, "SELECT count(*) FROM job_log WHERE proc = 'nightly_report'"), '0',
	'recipe 2 (busy): no report');
($status, $msg) = ended('B', 'report-free');
is($status, 'succeeded', 'recipe 2 (free): succeeded');
is($msg, '1 row', 'recipe 2 (free): return_message "1 row"');
is(sql($B, "SELECT count(*) FROM cron_skips"), '0', 'recipe 2 (free): no skip row');
is(sql($B, "SELECT arg FROM job_log WHERE proc = 'nightly_report'"), 'report-free',
	'recipe 2 (free): the report ran under its lock');
$report_holder->quit;

# ---- 3. semaphore ----
sub permits_out
{
	return sql($A, "SELECT coalesce(sum(hold_count), 0) FROM rlock_locks WHERE name = 'heavy-jobs'")
	  + sql($B, "SELECT coalesce(sum(hold_count), 0) FROM rlock_locks WHERE name = 'heavy-jobs'");
}
ok( RlockTest::wait_until(sub {
		permits_out() == 2
		  && sql($A, "SELECT count(*) FROM rlock_waits WHERE name = 'heavy-jobs'") eq '4';
	}, $LONG),
	'recipe 3: of six heavy jobs, two hold permits and four wait');
open_gate($_, 'heavy') foreach ($A, $B);
my @iv;
foreach my $s (qw(A B))
{
	foreach my $r (qw(eu us asia))
	{
		($status, $msg) = ended($s, "export-$r");
		is("$status $msg", 'succeeded CALL', "recipe 3: export-$r on $s succeeded: CALL");
	}
	push @iv, map { [ split /\|/ ] } split /\n/, sql($node{$s},
		"SELECT extract(epoch FROM started), extract(epoch FROM ended) "
		  . "FROM job_log WHERE proc = 'export_region' AND arg LIKE 'heavy %'");
}
my $most = 0;
foreach my $i (@iv)
{
	my $n = grep { $_->[0] <= $i->[0] && $i->[0] < $_->[1] } @iv;
	$most = $n if $n > $most;
}
is(scalar @iv, 6, 'recipe 3: six exports ran');
cmp_ok($most, '<=', 2, 'recipe 3: never more than two at once');

# lost: of three jobs on A sharing a semaphore of two permits, a holder's
# permit is deleted from Redis while it waits for its cue
my $lost_pid;
ok( RlockTest::wait_until(sub {
		my $pids = sql($A, "SELECT string_agg(pid::text, ' ') FROM rlock_locks "
			  . "WHERE name = 'heavy-lost' AND state = 'held'") // '';
		($lost_pid) = split / /, $pids;
		return split(/ /, $pids) == 2;
	}, $LONG),
	'recipe 3 (lost): two of three jobs hold permits');
my ($member) = grep { /:$lost_pid:/ } split /\n/,
  $redis->cli('ZRANGE', '{heavy-lost}:timeout', '0', '-1');
ok(defined $member && $redis->cli('ZREM', '{heavy-lost}:timeout', $member) eq '1',
	'recipe 3 (lost): one holder\'s permit deleted from Redis');
ok( RlockTest::wait_until(sub {
		sql($A, "SELECT state FROM rlock_locks WHERE name = 'heavy-lost' AND pid = $lost_pid")
		  eq 'lost' }, $SHORT),
	'recipe 3 (lost): its session knows it lost it');
open_gate($A, 'heavy-lost');
my %outcome;
foreach my $r (qw(eu us asia))
{
	($status, $msg) = ended('A', "lost-$r");
	$outcome{$status}++;
	if ($status eq 'failed')
	{
		like($msg, qr/^ERROR:  cannot commit: .*"heavy-lost"/,
			'recipe 3 (lost): the job that lost its permit failed at COMMIT, naming the semaphore');
	}
}
is($outcome{failed}, 1, 'recipe 3 (lost): one job failed');
is($outcome{succeeded}, 2, 'recipe 3 (lost): the other two (one once a permit came back) succeeded');

# ---- 5. hand-off ----
($status, $msg) = ended('A', 'export-plan');
is("$status $msg", 'succeeded CALL', 'recipe 5: the coordinator succeeded: CALL');
is($redis->cli('EXISTS', "export:$date"), '1',
	'recipe 5: the lock outlives the coordinator\'s session');
open_gate($B, 'export');
($status, $msg) = ended('B', 'export-run');
is("$status $msg", 'succeeded DO', 'recipe 5: the worker succeeded: DO');
is($redis->cli('EXISTS', "export:$date"), '0', 'recipe 5: and released the lock');
# lost: the coordinator's lock gone from Redis (its lease ran out, or a
# force release) before the worker releases it
($status, $msg) = ended('A', 'export-plan-lost');
is("$status $msg", 'succeeded CALL', 'recipe 5 (lost): the coordinator succeeded: CALL');
is($redis->cli('DEL', "export-lost:$date"), '1', 'recipe 5 (lost): its lock is deleted');
open_gate($B, 'export-lost');
($status, $msg) = ended('B', 'export-run-lost');
is($status, 'failed', 'recipe 5 (lost): the worker failed');
like($msg, qr/^ERROR:  lock "export-lost:\Q$date\E" was lost before the export ended/,
	'recipe 5 (lost): naming the lock');
is(sql($B, "SELECT count(*) FROM job_log WHERE proc = 'run_export' AND arg = 'export-lost'"), '0',
	'recipe 5 (lost): the export\'s writes rolled back');
is(sql($B, "SELECT count(*) FROM job_log WHERE proc = 'run_export' AND arg = 'export'"), '1',
	'recipe 5: the export that kept its lock committed');

# ---- 6. Java ----
ok( RlockTest::wait_until(sub {
		sql($A, "SELECT count(*) FROM rlock_waits WHERE name = 'ledger'") eq '1' }, $LONG),
	'recipe 6: the job waits while the Java service holds "ledger"');
is(RlockTest::Redisson::unlock($redis, 'ledger', $java), '1', 'recipe 6: Java unlocks');
ok( RlockTest::wait_until(sub {
		sql($A, "SELECT count(*) FROM rlock_locks WHERE name = 'ledger'") eq '1' }, $SHORT),
	'recipe 6: the job got the lock');
like(RlockTest::Redisson::try_lock($redis, 'ledger', 600000, $java), qr/^\d+$/,
	'recipe 6: the Java service cannot take it while the job holds it');
open_gate($A, 'ledger');
($status, $msg) = ended('A', 'close-ledger');
is("$status $msg", 'succeeded CALL', 'recipe 6: the job succeeded: CALL');
ok( RlockTest::wait_until(sub {
		RlockTest::Redisson::try_lock($redis, 'ledger', 600000, $java) eq '' }, $SHORT),
	'recipe 6: the Java service takes it after the job');
RlockTest::Redisson::unlock($redis, 'ledger', $java);

# ---- 4. latch (minute 2) ----
($status, $msg) = ended('A', 'arm-loads');
is("$status $msg", 'succeeded 1 row', 'recipe 4: the latch armed: 1 row');
next_minute($A);
$B->safe_psql('postgres', recipe('recipe-latch-loads'));
$A->safe_psql('postgres', recipe('recipe-latch-report'));
# and a report whose latch was never armed
$B->safe_psql('postgres', recipe('recipe-latch-report',
	'loads:' => 'unarmed:', 'daily-report' => 'daily-report-unarmed'));
ok( RlockTest::wait_until(sub {
		sql($A, "SELECT count(*) FROM rlock_waits WHERE name = 'loads:$date'") eq '1'
		  && sql($B, "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%load_partition%' "
			  . "AND backend_type = 'client backend' AND pid <> pg_backend_pid()") eq '3';
	}, $LONG),
	'recipe 4: the report awaits the latch while the three loads run');
open_gate($B, 'load');
foreach my $p (qw(orders stock prices))
{
	($status, $msg) = ended('B', "load-$p");
	is("$status $msg", 'succeeded 1 row', "recipe 4: load-$p succeeded: 1 row");
}
($status, $msg) = ended('A', 'daily-report');
is("$status $msg", 'succeeded CALL', 'recipe 4: the report ran: CALL');
my ($last_load, $report) = split /\|/, sql($B,
	"SELECT extract(epoch FROM max(ended)) FROM job_log WHERE proc = 'load_partition'")
  . '|' . sql($A, "SELECT extract(epoch FROM started) FROM job_log WHERE proc = 'build_report'");
cmp_ok($report, '>=', $last_load, 'recipe 4: the report started after the last load');
($status, $msg) = ended('B', 'daily-report-unarmed');
is($status, 'failed', 'recipe 4 (never armed): the report failed');
like($msg, qr/^ERROR:  latch "unarmed:\Q$date\E" does not exist/,
	'recipe 4 (never armed): naming the latch');
is(sql($B, "SELECT count(*) FROM job_log WHERE proc = 'build_report'"), '0',
	'recipe 4 (never armed): no report');

# ---- Redis down: every recipe on C ----
foreach my $job (
	qw(import report export-eu export-us export-asia export-plan daily-report close-ledger))
{
	($status, $msg) = ended('C', $job);
	is($status, 'failed', "Redis down: $job failed");
	like($msg, qr/^ERROR:  could not connect to Redis at 127\.0\.0\.1:\d+ for (lock|latch) "/,
		"Redis down: $job says so");
}

is(sql($C, 'SELECT count(*) FROM cron_skips'), '0',
	'Redis down: the skip recipe wrote no skip row (it failed, not skipped)');

$A->stop;
$B->stop;
$C->stop;
$redis->stop;
done_testing();
