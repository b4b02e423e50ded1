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
		$n->safe_psql($db, 'CREATE TABLE guarded (v int)');
		RlockTest::create_probe_acquire($n, $db);
	}
}

my ($out, $err, $state, $t0, $elapsed);

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
my $waits = RlockTest::command_calls($victim, 'wait');
is( ($waits >= 4 ? 'WAIT after each' : "$waits WAIT") . ' '
	  . join(',',
		replica_hget($heir, $v_a, $holder{a}), replica_hget($heir, $v_b, $holder{b}),
		replica_hget($heir, $v_x, $holder{x}), replica_hget($heir, $v_s, $holder{s})),
	'WAIT after each 1,1,1,1',
	'the victim ran WAIT after each of the 4 acquisitions (rlock.replica_acks = 1): its replica has them');

RlockTest::start_bg($w_a, "SELECT rlock_try_acquire('$v_b', wait => '90s')");
RlockTest::start_bg($w_b, "SELECT rlock_try_acquire('$v_a', wait => '90s')");
RlockTest::wait_for_rlock_waiters($node_a, 'db2', 1, "%'$v_b'%");
RlockTest::wait_for_rlock_waiters($node_b, 'db2', 1, "%'$v_a'%");
note 'a session of each server waits for the lock the other server holds';
my %renewals0 = map { $_->name => RlockTest::stat_of($_, 'renewals') } $node_a, $node_b;

my $killed_at = $c->kill_master($victim);
RlockTest::start_bg($p_a, "SELECT * FROM probe_acquire('$v_pa', '60s')");
RlockTest::start_bg($p_b, "SELECT * FROM probe_acquire('$v_pb', '60s')");
my $failover_s = $c->wait_failover($victim, 60);
RlockTest::stop_file('no failover after the master was killed')
  unless defined $failover_s;
my $new = $c->master_of($v_a) // $heir;
note sprintf('master %s killed; the cluster settled with %s (its replica: %s) serving its slots %.3f s later',
	$victim->where, $new->where, $heir->where, $failover_s);

