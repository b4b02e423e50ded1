# Copyright (c) 2026, rlock developers
#
# Resharding a Redis Cluster while rlock sessions hold locks and wait for
# them: the slots of held locks move from one master to another with
# CLUSTER SETSLOT ... IMPORTING / MIGRATING, MIGRATE and SETSLOT ... NODE
# (RlockTest::Cluster's begin_migration and finish_migration).  A cluster
# of 3 masters with a replica each; rlock.watchdog_timeout = 3s, so that
# locks without a lease are renewed every second throughout.
#
#   a) on the source master: an exclusive lock without a lease held twice
#      and a read lock (session 1), an exclusive lock with a 5-minute lease
#      (session 2) that a session of database db2 waits for (SSUBSCRIBE on
#      the source on Redis 7), a fenced lock (session 3), a lock with a
#      fixed lease held twice (session 4).  The target master has already
#      run rlock's scripts (see d).
#   b) the five slots are MIGRATING, their keys moved to the target: a new
#      acquisition in one of them goes through ASK (counted in
#      rlock_stats.redirections) and lands on the target; neither rlock in
#      db2 nor a Redisson client can take a held name; the watchdog renews
#      the held locks on the target; session 4 releases one level, a
#      multi-key script that Redis answers TRYAGAIN while the slot is split:
#      it waits (rlock.command_timeout 30s) and is not applied.
#   c) the slots are given to the target (MOVED from then on): the waiting
#      release completes, once; every lock the sessions hold is on the
#      target with its holder and count; the waiter's sharded subscription,
#      dropped by the source, is made again on the target; exclusion holds;
#      releases and acquisitions go through MOVED; the waiter gets its lock
#      as soon as the holder releases; renewals go on; nothing is reported
#      lost.
#   d) a slot migrating to a master whose script cache is empty (a master
#      just added, or flushed): acquisitions and renewals through ASK still
#      work and the held lock is not reported lost.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use RlockTest;

my $c = RlockTest::Cluster->new(masters => 3, replicas => 1);
my ($src, $dst, $cold) = $c->masters;
my $node = RlockTest::new_node('reshard', undef,
	url => $c->url,
	watchdog_timeout => '3s',
	dbs => [ 'postgres', 'db2' ]);
my $sharded = RlockTest::redis_version() >= 70000;
my $java = '6f1c2b9e-3d4a-4e5f-8a7b-9c0d1e2f3a4b:57';

my ($out, $err, $state);

# stdout of $sql in a new session (database postgres unless $db), and a
# column of rlock_stats
sub sql { return RlockTest::sql($node, $_[0], $_[1]); }
sub stat_of { return RlockTest::stat_of($node, $_[0]); }

# Subscribers of a lock's channel on one node (sharded pub/sub).
sub shard_subscribers
{
	my ($r, $name) = @_;
	my @o = split /\n/, $r->cli('PUBSUB', 'SHARDNUMSUB', "redisson_lock__channel:{$name}");
	return $o[1] // '';
}

# Names on the source master, each in its own slot.
my ($wname, $fname, $rname, $tname, $lname) =
  @{ $c->names_on_each_master(5, 'rs')->{ $src->port } };
my @moved = ($wname, $fname, $rname, $tname, $lname);
my %slot = map { $_ => $c->slot_of($_) } @moved;
my $new1 = "{$wname}:new";    # in $wname's slot, not taken before the move
my $new2 = "{$rname}:new";
is($c->slot_of($new1), $slot{$wname}, "a hash tag puts a new name in a held lock's slot");
note 'source ' . $src->where . ', target ' . $dst->where
  . ", names $wname (no lease), $fname (fixed lease, waited for), $rname (read),"
  . " $tname (fenced), $lname (fixed lease, released while migrating); slots "
  . join(',', map { $slot{$_} } @moved);

# ---- a) locks held and waited for on the source ----

my $h1 = $node->background_psql('postgres', on_error_stop => 0);
my $h2 = $node->background_psql('postgres', on_error_stop => 0);
my $h3 = $node->background_psql('postgres', on_error_stop => 0);
my $h4 = $node->background_psql('postgres', on_error_stop => 0);
my $p = $node->background_psql('postgres', on_error_stop => 0);
my $w = $node->background_psql('db2', on_error_stop => 0);
my $d2 = $node->background_psql('db2', on_error_stop => 0);
my %holder = map { $_->[0] => RlockTest::holder_of($_->[1]) }
  [ h1 => $h1 ], [ h4 => $h4 ], [ p => $p ], [ w => $w ];

