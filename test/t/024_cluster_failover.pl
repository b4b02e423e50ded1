# Copyright (c) 2026, rlock developers
#
# Redis Cluster failover and resharding while locks are held: a cluster of 3
# masters and 3 replicas (cluster-node-timeout 2 s) on loopback, two
# PostgreSQL servers with two databases each, rlock.replica_acks = 1 (the
# default: every acquisition waits for its master's replica's WAIT ack).
#
#   a) A master is killed (SIGKILL) while sessions of both servers hold
#      locks in its slots and in the other masters' slots, and a session of
#      each server waits for a lock the other server holds in its slots.
#      Its replica takes over: a new name of its slots can be locked again
#      (the gap from the kill to the first success of a probe trying every
#      10 ms is noted, with the failover time), the held locks are still
#      held on the new master and renewed there (their PTTL goes up), and
#      the waiters get their locks when the holders release them.
#   b) Locks that did not survive are reported lost, never assumed held:
#      after the failover the keys of two held locks are deleted on the new
#      master (standing for writes the replica never got); the watchdog
#      reports them lost (rlock_locks state 'lost', a LOG line saying Redis
#      no longer had them), the transaction holding one of them as an xact
#      lock cannot COMMIT (its write rolls back), and the release of the
#      other returns false with a WARNING.
#   c) Exclusion: four sessions (two servers x two databases) loop a
#      transaction-level lock around a critical section recorded in a
#      table while the master of the lock's slot is killed, and then while
#      that slot is migrated to another master (ASK during the migration,
#      MOVED after); no two committed sections overlap.  How many sections
#      committed in each phase, and the errors the loops met, are noted.
#   d) A slot migrating to a master that has never run rlock's scripts (a
#      master just added; SCRIPT FLUSH stands for it): a new name of that
#      slot can be locked through ASK (rlock sends the script again, with
#      ASKING again), and once the slot has moved (MOVED).
#
# Why these are deterministic: the held locks were acknowledged by the
# replica before the kill (WAIT), so they are on the new master; a key
# deleted by hand is gone whatever the timing; the watchdog lease (20 s,
# renewed every 6.7 s) is lost for want of renewal no earlier than 9.3 s
# after the kill, later than the failover (about 3 to 4 s) and the
# watchdog's next attempt on the new master.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use RlockTest;

my $c = RlockTest::Cluster->new(masters => 3, replicas => 1,
	node_timeout_ms => 2000);

my %conf = (
	url => $c->url,
	watchdog_timeout => '20s',
	dbs => [ 'postgres', 'db2' ]);
my $node_a = RlockTest::new_node('cfo_a', undef, %conf);
my $node_b = RlockTest::new_node('cfo_b', undef, %conf);
foreach my $n ($node_a, $node_b)
{
	foreach my $db ('postgres', 'db2')
	{
		$n->safe_psql($db, q{
CREATE TABLE guarded (v int);
CREATE TABLE excl_log (sess text, t_start timestamptz, t_end timestamptz);
CREATE TABLE excl_stop (x int);
-- Try to take a lock every 10 ms until it works; returns the epoch of the
-- first success, the errors met before it, the last one and when the first
-- one ended.
CREATE FUNCTION probe_acquire(lockname text, timeout interval,
	OUT first_ok float8, OUT errors int, OUT last_error text, OUT first_error float8)
LANGUAGE plpgsql AS $$
DECLARE
	deadline timestamptz := clock_timestamp() + timeout;
BEGIN
	errors := 0;
	LOOP
		BEGIN
			IF rlock_try_acquire(lockname, '10s') THEN
				first_ok := extract(epoch FROM clock_timestamp());
				PERFORM rlock_release(lockname);
				RETURN;
			END IF;
		EXCEPTION WHEN OTHERS THEN
			IF errors = 0 THEN
				first_error := extract(epoch FROM clock_timestamp());
			END IF;
			errors := errors + 1;
			last_error := SQLSTATE || ' ' || SQLERRM;
		END;
		EXIT WHEN clock_timestamp() > deadline;
		PERFORM pg_sleep(0.01);
	END LOOP;
END $$;
});
	}
}

