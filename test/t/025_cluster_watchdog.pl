# Copyright (c) 2026, rlock developers
#
# The watchdog on a Redis Cluster of 3 masters and 3 replicas
# (cluster-node-timeout 2 s, cluster-require-full-coverage no, so that the
# other masters keep serving while one is down), one PostgreSQL server,
# rlock.watchdog_timeout = 6s (renewals every 2 s).
#
#   a) One session holds 10 000 locks without a lease, spread over the three
#      masters (rlock_locks.node).  Over several renewal cycles, each cycle
#      is one round trip, all masters asked at once
#      (rlock_stats.renewal_round_trips == renewal_cycles), and renews all
#      10 000 (renewals == 10 000 x cycles); every master ran renewal
#      scripts in each cycle.
#   b) A master is stopped (SIGSTOP; its replica told not to fail over, so
#      that its locks can only be lost): the locks of the other masters are
#      still renewed (their PTTL goes up there); the stopped master's locks,
#      and a transaction's xact lock there, are reported lost for want of
#      renewal (fail closed: rlock_locks state 'lost', a LOG line each),
#      exactly those, before their lease could have run out in Redis; the
#      transaction cannot COMMIT.  Once they are given up, cycles are whole
#      again (one round trip each) while that master is still stopped.  It
#      is then resumed (SIGCONT) and the cluster settles.
#   c) That master is then killed (still no failover): a call in its slots
#      fails with an ERROR naming it, within rlock.command_timeout, and the
#      session goes on with the other masters (the acquisition, never sent,
#      is not left to reconcile on the dead master).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use RlockTest;

my $n_locks = 10000;
my $c = RlockTest::Cluster->new(masters => 3, replicas => 1,
	node_timeout_ms => 2000, require_full_coverage => 'no');
my $node = RlockTest::new_node('cwd', undef,
	url => $c->url,
	watchdog_timeout => '6s',
	extra_conf => "rlock.max_locks = 20000\n");
$node->safe_psql('postgres', 'CREATE TABLE guarded (v int)');

# a stopped master must go on again before the cluster is stopped at END
my $stopped_pid;
END { kill 'CONT', $stopped_pid if $stopped_pid; }

my ($out, $err, $state, $t0);

sub q1
{
	my ($sess, $sql) = @_;
	my ($o, $e) = RlockTest::query_err($sess, $sql);
	note "$sql: $e" if $e ne '';
	return $o;
}

# The watchdog's counters, read right after a renewal cycle was counted
# (the next one is 2 s away; each cycle adds its round trips, renewals and
# script calls before it counts itself): a hash of them, or undef if no
# cycle was counted within $timeout_s.
my @cols = qw(renewal_cycles renewal_round_trips renewals renewal_batches);
my $mon = $node->background_psql('postgres', on_error_stop => 0);

sub read_stats
{
	my %s;
	@s{@cols} = split /\|/, q1($mon, 'SELECT ' . join(', ', @cols) . ' FROM rlock_stats');
	return \%s;
}

sub after_next_cycle
{
	my ($timeout_s) = @_;
	my $c0 = read_stats()->{renewal_cycles};
	my $s;
	poll(sub { $s = read_stats(); $s->{renewal_cycles} > $c0 }, $timeout_s, 0.05)
	  or return undef;
	return $s;
}

# Call $cond every $every_s seconds until it returns true or $timeout_s
# passes; returns whether it did.
sub poll
{
	my ($cond, $timeout_s, $every_s) = @_;
	my $deadline = time() + $timeout_s;
	while (1)
	{
		return 1 if $cond->();
		return 0 if time() >= $deadline;
		Time::HiRes::sleep($every_s);
	}
}

# ---- a) 10 000 locks over three masters, one round trip per cycle ----

my @masters = $c->masters;
my $s = $node->background_psql('postgres', on_error_stop => 0);
$t0 = time();
is(q1($s, "SELECT count(rlock_acquire('wd' || g)) FROM generate_series(1, $n_locks) g"),
	$n_locks, "one session takes $n_locks locks without a lease");
note sprintf('took them in %.2f s', time() - $t0);
my %on;    # node address => number of locks there
foreach my $row (split /\n/,
	q1($mon, "SELECT node, count(*) FROM rlock_locks WHERE state = 'held' GROUP BY node"))
{
	my ($n, $k) = split /\|/, $row;
	$on{$n} = $k;
}
note 'locks per master: ' . join(', ', map { "$_ $on{$_}" } sort keys %on);
is(join(',', sort keys %on), join(',', sort map { $_->where } @masters),
	'rlock_locks.node: they are on all three masters (and nowhere else)');
is(scalar(grep { $on{$_} > $n_locks / 6 } keys %on), 3,
	'each master has a good share of them');