($out, $err) = RlockTest::run_sql($h1,
	"SELECT rlock_acquire('$wname'), rlock_acquire('$wname'), rlock_read_acquire('$rname')");
is($err, '', "session 1 holds \"$wname\" twice (no lease) and reads \"$rname\"");
($out, $err) = RlockTest::run_sql($h2, "SELECT rlock_try_acquire('$fname', '5 minutes')");
is("$out/$err", 't/', "session 2 holds \"$fname\" with a 5-minute lease");
($out, $err) = RlockTest::run_sql($h3, "SELECT rlock_fenced_acquire('$tname')");
like("$out/$err", qr/^\d+\/$/, "session 3 holds the fenced lock \"$tname\"");
my $token = $out;
($out, $err) = RlockTest::run_sql($h4,
	"SELECT rlock_try_acquire('$lname', '5 minutes'), rlock_try_acquire('$lname', '5 minutes')");
is("$out/$err", 't|t/', "session 4 holds \"$lname\" twice with a 5-minute lease");
is($src->cli('HGET', $wname, $holder{h1}), '2', 'the locks are on the source master');

RlockTest::start_bg($w, "SELECT rlock_try_acquire('$fname', wait => '50s'), extract(epoch FROM clock_timestamp())");
RlockTest::wait_for_rlock_waiters($node, 'db2', 1, "%'$fname'%");
note "a session of db2 waits for \"$fname\"";
SKIP:
{
	skip 'no sharded pub/sub before Redis 7', 1 unless $sharded;
	ok(RlockTest::wait_until(sub { shard_subscribers($src, $fname) eq '1' }, 10),
		'the waiter listens with SSUBSCRIBE on the source master');
}

# rlock's scripts in the target's script cache: locks of each kind taken,
# released and renewed there (an empty cache is section d)
my ($b1, $b2, $b3) = @{ $c->names_on_each_master(3, 'warm')->{ $dst->port } };
($out, $err) = RlockTest::run_sql($p,
	"SELECT rlock_try_acquire('$b1'), rlock_release('$b1'), rlock_fenced_acquire('$b2') > 0,"
	  . " rlock_release('$b2'), rlock_read_acquire('$b3'), rlock_read_release('$b3'),"
	  . " rlock_write_try_acquire('$b3'), rlock_write_release('$b3'), rlock_try_acquire('$b1')");
is("$out/$err", 't|t|t|t||t|t|t|t/', 'locks of each kind taken and released on the target master');
# (renewed_on with the cluster: its PTTL asked following ASK and MOVED)
my ($warm) = RlockTest::renewed_on($c, $b1, 10);
ok($warm, 'and one renewed there');
RlockTest::run_sql($p, "SELECT rlock_release('$b1')");

my $redir0 = stat_of('redirections');
my $renewals0 = stat_of('renewals');

# ---- b) the slots are migrating: ASK ----

$c->begin_migration($slot{$_}, $dst) foreach @moved;
is(join(',', map { scalar $src->cli('CLUSTER', 'COUNTKEYSINSLOT', $slot{$_}) } @moved),
	'0,0,0,0,0', 'MIGRATING: the keys of the five slots left the source');
is($c->call($wname, 'HGET', $wname, $holder{h1}), '2', "\"$wname\" is on the target");

($out, $err) = RlockTest::run_sql($p, "SELECT rlock_try_acquire('$new1', '1 minute')");
is("$out/$err", 't/', "MIGRATING: a new acquisition in a migrating slot (\"$new1\") works");
is($c->call($new1, 'HGET', $new1, $holder{p}), '1', 'the lock is on the target');
is($src->cli('CLUSTER', 'COUNTKEYSINSLOT', $slot{$wname}), '0',
	'and not on the source: it followed ASK');
my $redir1 = stat_of('redirections');
cmp_ok($redir1, '>', $redir0, "rlock_stats.redirections went up ($redir0 -> $redir1)");

($out, $err) = RlockTest::run_sql($d2, "SELECT rlock_try_acquire('$wname', '1 minute')");
is("$out/$err", 'f/', "MIGRATING: rlock in db2 cannot take \"$wname\"");
($out, $err) = RlockTest::run_sql($d2, "SELECT rlock_write_try_acquire('$rname', '1 minute')");
is("$out/$err", 'f/', "nor write-lock \"$rname\"");
like(RlockTest::Redisson::try_lock($c, $wname, 30000, $java), qr/^\d+$/,
	"MIGRATING: a Redisson client cannot take \"$wname\" (it gets the PTTL)");
like(RlockTest::Redisson::try_lock($c, $tname, 30000, $java), qr/^\d+$/,
	"nor the fenced lock \"$tname\"");