foreach my $p ([ 'A', $p_a ], [ 'B', $p_b ])
{
	my ($srv, $sess) = @$p;
	RlockTest::wait_until(sub { RlockTest::bg_done($sess) }, 70);
	($out, $err, $state) = RlockTest::bg_result($sess);
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
my ($renewed, $low) = RlockTest::all_renewed_on(
	[ [ $new, $v_a ], [ $new, $v_b ], [ $masters[1], $o_a ], [ $masters[2], $o_b ] ], 30);
ok($renewed, 'and renewed there, like those of the other masters (PTTL went up from '
	  . join(', ', map { "$_ $low->{$_} ms" } sort keys %$low) . ')');
is( RlockTest::sql($node_a,
		"SELECT string_agg(name || ' ' || state || ' ' || node, ', ' ORDER BY name) FROM rlock_locks WHERE name IN ('$v_a', '$o_a')"),
	join(', ', sort("$v_a held " . $new->where, "$o_a held " . $masters[1]->where)),
	'server A: rlock_locks shows them held, on the new master and on the other one');
is( RlockTest::sql($node_b, "SELECT state || ' ' || node FROM rlock_locks WHERE name = '$v_b'"),
	'held ' . $new->where, 'server B: the same');
foreach my $n ($node_a, $node_b)
{
	cmp_ok(RlockTest::stat_of($n, 'renewals'), '>', $renewals0{ $n->name },
		$n->name . ': rlock_stats.renewals grew');
}

# ---- b) what the new master does not have is lost, never assumed held ----

my $log_a = -s $node_a->logfile;
my $log_b = -s $node_b->logfile;
is(join(',', scalar $new->cli('DEL', $v_x), scalar $new->cli('DEL', $v_s)), '1,1',
	"\"$v_x\" and \"$v_s\" deleted on the new master (writes its replica never got)");
ok( RlockTest::wait_until(
		sub { RlockTest::sql($node_a, "SELECT state FROM rlock_locks WHERE name = '$v_x'") eq 'lost' }, 30),
	"server A: the watchdog reports the xact lock \"$v_x\" lost");
ok( RlockTest::wait_until(
		sub { RlockTest::sql($node_b, "SELECT state FROM rlock_locks WHERE name = '$v_s'") eq 'lost' }, 30),
	"server B: the watchdog reports the session lock \"$v_s\" lost");
ok( RlockTest::log_has($node_a, $log_a,
		qr/LOG:  rlock watchdog: lock "$v_x" held by \S+ \(pid \d+\) was lost\n[^\n]*DETAIL:  Redis no longer had the lock/),
	'with a LOG line: Redis no longer had it (found missing, not given up for want of renewal)');
ok( RlockTest::log_has($node_b, $log_b,
		qr/LOG:  rlock watchdog: lock "$v_s" held by \S+ \(pid \d+\) was lost\n[^\n]*DETAIL:  Redis no longer had the lock/),
	'server B logs it the same way');
($out, $err) = RlockTest::query_err($x_a, 'COMMIT');
like($err, qr/ERROR:  .*lock "$v_x"/, "the transaction holding \"$v_x\" cannot COMMIT");
note "COMMIT: $err";
is(RlockTest::sql($node_a, 'SELECT count(*) FROM guarded'), '0', 'its write was rolled back');
($out, $err) = RlockTest::query_err($s_b, "SELECT rlock_release('$v_s')");
is($out, 'f', "the release of \"$v_s\" returns false");
like($err, qr/WARNING:  .*"$v_s"/, 'with a WARNING');
is(RlockTest::sql($node_a, "SELECT state FROM rlock_locks WHERE name = '$v_a'"), 'held',
	"\"$v_a\", which the new master has, is still held");

# ---- a) continued: the waiters get the locks when they are released ----

ok(!RlockTest::bg_done($w_a) && !RlockTest::bg_done($w_b), 'the waiters still wait while the locks are held');
foreach my $x ([ $h_a, $w_b, $v_a, 'B' ], [ $h_b, $w_a, $v_b, 'A' ])
{
	my ($h, $w, $k, $srv) = @$x;
	($out, $err) = RlockTest::run_sql($h, "SELECT rlock_release('$k')");
	is("$out/$err", 't/', "the holder releases \"$k\" on the new master, no warning");
	$t0 = time();
	RlockTest::wait_until(sub { RlockTest::bg_done($w) }, 30);
	$elapsed = time() - $t0;
	($out, $err, $state) = RlockTest::bg_result($w);
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

# Each iteration: take "excl" for the transaction (a 3 s lease), note
# when, write the interval in its own database, COMMIT
# (RlockTest::Exclusion).  Errors roll the transaction back and the next
# iteration begins.
my $excl = 'excl';
my $slot = $c->slot_of($excl);
my $ex = RlockTest::Exclusion->new(
	sessions => [ map { my $n = $_; map { [ $n, $_ ] } 'postgres', 'db2' } $node_a, $node_b ],
	lock => $excl,
	lease => '3s',
	timeout_s => 180);

# INFO errorstats of a Redis node: "ERR=count" for each error reply kind
sub errorstats
{
	my ($r) = @_;
	return map { /^errorstat_(\w+):count=(\d+)/ ? "$1=$2" : () }
	  split /\r?\n/, scalar $r->cli('INFO', 'errorstats');
}

ok($ex->drive(sub { $ex->sections >= 20 }, 60),
	'four sessions on two servers take turns at "excl"');
my $mx = $c->master_of($slot);
note 'the master of "excl" (slot ' . $slot . ') is ' . $mx->where;

my $kill2_at = $c->kill_master($mx);
# keep the loops going until a new master serves the slot
$ex->drive(
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
ok($ex->drive(sub { $ex->sections($settled2) >= 20 }, 60),
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
my %redir0 = map { $_->name => RlockTest::stat_of($_, 'redirections') } $node_a, $node_b;
my $mig_at = time();
$c->begin_migration($slot, $target);
$ex->drive(sub { $ex->sections($mig_at) >= 3 }, 20);
my $mig_s = time() - $mig_at;
foreach my $n ($node_a, $node_b)
{
	cmp_ok(RlockTest::stat_of($n, 'redirections'), '>', $redir0{ $n->name },
		$n->name . ': rlock_stats.redirections: its loops were sent to the target (ASK)');
}
note sprintf('slot %d migrating from %s to %s for %.1f s, %d sections committed meanwhile; '
	  . 'Redis errors on the source: %s; on the target: %s',
	$slot, $heir2->where, $target->where, $mig_s, $ex->sections($mig_at),
	join(' ', errorstats($heir2)), join(' ', errorstats($target)));
$c->finish_migration($slot);
my $moved_at = time();
ok($ex->drive(sub { $ex->sections($moved_at) >= 20 }, 60),
	'after the slot moved (MOVED) they take turns on ' . $target->where);

$ex->finish;
my @intervals = @{ $ex->intervals };
my %by_sess = %{ $ex->by_sess };
my %kinds = $ex->error_kinds;
note sprintf('exclusion: %d critical sections committed (%d across the kill, %d after the failover settled '
	  . '(%.3f s after the kill), %d begun while the slot migrated, %d after it moved), %d errors; '
	  . 'per session: %s',
	scalar(@intervals),
	scalar(grep { $_->[0] < $kill2_at && $_->[1] > $kill2_at } @intervals),
	scalar(grep { $_->[0] > $settled2 && $_->[0] < $mig_at } @intervals),
	$failover2_s,
	scalar(grep { $_->[0] > $mig_at && $_->[0] < $moved_at } @intervals),
	scalar(grep { $_->[0] > $moved_at } @intervals),
	$ex->error_count,
	join(', ', map { "$_ $by_sess{$_}" } sort keys %by_sess));
note "errors met by the loops: $kinds{$_} x $_" foreach sort keys %kinds;
$ex->check;

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
# (commandstats: INFO errorstats, which would count the NOSCRIPT, is 6.2+)
my $bodies = RlockTest::command_calls($dst_d, 'eval') > 0 ? 'EVAL' : 'no EVAL';
is("$out/$err/$bodies", 't//EVAL',
	'a name of a slot migrating to a master without the scripts can be locked '
	  . '(ASK, NOSCRIPT at the target, the script body sent again with ASKING)');
$c->finish_migration($slot_d);
RlockTest::run_sql($sd, 'SELECT rlock_release_all()');
$sd->quit;
is(RlockTest::sql($node_a, "SELECT rlock_try_acquire('$fresh', '10s'), rlock_release('$fresh')"), 't|t',
	'once the slot has moved there (MOVED), it can');

done_testing();