my %evalsha0 = map { $_->port => RlockTest::command_calls($_, 'evalsha') } @masters;
my $first = after_next_cycle(30);
ok($first, 'the watchdog counts renewal cycles');
my $last = $first;
for (1 .. 3)
{
	$last = after_next_cycle(30) // last;
}
my %d = map { $_ => $last->{$_} - $first->{$_} } @cols;
note sprintf('over %d renewal cycles: %d round trips, %d renewals, %d script calls (%.0f a cycle)',
	$d{renewal_cycles}, $d{renewal_round_trips}, $d{renewals}, $d{renewal_batches},
	$d{renewal_batches} / ($d{renewal_cycles} || 1));
cmp_ok($d{renewal_cycles}, '>=', 3, 'several cycles ran');
is($d{renewal_round_trips}, $d{renewal_cycles},
	'one round trip per cycle, the three masters asked at once (renewal_round_trips == renewal_cycles)');
is($d{renewals}, $n_locks * $d{renewal_cycles},
	"each cycle renewed all $n_locks locks (renewals == $n_locks x cycles)");
my @calls = map { RlockTest::command_calls($_, 'evalsha') - $evalsha0{ $_->port } } @masters;
note 'script calls each master ran meanwhile: ' . join(', ', @calls);
is(scalar(grep { $_ >= $d{renewal_cycles} } @calls), 3,
	'every master ran renewal scripts in every cycle');
is(q1($mon, "SELECT count(*) FROM rlock_locks WHERE state = 'held'"), $n_locks,
	'all are still held, after more than twice their lease');

# ---- b) one master stopped: the others renewed, its locks fail closed ----

my $victim = $masters[2];
my ($replica) = $c->replicas_of($victim);
my ($k_victim) = @{ $c->names_on_each_master(1, 'x')->{ $victim->port } };
my @others = grep { $_->port != $victim->port } @masters;
# a lock of each other master, to watch its PTTL
my @watch;
foreach my $m (@others)
{
	my ($name) = grep { $c->master_of($_)->port == $m->port } map { "wd$_" } 1 .. 50;
	push @watch, [ $m, $name ];
}
# the stopped master's replica will not fail over: its locks can only be lost
scalar($replica->cli('CONFIG', 'SET', 'cluster-replica-no-failover', 'yes')) eq 'OK'
  or die 'CONFIG SET cluster-replica-no-failover yes failed at ' . $replica->where;

my $x = $node->background_psql('postgres', on_error_stop => 0);
($out, $err) = RlockTest::run_sql($x,
	"BEGIN; SELECT rlock_xact_acquire('$k_victim'); INSERT INTO guarded VALUES (1)");
is($err, '', "a transaction holds \"$k_victim\" on that master as an xact lock, and has written");
my %victim_names = map { $_ => 1 } split /\n/,
  q1($mon, "SELECT name FROM rlock_locks WHERE node = '" . $victim->where . "'");
my $n_victim = keys %victim_names;
note "$n_victim locks on " . $victim->where . ' (the xact lock included)';

# Stop it right after a renewal cycle: its locks would expire in Redis (if
# it ran) by their PTTL read now, 6 s after that renewal; the watchdog
# must give them up before that.
my ($k_pttl) = grep { $victim_names{$_} && $_ ne $k_victim } sort keys %victim_names;
my $log_offset = -s $node->logfile;
after_next_cycle(30);
my $renewals0 = read_stats()->{renewals};
my ($conns0) = (scalar($victim->cli('INFO', 'stats')) =~ /^total_connections_received:(\d+)/m);
my $t_pttl = time();
my $pttl = $victim->cli('PTTL', $k_pttl);
$stopped_pid = $victim->pid;
kill 'STOP', $stopped_pid;
my $stopped_at = time();
my $expiry = $t_pttl + $pttl / 1000;
note sprintf('master %s stopped (SIGSTOP to pid %d) %.3f s after a renewal cycle; PTTL of "%s" was %d ms',
	$victim->where, $stopped_pid, $stopped_at - $t_pttl, $k_pttl, $pttl);

my ($renewed, $low) = RlockTest::all_renewed_on(\@watch, 30);
ok($renewed, 'the other masters\' locks are still renewed there (PTTL went up from '
	  . join(', ', map { "$_ $low->{$_} ms" } sort keys %$low) . ')');

my $lost_ok = poll(
	sub {
		q1($mon, "SELECT count(*) FROM rlock_locks WHERE state = 'lost'") >= $n_victim;
	},
	30, 0.1);
ok($lost_ok, "the stopped master's $n_victim locks are reported lost");
my @lost = split /\n/, q1($mon, "SELECT name FROM rlock_locks WHERE state = 'lost'");
is(scalar(grep { !$victim_names{$_} } @lost), 0, 'none of another master');
is(q1($mon, "SELECT count(*) FROM rlock_locks WHERE state = 'held'"),
	$n_locks + 1 - $n_victim, 'the others are all still held');
my $log = slurp_file($node->logfile, $log_offset);
my @lost_at = $log =~
  /^(\S+ \S+ \S+) \[\d+\] LOG:  rlock watchdog: lock "[^"]+" held by \S+ \(pid \d+\) was lost\n[^\n]*DETAIL:  Its lease could not be renewed for too long/mg;
is(scalar(@lost_at), $n_victim,
	'a LOG line for each: its lease could not be renewed for too long');