# a release in a split slot: Redis answers TRYAGAIN until the slot settles
RlockTest::run_sql($h4, "SET rlock.command_timeout = '30s'");
RlockTest::start_bg($h4, "SELECT rlock_release('$lname')");
my $in_flight = RlockTest::wait_until(
	sub {
		RlockTest::bg_done($h4)
		  || sql("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Extension'"
			  . " AND query LIKE '%rlock_release(''$lname'')%'") eq '1';
	});
note "session 4 releases one level of \"$lname\" while its slot is split";

foreach my $k ($wname, $rname, $tname)
{
	my ($ok, $low) = RlockTest::renewed_on($c, $k, 10);
	ok($ok, "MIGRATING: the watchdog renews \"$k\" on the target (PTTL up from $low ms)");
}
is($c->call($lname, 'HGET', $lname, $holder{h4}), '2',
	"the release of \"$lname\" is not applied while the slot is split");
ok($in_flight && !RlockTest::bg_done($h4),
	'and it is still waiting (TRYAGAIN, within rlock.command_timeout)');

# ---- c) the slots move: MOVED ----

$c->finish_migration($slot{$_}) foreach @moved;
ok(RlockTest::wait_until(sub { RlockTest::bg_done($h4) }, 30), 'the release of session 4 ends');
($out, $err, $state) = RlockTest::bg_result($h4);
is("$out/$err/$state", 't//00000',
	'it released one level once the slot settled, without a warning');
is($dst->cli('HGET', $lname, $holder{h4}), '1', 'one level is left on the target');
note "the release in flight: $out $err" if $err ne '';
($out, $err) = RlockTest::run_sql($h4, "SELECT rlock_hold_count('$lname')");
is("$out/$err", '1/', 'session 4 holds one level');
is($dst->cli('HGET', $lname, $holder{h4}), '1', 'and so does the target: they agree');

my @held = split /\n/, sql(
	'SELECT name, kind, holder, hold_count, state FROM rlock_locks ORDER BY name');
my @bad;
foreach my $row (@held)
{
	my ($n, $kind, $h, $count, $st) = split /\|/, $row;
	my $have = $dst->cli('HGET', $n, $kind eq 'write' ? "$h:write" : $h);
	push @bad, "$row: the target has '$have'" unless $st eq 'held' && $have eq $count;
}
is(scalar(@held), 6, 'rlock_locks shows the six locks the sessions hold');
is(join("\n", @bad), '',
	'each is held on the target by its holder with its count');
is($dst->cli('HGET', $wname, $holder{h1}), '2', "(\"$wname\": 2 levels)");
is($dst->cli('HGET', $rname, 'mode'), 'read', "\"$rname\" is a read lock there");
is(sql("SELECT count(*) FROM rlock_locks WHERE node = '" . $dst->where . "'"), '6',
	'rlock_locks.node names the target for all six');

SKIP:
{
	skip 'no sharded pub/sub before Redis 7', 2 unless $sharded;
	ok(RlockTest::wait_until(sub { shard_subscribers($dst, $fname) eq '1' }, 10),
		'the waiter subscribed again, on the target');
	is(shard_subscribers($src, $fname), '0', 'the source dropped its subscription');
}
ok(!RlockTest::bg_done($w), 'the waiter still waits');

($out, $err) = RlockTest::run_sql($d2, "SELECT rlock_write_try_acquire('$rname', '1 minute')");
is("$out/$err", 'f/', "after the move: rlock in db2 cannot write-lock \"$rname\"");
($out, $err) = RlockTest::run_sql($d2, "SELECT rlock_try_acquire('$wname', '1 minute')");
is("$out/$err", 'f/', "nor take \"$wname\"");
like(RlockTest::Redisson::try_lock($c, $wname, 30000, $java), qr/^\d+$/,
	'nor can a Redisson client');

my $redir2 = stat_of('redirections');
($out, $err) = RlockTest::run_sql($p, "SELECT rlock_release('$new1')");
is("$out/$err", 't/', "a release through MOVED (\"$new1\")");
($out, $err) = RlockTest::run_sql($p,
	"SELECT rlock_try_acquire('$new2', '1 minute'), rlock_release('$new2')");
is("$out/$err", 't|t/', 'an acquisition and a release in another moved slot');
is($dst->cli('EXISTS', $new1) . $dst->cli('EXISTS', $new2), '00', 'nothing is left of them');
my $redir3 = stat_of('redirections');
cmp_ok($redir3, '>', $redir2, "MOVED counted in rlock_stats.redirections ($redir2 -> $redir3)");
($out, $err) = RlockTest::run_sql($h3, "SELECT rlock_fenced_token('$tname')");
is("$out/$err", "$token/", 'the fencing token moved with its lock');
($out, $err) = RlockTest::run_sql($h3, "SELECT rlock_release('$tname')");
is("$out/$err", 't/', 'the fenced lock is released through MOVED');

