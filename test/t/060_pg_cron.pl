# Copyright (c) 2026, rlock developers
#
# Lock losses under a real pg_cron (Debian's postgresql-15-cron), in the
# forms the README's "Recipes for pg_cron" mention beside its recipes
# (test/t/074_recipes.pl runs the recipes themselves, from the README):
# cron.job_run_details says what happened (SPEC 6 "A loss the caller can
# act on", SPEC 12 "Scheduled jobs"):
#   - a job whose lock is lost mid-run and that checks it with
#     rlock_assert_held before it ends: failed, the lock named in
#     return_message, its writes rolled back (a fixed lease that ran out,
#     and a key deleted from Redis);
#   - the same with a transaction lock: COMMIT refused, the lock named;
#   - a job relying on rlock.cancel_on_lost: failed, return_message naming
#     the lock and the cause (not "canceling statement due to user
#     request"), its writes rolled back;
#   - the skip-if-busy recipe: "0 rows" (succeeded) while another server
#     holds the lock, "1 row" and its work done when it is free.
# Two servers share the Redis, one with rlock.cancel_on_lost: every job is
# scheduled at once, so they all run at the same minute (pg_cron 1.4 has
# no schedule finer than a minute); each job waits for what the test
# does (the lock gone from Redis), not for time to pass.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use RlockTest;

my $pgconfig = $ENV{PG_CONFIG} // 'pg_config';
my $pkglibdir = `$pgconfig --pkglibdir`;
chomp $pkglibdir;
plan skip_all => "pg_cron is not installed in $pkglibdir"
  unless -f "$pkglibdir/pg_cron.so";

my $redis = RlockTest::Redis->new;

# a node with rlock and pg_cron (libpq mode, through the node's socket)
sub cron_node
{
	my ($name, $extra) = @_;
	my $node = RlockTest::new_node($name, $redis, extra_conf => $extra);
	$node->append_conf('postgresql.conf',
		"shared_preload_libraries = 'rlock,pg_cron'\n"
		  . "cron.database_name = 'postgres'\n"
		  . "cron.host = '" . $node->host . "'\n");
	$node->restart;
	$node->safe_psql('postgres', 'CREATE EXTENSION pg_cron');
	$node->safe_psql('postgres', 'CREATE TABLE job_out (job text)');
	# the skip-if-busy recipe's job
	$node->safe_psql('postgres', q{
		CREATE FUNCTION nightly_report(label text) RETURNS void LANGUAGE sql
		AS $$ INSERT INTO job_out VALUES (label) $$});
	return $node;
}

my $off = cron_node('cron_off', '');
my $on = cron_node('cron_on', "rlock.cancel_on_lost = on\n");

# Another server holds the lock the skip-if-busy job wants.
my $holder = $on->background_psql('postgres', on_error_stop => 0);
$holder->query_safe("SELECT rlock_acquire('report busy')");

# The jobs.  "wait_gone" waits (at most 2 min) until Redis no longer has
# the lock: the loss the test causes, or the fixed lease running out.
my $wait_gone = q{
	DO $w$ BEGIN
	  FOR i IN 1 .. 1200 LOOP
	    EXIT WHEN NOT rlock_is_locked('%s');
	    PERFORM pg_sleep(0.1);
	  END LOOP;
	END $w$};
my %jobs = (
	# fixed lease, ran out mid-run; checked at the end
	assert_lease => [ $off,
		"SELECT rlock_acquire('job lease', '3s'); "
		  . "INSERT INTO job_out VALUES ('assert_lease'); "
		  . sprintf($wait_gone, 'job lease') . '; '
		  . "SELECT rlock_assert_held('job lease')" ],
	# renewed by the watchdog, deleted from Redis by the test mid-run
	assert_gone => [ $off,
		"SELECT rlock_acquire('job gone'); "
		  . "INSERT INTO job_out VALUES ('assert_gone'); "
		  . sprintf($wait_gone, 'job gone') . '; '
		  . "SELECT rlock_assert_held('job gone')" ],
	# a transaction lock whose fixed lease ran out: COMMIT refused
	xact_lease => [ $off,
		"SELECT rlock_xact_acquire('job xact', '3s'); "
		  . "INSERT INTO job_out VALUES ('xact_lease'); "
		  . sprintf($wait_gone, 'job xact') ],
	# rlock.cancel_on_lost stops the job once its fixed lease ran out
	cancel => [ $on,
		"SELECT rlock_acquire('job cancel', '3s'); "
		  . "INSERT INTO job_out VALUES ('cancel'); "
		  . 'SELECT pg_sleep(600)' ],
	# skip if busy: another server holds the lock
	skip_busy => [ $off,
		"SELECT nightly_report('busy') WHERE rlock_xact_try_acquire('report busy')" ],
	# the same recipe on a free lock runs
	skip_free => [ $off,
		"SELECT nightly_report('free') WHERE rlock_xact_try_acquire('report free')" ],
);

