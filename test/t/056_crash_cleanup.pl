# Copyright (c) 2026, rlock developers
#
# A crashed server's locks do not wait for their lease (SPEC.md section 6).
# Two PostgreSQL servers on one Redis, both with the default lease (30 s,
# renewed by the watchdog).  On server A one backend holds an exclusive,
# a read, a fenced lock, a read lock shared with a session of server B, and
# 2 permits of a semaphore whose third permit a Java client (Redisson's
# protocol) has.  Waiters on server B, each with a 20 s budget (less than
# the lease), wait for them.  The backend is killed with SIGKILL (the
# server crash-restarts, with a new instance UUID): A's worker reads the
# holds file the old instance's worker wrote and releases the dead
# instance's holds, so every waiter gets its lock within seconds of the
# restart; the other holders' fields (B's read hold, the Java permit) are
# untouched, and A's log names what it released.  Without the clean-up,
# the waiters time out (lock_timeout 20 s < lease 30 s).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use RlockTest;

my $redis = RlockTest::Redis->new;
my $a = RlockTest::new_node('crash_a', $redis,
	watchdog_timeout => '30s',
	extra_conf => "restart_after_crash = on\n");
# A is named by its cluster_name (crash_a), B by rlock.server_name
my $b = RlockTest::new_node('crash_b', $redis, watchdog_timeout => '30s',
	extra_conf => "rlock.server_name = 'server b'\n");

sub q1
{
	my ($s, $sql) = @_;
	my ($out, $err) = RlockTest::query_err($s, $sql);
	note "$sql: $err" if $err ne '';
	return $out;
}

# the semaphore: 3 permits, one of them out to a Java client (no lease)
is($b->safe_psql('postgres', "SELECT rlock_semaphore_set_permits('cc_sem', 3)"),
	't', 'the semaphore has 3 permits');
my ($java_ids, $answer) =
  RlockTest::Redisson::sem_try_acquire($redis, 'cc_sem', 1, undef);
is($answer, 'OK', 'a Java client takes one permit');

# server B's other holder: a read hold of cc_shared
my $bh = $b->background_psql('postgres', on_error_stop => 0);
q1($bh, "SELECT rlock_read_acquire('cc_shared')");
my $b_holder = RlockTest::holder_of($bh);

# server A's backend: 4 locks and 2 permits, all with the default lease
my $h = $a->background_psql('postgres', on_error_stop => 0);
my $a_pid = q1($h, 'SELECT pg_backend_pid()');
my $a_holder = RlockTest::holder_of($h);
q1($h, "SELECT rlock_acquire('cc_excl')");
q1($h, "SELECT rlock_read_acquire('cc_read')");
q1($h, "SELECT rlock_read_acquire('cc_shared')");
q1($h, "SELECT rlock_fenced_acquire('cc_fenced')");
q1($h, "SELECT rlock_semaphore_acquire('cc_sem', 2)");
is( q1($h, "SELECT count(*) FROM rlock_locks WHERE pid = pg_backend_pid() AND state = 'held'"),
	'5', 'server A\'s backend holds 4 locks and a semaphore\'s permits');
ok($redis->cli('PTTL', 'cc_excl') > 20_000, 'with the default lease (30 s)');

# The worker copies the registry to the holds file (at most a second
# later); a crash before that would leave these to their lease.
my $file = $a->data_dir . '/pg_stat_tmp/rlock_holds';
ok( RlockTest::wait_until(
		sub {
			my $t = -e $file ? slurp_file($file) : '';
			return !grep { index($t, $_) < 0 }
			  qw(cc_excl cc_read cc_shared cc_fenced cc_sem);
		},
		30),
	'server A\'s worker lists the holds in pg_stat_tmp/rlock_holds');

# waiters on server B, each with 20 s (the lease is 30 s)
my %want = (
	cc_excl => "SELECT rlock_acquire('cc_excl', '1 minute')",
	cc_read => "SELECT rlock_write_acquire('cc_read', '1 minute')",
	cc_fenced => "SELECT rlock_fenced_acquire('cc_fenced', '1 minute') > 0",
	cc_sem => "SELECT rlock_semaphore_acquire('cc_sem', 2, '1 minute')");
my %w;
foreach my $name (sort keys %want)
{
	$w{$name} = $b->background_psql('postgres', on_error_stop => 0);
	RlockTest::start_bg($w{$name},
		"SET lock_timeout = '20s'; $want{$name}");
}
RlockTest::wait_for_rlock_waiters($b, 'postgres', 4);
foreach my $name (sort keys %want)
{
	ok(!RlockTest::bg_done($w{$name}), "$name: server B's waiter waits");
}

# SIGKILL: server A crash-restarts
my $offset = -s $a->logfile;
my $t_kill = time();
ok(RlockTest::kill_backend_and_wait_restart($a, $a_pid),
	'server A restarts after the SIGKILL');
my $t_restart = time();
note sprintf('server A accepted connections again %.2f s after the kill',
	$t_restart - $t_kill);

my %took;
foreach my $name (sort keys %want)
{
	RlockTest::wait_until(sub { RlockTest::bg_done($w{$name}) }, 30);
	$took{$name} = time() - $t_restart;
	my ($out, $err, $state) = RlockTest::bg_result($w{$name});
	is($state, '00000', "$name: server B's waiter got it") or diag($err);
	ok($took{$name} < 5,
		sprintf('%s: within 5 s of the restart (%.2f s; %.2f s after the kill)',
			$name, $took{$name}, time() - $t_kill));
}

# the other holders' fields are untouched
my ($a_uuid) = $a_holder =~ /^(.*):/;
is($redis->cli('HEXISTS', 'cc_shared', $b_holder), '1',
	'server B\'s read hold of the shared lock is untouched');