my $t_rel = time();
($out, $err) = RlockTest::run_sql($h2, "SELECT rlock_release('$fname')");
is("$out/$err", 't/', "the holder releases \"$fname\"");
ok(RlockTest::wait_until(sub { RlockTest::bg_done($w) }, 60), 'the waiter ends');
($out, $err, $state) = RlockTest::bg_result($w);
my ($got, $at) = split /\|/, $out;
is("$got/$state", 't/00000', "the waiter in db2 gets \"$fname\"")
  or diag("waiter: $out / $err");
my $latency = defined $at ? $at - $t_rel : 99;
note sprintf('the waiter got "%s" %.3f s after its release began (lease 5 minutes;'
	  . ' a waiter looks again at most every 5 s)',
	$fname, $latency);
cmp_ok($latency, '<', 2, 'woken by the release message on the target, not by a recheck');
is($dst->cli('HGET', $fname, $holder{w}), '1', 'it holds it on the target');
($out, $err) = RlockTest::run_sql($w, "SELECT rlock_release('$fname')");
is("$out/$err", 't/', 'and releases it');

foreach my $k ($wname, $rname)
{
	my ($ok, $low) = RlockTest::renewed_on($c, $k, 10);
	ok($ok, "after the move the watchdog renews \"$k\" on the target (PTTL up from $low ms)");
}
cmp_ok(stat_of('renewals'), '>', $renewals0, 'rlock_stats.renewals grew');

is(sql("SELECT count(*) FROM rlock_locks WHERE state = 'lost'"), '0',
	'no lock in rlock_locks is lost');
is(stat_of('locks_lost'), '0', 'rlock_stats.locks_lost is 0');
unlike(slurp_file($node->logfile), qr/was lost/, 'the server log has no "was lost" line');
note sprintf('rlock_stats: redirections %d, renewals %d, renewal_failures %d, renewal_round_trips %d',
	stat_of('redirections'), stat_of('renewals'), stat_of('renewal_failures'),
	stat_of('renewal_round_trips'));

($out, $err) = RlockTest::run_sql($h1, 'SELECT rlock_release_all()');
is("$out/$err", '2/', 'session 1 releases the rest, no warning');
($out, $err) = RlockTest::run_sql($h4, "SELECT rlock_release('$lname')");
is("$out/$err", 't/', 'session 4 too');
is(join('', map { scalar $dst->cli('EXISTS', $_) } $wname, $rname, $lname), '000',
	'nothing is left on the target');

# ---- d) migrating to a master whose script cache is empty ----

my ($xname) = @{ $c->names_on_each_master(1, 'cold')->{ $src->port } };
my $xslot = $c->slot_of($xname);
my $xnew = "{$xname}:new";
my $log_at = -s $node->logfile;
($out, $err) = RlockTest::run_sql($h1, "SELECT rlock_acquire('$xname')");
is($err, '', "session 1 holds \"$xname\" (no lease) on the source");
is($cold->cli('SCRIPT', 'FLUSH'), 'OK', 'the script cache of the third master is emptied');
$c->begin_migration($xslot, $cold);
($out, $err) = RlockTest::run_sql($p, "SELECT rlock_try_acquire('$xnew', '1 minute')");
is("$out/$err", 't/', "MIGRATING there: a new acquisition (\"$xnew\") works");
my ($ok, $low) = RlockTest::renewed_on($c, $xname, 6);
ok($ok, "the watchdog renews \"$xname\" there (PTTL up from $low ms)");
$c->finish_migration($xslot);
is(sql("SELECT state FROM rlock_locks WHERE name = '$xname'"), 'held',
	"\"$xname\" is not reported lost");
unlike(slurp_file($node->logfile, $log_at), qr/was lost/, 'no "was lost" line');
($out, $err) = RlockTest::run_sql($h1, "SELECT rlock_release('$xname')");
is("$out/$err", 't/', 'session 1 releases it, no warning');
RlockTest::run_sql($_, 'SELECT rlock_release_all()') for $h1, $p;
is(join('', map { scalar $cold->cli('EXISTS', $_) } $xname, $xnew), '00',
	'nothing is left on the third master');

$_->quit for $h1, $h2, $h3, $h4, $p, $w, $d2;
done_testing();