my %jobid;
foreach my $job (sort keys %jobs)
{
	my ($node, $command) = @{ $jobs{$job} };
	my $cmd = $command;
	$cmd =~ s/'/''/g;
	# (pg_cron before 1.4, bullseye's, has no schedule_in_database: its jobs
	# run in cron.database_name, postgres here too)
	my $in_db = $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_proc WHERE proname = 'schedule_in_database'"
		  . " AND pronamespace = 'cron'::regnamespace");
	$jobid{$job} = $node->safe_psql('postgres',
		$in_db
		? "SELECT cron.schedule_in_database('$job', '* * * * *', '$cmd', 'postgres')"
		: "SELECT cron.schedule('$job', '* * * * *', '$cmd')");
}
note 'jobs scheduled; pg_cron starts them at the next minute';

# a job's first run: (status, return_message) once it ended
sub run_of
{
	my ($job) = @_;
	my $node = $jobs{$job}[0];
	return split /\|/, $node->safe_psql('postgres',
		"SELECT status, return_message FROM cron.job_run_details "
		  . "WHERE jobid = $jobid{$job} ORDER BY runid LIMIT 1"), 2;
}

sub run_started
{
	my ($job) = @_;
	my $node = $jobs{$job}[0];
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM cron.job_run_details WHERE jobid = $jobid{$job}") > 0;
}

# (unscheduling a job while it runs would cancel it: pg_cron does)
ok( RlockTest::wait_until(sub {
		foreach my $job (keys %jobs)
		{
			return 0 unless run_started($job);
		}
		return 1;
	}, 180),
	'pg_cron started every job');

# the test's loss: 'job gone' deleted from Redis while its job runs
ok(RlockTest::wait_until(sub { $redis->cli('EXISTS', 'job gone') eq '1' }, 60),
	'the watchdog-renewed job holds its lock');
$redis->cli('DEL', 'job gone');

# one run each: a job is unscheduled once its first run ended
my %unscheduled;
sub ended
{
	my ($job) = @_;
	my ($status) = run_of($job);
	return 0
	  unless defined $status && ($status eq 'succeeded' || $status eq 'failed');
	$jobs{$job}[0]->safe_psql('postgres', "SELECT cron.unschedule($jobid{$job})")
	  unless $unscheduled{$job}++;
	return 1;
}
ok( RlockTest::wait_until(sub {
		my $all = 1;
		foreach my $job (keys %jobs)
		{
			$all = 0 unless ended($job);
		}
		return $all;
	}, 240),
	'every job ended');
foreach my $job (sort keys %jobs)
{
	my ($status, $msg) = run_of($job);
	note "$job: " . ($status // 'none') . ': ' . ($msg // '');
}

my ($status, $msg);
($status, $msg) = run_of('assert_lease');
is($status, 'failed', 'a job whose fixed lease ran out mid-run fails (rlock_assert_held)');
like($msg, qr/rlock lock "job lease" held by this session was lost/,
	'return_message names the lock');
($status, $msg) = run_of('assert_gone');
is($status, 'failed', 'a job whose lock was deleted from Redis mid-run fails');
like($msg, qr/rlock lock "job gone" (held by this session was lost|is not held by this session)/,
	'return_message names the lock');
($status, $msg) = run_of('cancel');
is($status, 'failed', 'a job relying on rlock.cancel_on_lost fails');
like($msg, qr/canceling statement: rlock lock "job cancel" was lost \(lease expired\)/,
	'return_message names the lock and the cause');
unlike($msg, qr/due to user request/, 'not "due to user request"');
($status, $msg) = run_of('xact_lease');
is($status, 'failed', 'a job whose transaction lock ran out mid-run fails at COMMIT');
like($msg, qr/cannot commit: lock "job xact" held by this transaction was lost/,
	'return_message names the lock');
is( $off->safe_psql('postgres',
		"SELECT count(*) FROM job_out WHERE job LIKE 'assert%' OR job LIKE 'xact%'"),
	'0', 'the failed jobs\' writes were rolled back');
is($on->safe_psql('postgres', "SELECT count(*) FROM job_out WHERE job = 'cancel'"),
	'0', 'the cancelled job\'s too');

($status, $msg) = run_of('skip_busy');
is($status, 'succeeded', 'skip-if-busy while another server holds the lock: succeeded');
is($msg, '0 rows', 'return_message "0 rows": it skipped');
($status, $msg) = run_of('skip_free');
is($status, 'succeeded', 'skip-if-busy on a free lock: succeeded');
is($msg, '1 row', 'return_message "1 row": it ran');
is($off->safe_psql('postgres', "SELECT count(*) FROM job_out WHERE job = 'busy'"),
	'0', 'the run that skipped wrote nothing');
cmp_ok($off->safe_psql('postgres', "SELECT count(*) FROM job_out WHERE job = 'free'"),
	'>=', 1, 'the run that got the lock wrote its report');
ok( RlockTest::wait_until(sub {
		$off->safe_psql('postgres', 'SELECT count(*) FROM rlock_locks') eq '0' }, 60),
	'and the job sessions hold nothing once they ended');

$holder->quit;
$off->stop;
$on->stop;
$redis->stop;
done_testing();