is($redis->cli('HEXISTS', 'cc_shared', $a_holder), '0',
	'server A\'s dead read hold of it is gone');
my $permits = RlockTest::Redisson::sem_permits($redis, 'cc_sem');
ok(exists $permits->{ $java_ids->[0] }, 'the Java client\'s permit is untouched');
is(scalar(grep { index($_, "$a_uuid:") == 0 } keys %$permits), 0,
	'no permit of the dead instance is left');
is(scalar(grep { index($_, "$b_holder") < 0 && $_ ne $java_ids->[0] } keys %$permits),
	2, 'server B\'s waiter has its 2 permits');

# what the log says
my $log = slurp_file($a->logfile, $offset);
like($log, qr/crash clean-up released 5 locks of instance \Q$a_uuid\E/,
	'server A logs the clean-up of the dead instance');
foreach my $name (qw(cc_excl cc_read cc_shared cc_fenced cc_sem))
{
	like($log, qr/Released: .*"\Q$name\E" \(pid $a_pid\)/,
		"the log names $name");
}

# ---- the servers announce themselves ----

my ($a_new_uuid) = $a->safe_psql('postgres', 'SELECT rlock_holder_id()') =~ /^(.*):/;
my ($b_uuid) = $b_holder =~ /^(.*):/;
is($a->safe_psql('postgres', 'SELECT rlock_server_name()'), 'crash_a',
	'server A is named by its cluster_name');
is($b->safe_psql('postgres', 'SELECT rlock_server_name()'), 'server b',
	'server B by rlock.server_name');
my $servers_sql =
  "SELECT uuid || '|' || name || '|' || coalesce(previous_uuid, '-') || '|' || (started <= now()) FROM rlock_servers() ORDER BY name";
my $servers = '';
ok( RlockTest::wait_until(
		sub {
			$servers = RlockTest::sql($b, $servers_sql);
			return index($servers, "$a_new_uuid|") >= 0
			  && index($servers, "$b_uuid|") >= 0;
		},
		30),
	'rlock_servers() lists both servers')
  or diag($servers);
like($servers, qr/^\Q$a_new_uuid\E\|crash_a\|\Q$a_uuid\E\|true$/m,
	'server A, named, with the UUID of the run the crash ended');
like($servers, qr/^\Q$b_uuid\E\|server b\|-\|true$/m,
	'server B, named, without a previous run');
is($redis->cli('PTTL', "{rlock:servers}:$b_uuid") > 0 ? 'expires' : 'stays',
	'expires', 'an announcement expires unless refreshed');
is(q1($bh, "SELECT server FROM rlock_locks WHERE name = 'cc_shared'"),
	'server b', 'rlock_locks names the server');
my ($b_pid) = $b_holder =~ /:(\d+)$/;
my $clients = $redis->cli('CLIENT', 'LIST');
like($clients, qr/ name=rlock:server_b:$b_pid /,
	'CLIENT LIST names server B\'s session rlock:server_b:<pid>');
like($clients, qr/ name=rlock:crash_a:watchdog:\d+ /,
	'and server A\'s worker rlock:crash_a:watchdog:<pid>');

# ---- a lock held long after the file was last written ----
# The file changes when the holds do, not at each renewal: a crash long
# after the last write must still release what was renewed until then.
# (A 4 s lease, so "long after" is seconds.)
RlockTest::set_gucs($a, 'rlock.watchdog_timeout' => '4s');
my $l = $a->background_psql('postgres', on_error_stop => 0);
my $l_pid = q1($l, 'SELECT pg_backend_pid()');
q1($l, "SELECT rlock_acquire('cc_late')");
ok(RlockTest::wait_until(sub { -e $file && slurp_file($file) =~ /cc_late/ }, 30),
	'the file lists cc_late');
my $written = (stat $file)[9];
ok( RlockTest::wait_until(
		sub { time() - $written > 12 && (stat $file)[9] == $written }, 60),
	'12 s pass without a change to the file (the lease, 4 s, and more)');
ok($redis->cli('PTTL', 'cc_late') > 0, 'cc_late is held all the same (renewed)');
my $offset3 = -s $a->logfile;
ok(RlockTest::kill_backend_and_wait_restart($a, $l_pid),
	'server A crash-restarts again');
ok( RlockTest::wait_until(
		sub {
			RlockTest::log_has($a, $offset3,
				qr/crash clean-up released 1 locks.*\n.*"cc_late"/);
		},
		30),
	'its worker releases cc_late (its lease counted from the crash, not the file)');
($a_new_uuid) = $a->safe_psql('postgres', 'SELECT rlock_holder_id()') =~ /^(.*):/;

# a clean shutdown removes the file (the sessions release their holds);
# the next run releases nothing and names the previous run all the same
$a->stop('fast');
ok(!-e $file, 'a clean shutdown removes the holds file');
my $offset2 = -s $a->logfile;
$a->start;
my ($a_uuid3) = $a->safe_psql('postgres', 'SELECT rlock_holder_id()') =~ /^(.*):/;
ok( RlockTest::wait_until(
		sub {
			RlockTest::sql($b, $servers_sql) =~
			  /^\Q$a_uuid3\E\|crash_a\|\Q$a_new_uuid\E\|true$/m;
		},
		30),
	'after a clean restart, server A announces the UUID of its previous run');
ok(!RlockTest::log_has($a, $offset2, qr/crash clean-up|releasing the/),
	'and releases nothing');
$a->stop('fast');

$_->quit foreach values %w;
$bh->quit;
done_testing();