# the last of those LOG lines, as an epoch (the server reads its own format)
my $last_lost = @lost_at
  ? q1($mon, "SELECT extract(epoch FROM '" . (sort @lost_at)[-1] . "'::timestamptz)")
  : 9e9;
note sprintf('the last was reported lost %.3f s after the stop, %.3f s before it could expire in Redis',
	$last_lost - $stopped_at, $expiry - $last_lost);
cmp_ok($last_lost, '<', $expiry,
	'all of them before their lease could run out in Redis (fail closed)');
cmp_ok(read_stats()->{renewals} - $renewals0, '>=', 2 * ($n_locks + 1 - $n_victim),
	'the watchdog renewed the others at least twice meanwhile');

$t0 = time();
($out, $err) = RlockTest::query_err($x, 'COMMIT');
like($err, qr/ERROR:  .*lock "$k_victim"/, 'the transaction holding the lost xact lock cannot COMMIT');
note sprintf('COMMIT: %.3f s: %s', time() - $t0, $err);
is(q1($mon, 'SELECT count(*) FROM guarded'), '0', 'its write was rolled back');

my $whole0 = after_next_cycle(30);
my $whole1 = after_next_cycle(30);
ok($whole0 && $whole1, 'with the stopped master\'s locks given up, cycles are whole again');
if ($whole0 && $whole1)
{
	my %w = map { $_ => $whole1->{$_} - $whole0->{$_} } @cols;
	is("$w{renewal_round_trips}/$w{renewals}", '1/' . ($n_locks - $n_victim + 1),
		'one round trip, renewing every lock of the other masters');
}

kill 'CONT', $stopped_pid;
undef $stopped_pid;
note 'master ' . $victim->where . ' resumed (SIGCONT)';
my ($conns1) = (scalar($victim->cli('INFO', 'stats')) =~ /^total_connections_received:(\d+)/m);
note sprintf('connections opened to it while it was stopped (the TCP backlog): %d',
	$conns1 - $conns0 - 2);
RlockTest::stop_file('the cluster did not settle after SIGCONT') unless $c->wait_settled(60);
after_next_cycle(30);    # a renewal cycle with that master answering again
is(q1($mon, "SELECT count(*) FROM rlock_locks WHERE state = 'lost'"), $n_victim - 1,
	'the lost locks stay lost once their master is back (the xact one ended with its transaction)');
$out = q1($s, 'SELECT rlock_release_all()');
note "rlock_release_all(): $out";
is(q1($mon, 'SELECT count(*) FROM rlock_locks'), '0', 'the session released everything');
is(join(',', map { scalar $_->[0]->cli('EXISTS', $_->[1]) } @watch), '0,0',
	'nothing is left on the other masters');

# ---- c) a master down for good: calls in its slots fail in time ----

# The same master killed (its replica still will not fail over): a call in
# its slots retries where the slot map says until rlock.command_timeout
# (2 s), then fails naming the node; the session goes on with the others.
my $dead = $victim->where;
$c->kill_master($victim);
$t0 = time();
($out, $err, $state) = RlockTest::run_sql($x, "SELECT rlock_try_acquire('$k_victim', '10s')");
my $fail_s = time() - $t0;
note sprintf('a call in the dead master\'s slots: %.3f s, SQLSTATE %s: %s', $fail_s, $state, $err);
like($err, qr/ERROR:  [^\n]*\Q$dead\E/,
	'the lock the session had there (left uncertain by its failed COMMIT) is refused, naming the dead master');
cmp_ok($fail_s, '<', 2 + 0.5, 'within rlock.command_timeout (2 s; 0.5 s margin)');
$t0 = time();
($out, $err, $state) = RlockTest::run_sql($x, "SELECT rlock_try_acquire('{$k_victim}:fresh', '10s')");
$fail_s = time() - $t0;
note sprintf('a new name in the dead master\'s slots: %.3f s, SQLSTATE %s: %s', $fail_s, $state, $err);
like($err, qr/ERROR:  could not connect to Redis at \Q$dead\E/,
	'a new name in its slots fails with an ERROR naming the dead master');
cmp_ok($fail_s, '<', 2 + 0.5, 'within rlock.command_timeout (2 s; 0.5 s margin)');
$t0 = time();
($out, $err) = RlockTest::run_sql($x,
	"SELECT rlock_try_acquire('$watch[0][1]', '10s'), rlock_release('$watch[0][1]')");
note sprintf('then a call for "%s" on %s: %.3f s: %s %s',
	$watch[0][1], $watch[0][0]->where, time() - $t0, $out, $err);
is($out, 't|t', 'the session goes on with the other masters');
unlike($err, qr/ERROR/, '... without an error');
is(join(',', sort keys %{ { map { $_ => 1 } $err =~ /WARNING:  [^\n]*lock "([^"]+)"/g } }),
	$err eq '' ? '' : $k_victim,
	'... warning at most about the lock left uncertain on the dead master');

$_->quit for $s, $x, $mon;
done_testing();