my ($out, $err, $state, $t0, $elapsed);

# stdout of $sql in a new session of $n (database postgres unless $db): a
# new session reads the slot map afresh.  An error is noted, not fatal
# (the assertion that uses the value fails).
sub sql
{
	my ($n, $sql, $db) = @_;
	my ($rc, $o, $e) = $n->psql($db // 'postgres', $sql);
	note $n->name . ": $sql: $e" if $e ne '';
	return $o;
}

sub stat_of
{
	my ($n, $col) = @_;
	my $v = sql($n, "SELECT $col FROM rlock_stats");
	return $v eq '' ? -1 : $v;
}

# Run $sql in a background session without waiting for it.
sub start_bg
{
	my ($sess, $sql) = @_;
	$sess->{stdout} = $sess->{stderr} = '';
	$sess->query_until(qr/started\n/,
		"\\echo started\n$sql;\n\\echo sqlstate=:SQLSTATE\n");
	return;
}

sub bg_done
{
	my ($sess) = @_;
	$sess->{run}->pump_nb;
	return $sess->{stdout} =~ /sqlstate=\w+/;
}

# (stdout, stderr, SQLSTATE) of what start_bg started, once bg_done.
sub bg_result
{
	my ($sess) = @_;
	my ($st) = $sess->{stdout} =~ /sqlstate=(\w+)/;
	my $o = $sess->{stdout};
	$o =~ s/\n?sqlstate=\w+\n?//;
	$o =~ s/^\s+|\s+$//g;
	my $e = $sess->{stderr};
	$sess->{stdout} = $sess->{stderr} = '';
	return ($o, $e, $st);
}

# Wait until the PTTL of every [node, key] of @$pairs has gone up on that
# node (a renewal there: without one it only goes down), watching them all
# at once (one renewal cycle renews them all); returns whether they all
# did, and the lowest PTTL seen of each before.
sub all_renewed_on
{
	my ($pairs, $timeout_s) = @_;
	my (%low, %up);
	my $ok = RlockTest::wait_until(
		sub {
			foreach my $p (@$pairs)
			{
				my ($r, $key) = @$p;
				next if $up{$key};
				my $pttl = $r->cli('PTTL', $key) // '';
				next unless $pttl =~ /^\d+$/;
				if (defined $low{$key} && $pttl > $low{$key} + 500)
				{
					$up{$key} = 1;
					next;
				}
				$low{$key} = $pttl if !defined $low{$key} || $pttl < $low{$key};
			}
			return keys(%up) == @$pairs;
		},
		$timeout_s);
	return ($ok, \%low);
}

# HGET through a connection that sent READONLY: what a cluster replica has.
sub replica_hget
{
	my ($r, $key, $field) = @_;
	my ($o, $e) = ('', '');
	IPC::Run::run(
		[ RlockTest::Redis::cli_program(), '-h', '127.0.0.1', '-p', $r->port ],
		'<', \"READONLY\nHGET $key $field\n", '>', \$o, '2>', \$e);
	my @lines = split /\n/, $o;
	return $lines[1] // "($o$e)";
}

sub wait_calls
{
	my ($r) = @_;
	my ($n) = ($r->cli('INFO', 'commandstats') // '') =~ /^cmdstat_wait:calls=(\d+)/m;
	return $n // 0;
}

# Whether the server log of $n, from byte $offset, matches $re.
sub log_has
{
	my ($n, $offset, $re) = @_;
	return slurp_file($n->logfile, $offset) =~ $re;
}

# ---- a) a master killed while locks are held and waited for ----

my @masters = $c->masters;
my $victim = $masters[0];
my ($heir) = $c->replicas_of($victim);
my $names = $c->names_on_each_master(6, 'k');
# in the victim's slots: held by A, held by B, the xact lock deleted in b),
# the session lock deleted in b), the two probes' names
my ($v_a, $v_b, $v_x, $v_s, $v_pa, $v_pb) = @{ $names->{ $victim->port } };
my $o_a = $names->{ $masters[1]->port }[0];
my $o_b = $names->{ $masters[2]->port }[0];
note sprintf('victim %s (replica %s); names in its slots: %s',
	$victim->where, $heir->where, join(' ', @{ $names->{ $victim->port } }));

$victim->cli('CONFIG', 'RESETSTAT');
my $h_a = $node_a->background_psql('postgres', on_error_stop => 0);
my $h_b = $node_b->background_psql('postgres', on_error_stop => 0);
my $x_a = $node_a->background_psql('postgres', on_error_stop => 0);
my $s_b = $node_b->background_psql('postgres', on_error_stop => 0);
my $w_a = $node_a->background_psql('db2', on_error_stop => 0);
my $w_b = $node_b->background_psql('db2', on_error_stop => 0);
my $p_a = $node_a->background_psql('postgres', on_error_stop => 0);
my $p_b = $node_b->background_psql('postgres', on_error_stop => 0);
my %holder = map { $_->[0] => RlockTest::holder_of($_->[1]) }
  ([ a => $h_a ], [ b => $h_b ], [ x => $x_a ], [ s => $s_b ]);

($out, $err) = RlockTest::run_sql($h_a, "SELECT rlock_acquire('$v_a'), rlock_acquire('$o_a')");
is($err, '', "server A holds \"$v_a\" (victim's slots) and \"$o_a\" (another master's), no lease");
($out, $err) = RlockTest::run_sql($h_b, "SELECT rlock_acquire('$v_b'), rlock_acquire('$o_b')");
is($err, '', "server B holds \"$v_b\" (victim's slots) and \"$o_b\" (the third master's)");
($out, $err) = RlockTest::run_sql($x_a,
	"BEGIN; SELECT rlock_xact_acquire('$v_x'); INSERT INTO guarded VALUES (1)");
is($err, '', "a transaction of server A holds \"$v_x\" as an xact lock and has written a row");
($out, $err) = RlockTest::run_sql($s_b, "SELECT rlock_acquire('$v_s')");
is($err, '', "a session of server B holds \"$v_s\"");
my $waits = wait_calls($victim);
is( ($waits >= 4 ? 'WAIT after each' : "$waits WAIT") . ' '
	  . join(',',
		replica_hget($heir, $v_a, $holder{a}), replica_hget($heir, $v_b, $holder{b}),
		replica_hget($heir, $v_x, $holder{x}), replica_hget($heir, $v_s, $holder{s})),
	'WAIT after each 1,1,1,1',
	'the victim ran WAIT after each of the 4 acquisitions (rlock.replica_acks = 1): its replica has them');

start_bg($w_a, "SELECT rlock_try_acquire('$v_b', wait => '90s')");
start_bg($w_b, "SELECT rlock_try_acquire('$v_a', wait => '90s')");
RlockTest::wait_for_rlock_waiters($node_a, 'db2', 1, "%'$v_b'%");
RlockTest::wait_for_rlock_waiters($node_b, 'db2', 1, "%'$v_a'%");
note 'a session of each server waits for the lock the other server holds';
my %renewals0 = map { $_->name => stat_of($_, 'renewals') } $node_a, $node_b;

my $killed_at = $c->kill_master($victim);
start_bg($p_a, "SELECT * FROM probe_acquire('$v_pa', '60s')");
start_bg($p_b, "SELECT * FROM probe_acquire('$v_pb', '60s')");
my $failover_s = $c->wait_failover($victim, 60);
RlockTest::stop_file('no failover after the master was killed')
  unless defined $failover_s;
my $new = $c->master_of($v_a) // $heir;
note sprintf('master %s killed; the cluster settled with %s (its replica: %s) serving its slots %.3f s later',
	$victim->where, $new->where, $heir->where, $failover_s);

foreach my $p ([ 'A', $p_a ], [ 'B', $p_b ])
{
	my ($srv, $sess) = @$p;
	RlockTest::wait_until(sub { bg_done($sess) }, 70);
	($out, $err, $state) = bg_result($sess);
	my ($ok_at, $errors, $last, $first_err) = split /\|/, $out, 4;
	ok(defined $ok_at && $ok_at ne '',
		"server $srv: a new name of the victim's slots can be locked again, no setting changed")
	  or diag("probe: $out / $err");
	next unless defined $ok_at && $ok_at ne '';
	my $gap = $ok_at - $killed_at;
	note sprintf('server %s: first acquisition in the victim\'s slots %.3f s after the kill '
		  . '(failover settled after %.3f s), %d failed attempts before it (the first ended %s s after the kill), the last: %s',
		$srv, $gap, $failover_s, $errors,
		($first_err // '') eq '' ? '-' : sprintf('%.3f', $first_err - $killed_at), $last // '');
	cmp_ok($gap, '<', $failover_s + 2.0,
		"server $srv: no later than 2 s after the cluster settled (rlock.command_timeout)");
}

is( join(',',
		scalar $new->cli('HGET', $v_a, $holder{a}),
		scalar $new->cli('HGET', $v_b, $holder{b})),
	'1,1', 'the held locks are still held on the new master');
my ($renewed, $low) = all_renewed_on(
	[ [ $new, $v_a ], [ $new, $v_b ], [ $masters[1], $o_a ], [ $masters[2], $o_b ] ], 30);
ok($renewed, 'and renewed there, like those of the other masters (PTTL went up from '
	  . join(', ', map { "$_ $low->{$_} ms" } sort keys %$low) . ')');
is( sql($node_a,
		"SELECT string_agg(name || ' ' || state || ' ' || node, ', ' ORDER BY name) FROM rlock_locks WHERE name IN ('$v_a', '$o_a')"),
	join(', ', sort("$v_a held " . $new->where, "$o_a held " . $masters[1]->where)),
	'server A: rlock_locks shows them held, on the new master and on the other one');
is( sql($node_b, "SELECT state || ' ' || node FROM rlock_locks WHERE name = '$v_b'"),
	'held ' . $new->where, 'server B: the same');
foreach my $n ($node_a, $node_b)
{
	cmp_ok(stat_of($n, 'renewals'), '>', $renewals0{ $n->name },
		$n->name . ': rlock_stats.renewals grew');
}

# ---- b) what the new master does not have is lost, never assumed held ----

my $log_a = -s $node_a->logfile;
my $log_b = -s $node_b->logfile;
is(join(',', scalar $new->cli('DEL', $v_x), scalar $new->cli('DEL', $v_s)), '1,1',
	"\"$v_x\" and \"$v_s\" deleted on the new master (writes its replica never got)");
ok( RlockTest::wait_until(
		sub { sql($node_a, "SELECT state FROM rlock_locks WHERE name = '$v_x'") eq 'lost' }, 30),
	"server A: the watchdog reports the xact lock \"$v_x\" lost");
ok( RlockTest::wait_until(
		sub { sql($node_b, "SELECT state FROM rlock_locks WHERE name = '$v_s'") eq 'lost' }, 30),
	"server B: the watchdog reports the session lock \"$v_s\" lost");
ok( log_has($node_a, $log_a,
		qr/LOG:  rlock watchdog: lock "$v_x" held by \S+ \(pid \d+\) was lost\n[^\n]*DETAIL:  Redis no longer had the lock/),
	'with a LOG line: Redis no longer had it (found missing, not given up for want of renewal)');
ok( log_has($node_b, $log_b,
		qr/LOG:  rlock watchdog: lock "$v_s" held by \S+ \(pid \d+\) was lost\n[^\n]*DETAIL:  Redis no longer had the lock/),
	'server B logs it the same way');
($out, $err) = RlockTest::query_err($x_a, 'COMMIT');
like($err, qr/ERROR:  .*lock "$v_x"/, "the transaction holding \"$v_x\" cannot COMMIT");
note "COMMIT: $err";
is(sql($node_a, 'SELECT count(*) FROM guarded'), '0', 'its write was rolled back');
($out, $err) = RlockTest::query_err($s_b, "SELECT rlock_release('$v_s')");
is($out, 'f', "the release of \"$v_s\" returns false");
like($err, qr/WARNING:  .*"$v_s"/, 'with a WARNING');
is(sql($node_a, "SELECT state FROM rlock_locks WHERE name = '$v_a'"), 'held',
	"\"$v_a\", which the new master has, is still held");

# ---- a) continued: the waiters get the locks when they are released ----

ok(!bg_done($w_a) && !bg_done($w_b), 'the waiters still wait while the locks are held');
foreach my $x ([ $h_a, $w_b, $v_a, 'B' ], [ $h_b, $w_a, $v_b, 'A' ])
{
	my ($h, $w, $k, $srv) = @$x;
	($out, $err) = RlockTest::run_sql($h, "SELECT rlock_release('$k')");
	is("$out/$err", 't/', "the holder releases \"$k\" on the new master, no warning");
	$t0 = time();
	RlockTest::wait_until(sub { bg_done($w) }, 30);
	$elapsed = time() - $t0;
	($out, $err, $state) = bg_result($w);
	is("$out/$state", 't/00000', "the waiter of server $srv gets \"$k\"")
	  or diag("waiter: $out / $err");
	note sprintf('the waiter for "%s" got it %.3f s after the release', $k, $elapsed);
	cmp_ok($elapsed, '<', 1.5,
		'woken by the release message on the new master (it rechecks every 5 s, the lease is 20 s)');
	($out, $err) = RlockTest::run_sql($w, "SELECT rlock_release('$k')");
	is("$out/$err", 't/', 'and releases it');
}
($out, $err) = RlockTest::run_sql($h_a, "SELECT rlock_release('$o_a')");
is("$out/$err", 't/', "\"$o_a\" is released on its master");
($out, $err) = RlockTest::run_sql($h_b, "SELECT rlock_release('$o_b')");
is("$out/$err", 't/', "\"$o_b\" too");
$_->quit for $h_a, $h_b, $x_a, $s_b, $w_a, $w_b, $p_a, $p_b;
$c->revive($victim);

# ---- c) exclusion while a master is killed and the slot migrates ----

# Each iteration: take "excl" for the transaction, note when, write the
# interval in its own database, COMMIT.  Errors roll the transaction back
# and the next iteration begins.  The script is fed as it goes; once there
# is a row in excl_stop, what is left of it does nothing.
my $excl = 'excl';
my $slot = $c->slot_of($excl);
my $iteration = <<"EOS";
SELECT NOT EXISTS (SELECT FROM excl_stop) AS go \\gset
\\if :go
BEGIN;
SELECT rlock_xact_acquire('$excl', '3s');
SELECT clock_timestamp() AS t0 \\gset
SELECT pg_sleep(0.005);
INSERT INTO excl_log VALUES (:'sess', :'t0', clock_timestamp());
COMMIT;
\\endif
EOS
# (PostgreSQL 13's test modules have no installed_command: psql is in PATH)
my $psql = $node_a->can('installed_command') ? $node_a->installed_command('psql') : 'psql';
my @loops;
foreach my $n ($node_a, $node_b)
{
	foreach my $db ('postgres', 'db2')
	{
		my $l = { node => $n, db => $db, in => '', out => '', err => '',
			sess => $n->name . "/$db" };
		$l->{in} = "SET lock_timeout = '20s';\n" . $iteration x 20;
		$l->{h} = IPC::Run::start(
			[ $psql, '-X', '-q', '-A', '-t',
				'-v', 'ON_ERROR_STOP=0', '-v', "sess=$l->{sess}",
				'-d', $n->connstr($db) ],
			'<', \$l->{in}, '>', \$l->{out}, '2>', \$l->{err},
			IPC::Run::timeout(180));
		push @loops, $l;
	}
}

# pump the loops, feeding them, until $cond holds or $timeout_s passes
sub drive_loops
{
	my ($cond, $timeout_s) = @_;
	return RlockTest::wait_until(
		sub {
			foreach my $l (@loops)
			{
				$l->{in} .= $iteration x 20 if length($l->{in}) < 2000;
				$l->{h}->pump_nb;
				$l->{out} = '';    # results of SELECTs: not needed
			}
			return $cond->();
		},
		$timeout_s);
}

# committed sections, all or those begun after epoch $after
sub sections
{
	my ($after) = @_;
	my $cond = defined $after ? "WHERE t_start > to_timestamp($after)" : '';
	my $total = 0;
	foreach my $l (@loops)
	{
		$total += $l->{node}->safe_psql($l->{db}, "SELECT count(*) FROM excl_log $cond");
	}
	return $total;
}

# INFO errorstats of a Redis node: "ERR=count" for each error reply kind
sub errorstats
{
	my ($r) = @_;
	return map { /^errorstat_(\w+):count=(\d+)/ ? "$1=$2" : () }
	  split /\r?\n/, scalar $r->cli('INFO', 'errorstats');
}

sub redirections
{
	return stat_of($node_a, 'redirections') + stat_of($node_b, 'redirections');
}

ok(drive_loops(sub { sections() >= 20 }, 60),
	'four sessions on two servers take turns at "excl"');
my $mx = $c->master_of($slot);
note 'the master of "excl" (slot ' . $slot . ') is ' . $mx->where;

my $kill2_at = $c->kill_master($mx);
# keep the loops going until a new master serves the slot
drive_loops(
	sub {
		my $m = $c->master_of($slot);
		return $m && $m->port != $mx->port;
	},
	60);
my $failover2_s = $c->wait_failover($mx, 60);
RlockTest::stop_file('no failover after the master of "excl" was killed')
  unless defined $failover2_s;
my $settled2 = $kill2_at + $failover2_s;
my $heir2 = $c->master_of($slot);
ok(drive_loops(sub { sections($settled2) >= 20 }, 60),
	'after the failover they take turns through the new master ' . $heir2->where);
$c->revive($mx);

# While the slot is split, Redis answers TRYAGAIN to the release (a script
# of several keys: the lock, its channel, the unlock latch) and to the
# reconcile that follows a failed release: the released lock waits out its
# lease and its holder cannot take it again before the migration ends.  So
# only a few sections, if any, commit meanwhile: the loops are driven for
# up to 20 s (or until 3 have), then the slot is handed over.
my ($target) = grep { $_->port != $heir2->port } $c->masters;
$_->cli('CONFIG', 'RESETSTAT') for $heir2, $target;
my %redir0 = map { $_->name => stat_of($_, 'redirections') } $node_a, $node_b;
my $mig_at = time();
$c->begin_migration($slot, $target);
drive_loops(sub { sections($mig_at) >= 3 }, 20);
my $mig_s = time() - $mig_at;
foreach my $n ($node_a, $node_b)
{
	cmp_ok(stat_of($n, 'redirections'), '>', $redir0{ $n->name },
		$n->name . ': rlock_stats.redirections: its loops were sent to the target (ASK)');
}
note sprintf('slot %d migrating from %s to %s for %.1f s, %d sections committed meanwhile; '
	  . 'Redis errors on the source: %s; on the target: %s',
	$slot, $heir2->where, $target->where, $mig_s, sections($mig_at),
	join(' ', errorstats($heir2)), join(' ', errorstats($target)));
$c->finish_migration($slot);
my $moved_at = time();
ok(drive_loops(sub { sections($moved_at) >= 20 }, 60),
	'after the slot moved (MOVED) they take turns on ' . $target->where);

foreach my $l (@loops)
{
	$l->{node}->safe_psql($l->{db}, 'INSERT INTO excl_stop VALUES (1)');
}
my (@intervals, $errors, %by_sess, %kinds);
foreach my $l (@loops)
{
	# the end of the script (what was not yet written is not needed)
	$l->{in} = "\\q\n";
	ok(eval { $l->{h}->finish; 1 }, "$l->{sess}: the loop ends when told to")
	  or $l->{h}->kill_kill;
	foreach my $row (split /\n/,
		$l->{node}->safe_psql($l->{db},
			'SELECT sess, extract(epoch FROM t_start), extract(epoch FROM t_end) FROM excl_log'))
	{
		my ($sess, $st, $en) = split /\|/, $row;
		push @intervals, [ $st, $en, $sess ];
		$by_sess{$sess}++;
	}
	my @errs = grep { !/current transaction is aborted/ } ($l->{err} =~ /^.*ERROR:.*$/mg);
	$errors += @errs;
	foreach my $e (@errs)
	{
		(my $k = $e) =~ s/^.*ERROR:\s+//;
		$k =~ s/"[^"]*"/"…"/g;
		$k =~ s/\d+/N/g;
		$kinds{$k}++;
	}
}
@intervals = sort { $a->[0] <=> $b->[0] } @intervals;
my @overlaps;
my $prev;
foreach my $i (@intervals)
{
	push @overlaps, sprintf('%s [%.6f, %.6f] and %s [%.6f, %.6f]',
		$prev->[2], @$prev[ 0, 1 ], $i->[2], @$i[ 0, 1 ])
	  if $prev && $i->[0] < $prev->[1];
	$prev = $i if !$prev || $i->[1] > $prev->[1];
}
note sprintf('exclusion: %d critical sections committed (%d across the kill, %d after the failover settled '
	  . '(%.3f s after the kill), %d begun while the slot migrated, %d after it moved), %d errors; '
	  . 'per session: %s',
	scalar(@intervals),
	scalar(grep { $_->[0] < $kill2_at && $_->[1] > $kill2_at } @intervals),
	scalar(grep { $_->[0] > $settled2 && $_->[0] < $mig_at } @intervals),
	$failover2_s,
	scalar(grep { $_->[0] > $mig_at && $_->[0] < $moved_at } @intervals),
	scalar(grep { $_->[0] > $moved_at } @intervals),
	$errors // 0,
	join(', ', map { "$_ $by_sess{$_}" } sort keys %by_sess));
note "errors met by the loops: $kinds{$_} x $_" foreach sort keys %kinds;
is(scalar(@overlaps), 0, 'no two committed critical sections overlap')
  or diag(join("\n", @overlaps[ 0 .. ($#overlaps < 9 ? $#overlaps : 9) ]));
is(scalar(keys %by_sess), 4, 'every session committed sections');

# ---- d) a migration to a master that has never run rlock's scripts ----

# A master just added to the cluster to take slots over has never run
# rlock's scripts; SCRIPT FLUSH makes one of these.  An acquisition in a
# slot migrating to it gets ASK from the source, ASKING + EVALSHA at the
# target answers NOSCRIPT, and the script must then go to the target again,
# with ASKING again.
my ($src_d, $dst_d) = $c->masters;
my $fresh = $c->names_on_each_master(1, 'fresh')->{ $src_d->port }[0];
my $slot_d = $c->slot_of($fresh);
$dst_d->cli('SCRIPT', 'FLUSH');
$dst_d->cli('CONFIG', 'RESETSTAT');
$c->begin_migration($slot_d, $dst_d);
my $sd = $node_a->background_psql('postgres', on_error_stop => 0);
($out, $err) = RlockTest::run_sql($sd, "SELECT rlock_try_acquire('$fresh', '10s')");
note "slot $slot_d migrating to a master without rlock's scripts: \"$out\" $err";
note 'Redis errors on that master: ' . join(' ', errorstats($dst_d));
my $noscript = join(' ', errorstats($dst_d)) =~ /\bNOSCRIPT=\d+/ ? 'NOSCRIPT' : 'no NOSCRIPT';
is("$out/$err/$noscript", 't//NOSCRIPT',
	'a name of a slot migrating to a master without the scripts can be locked '
	  . '(ASK, NOSCRIPT at the target, the script sent again with ASKING)');
$c->finish_migration($slot_d);
RlockTest::run_sql($sd, 'SELECT rlock_release_all()');
$sd->quit;
is(sql($node_a, "SELECT rlock_try_acquire('$fresh', '10s'), rlock_release('$fresh')"), 't|t',
	'once the slot has moved there (MOVED), it can');

done_testing();
