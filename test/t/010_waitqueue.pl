# Copyright (c) 2026, rlock developers
#
# Waiters of one server take turns (waitqueue.c): a release wakes one
# waiting session of the server for an exclusive lock, not all of them (one
# retry per release instead of one per waiter, counted with rlock_stats),
# and still every waiter gets the lock in turn; for a read lock, every
# waiting reader of the server gets in at once.  A newcomer finding waiters
# of its server queues behind them without an attempt, and a session that
# took the lock while others waited keeps its subscription for its next
# wait (SUBSCRIBE and script calls counted with INFO commandstats).  Only
# the first two waiters of the server read release messages (the others'
# go unread in their sockets until they are next in line), and only the
# first eight are subscribed at all.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use RlockTest;

my $redis = RlockTest::Redis->new;
# rlock_stats.redis_round_trips is server-wide: the watchdog worker's cycles
# (which renew locks without a lease and check fixed-lease ones) add to it.
# With a 10 minute watchdog_timeout a cycle is due every 200 s, or when a
# lock's lease (here 1 minute) runs out: none falls in the measurement
# below.  Should one run anyway, what it cost is subtracted (see
# session_round_trips).
my $node = RlockTest::new_node('waitq', $redis, watchdog_timeout => '10min');

my $h = $node->background_psql('postgres', on_error_stop => 0);
my @w = map { $node->background_psql('postgres', on_error_stop => 0) } 1 .. 4;

sub q1
{
	my ($s, $sql) = @_;
	my ($out, $err) = RlockTest::query_err($s, $sql);
	return $out;
}

# (redis_round_trips, renewal_batches, renewal_cycles) now
sub round_trips
{
	return split /\|/,
	  $node->safe_psql('postgres',
		'SELECT redis_round_trips, renewal_batches, renewal_cycles FROM rlock_stats');
}

# The Redis round trips the sessions made since @before = round_trips():
# all of them, less the watchdog's.  A watchdog cycle sends its script
# calls (renewal_batches, of at most 1000 locks each; this test holds 5)
# pipelined in one round trip, so with 5 locks each of its round trips is
# one batch.
sub session_round_trips
{
	my @before = @_;
	my @now = round_trips();
	my $watchdog = $now[1] - $before[1];
	note sprintf('round trips: %d in all, %d by the watchdog (%d cycles)',
		$now[0] - $before[0], $watchdog, $now[2] - $before[2]);
	return $now[0] - $before[0] - $watchdog;
}

sub start
{
	my ($s, $sql) = @_;
	$s->query_until(qr/started\n/, "\\echo started\n$sql;\n\\echo done\n");
	return;
}

# Start the waiters one after another, each waiting before the next starts,
# so that they queue in this order.
sub start_waiters
{
	my ($sql, $like) = @_;
	for my $i (0 .. $#w)
	{
		start($w[$i], $sql);
		RlockTest::wait_for_rlock_waiters($node, 'postgres', $i + 1, $like);
		usleep(50_000);
	}
	return;
}

sub finished
{
	my ($s) = @_;
	$s->{run}->pump_nb;
	return $s->{stdout} =~ /done\n/;
}

sub collect
{
	my ($s) = @_;
	$s->query_until(qr/done\n/, '');
	return;
}

# ---- exclusive: one release, one retry ----

q1($h, "SELECT rlock_acquire('wq', '1 minute')");
start_waiters("SELECT rlock_acquire('wq', '1 minute')", "%rlock_acquire('wq'%");
usleep(100_000);
my @rt0 = round_trips();
q1($h, "SELECT rlock_release('wq')");
ok(RlockTest::wait_until(sub { finished($w[0]) }, 10), 'the first waiter gets the lock');
usleep(300_000);
my $rt = session_round_trips(@rt0);
# The release and the first waiter's attempt (the rlock_stats reads are no
# Redis round trips), plus at most one refused attempt: the second waiter
# may read the same release message only after the first one took the lock
# and left the queue, and then finds itself first (waitqueue.c cannot tell
# a message already used from a new one).  4 waiters all retrying would
# make it 6.
cmp_ok($rt, '<=', 4, "one release cost $rt Redis round trips, not one per waiting session");
is(scalar(grep { finished($_) } @w[1 .. 3]), 0, 'the others still wait, without having tried');
collect($w[0]);

# every waiter gets its turn, in the order they came
my $t0 = time();
for my $i (0 .. 3)
{
	q1($w[$i], "SELECT rlock_release('wq')");
	last if $i == 3;
	ok(RlockTest::wait_until(sub { finished($w[ $i + 1 ]) }, 10),
		'waiter ' . ($i + 2) . ' gets the lock when waiter ' . ($i + 1) . ' releases it');
	collect($w[ $i + 1 ]);
}
# a waiter not told would find the lock free only at its next recheck, up
# to 5 s later: three such hand-offs would rarely all fit in 3 s
my $handoffs = time() - $t0;
note sprintf('three hand-offs took %.3f s', $handoffs);
cmp_ok($handoffs, '<', 3, 'all hand-offs came from release messages, not from rechecks');

# ---- read lock: a write release lets every waiting reader of the server in ----

q1($h, "SELECT rlock_write_acquire('wqr', '1 minute')");
start_waiters("SELECT rlock_read_acquire('wqr', '1 minute')", "%rlock_read_acquire('wqr'%");
$t0 = time();
q1($h, "SELECT rlock_write_release('wqr')");
ok(RlockTest::wait_until(sub { (grep { finished($_) } @w) == 4 }, 10),
	'all four readers get the read lock');
# (readers not passed the turn would wait for their 5 s recheck)
my $readers_in = time() - $t0;
note sprintf('the four readers were in %.3f s after the write release', $readers_in);
cmp_ok($readers_in, '<', 3, 'at once: each passes the turn on');
collect($_) for @w;
is($node->safe_psql('postgres', "SELECT count(*) FROM rlock_status('wqr')"), '4',
	'four readers hold it');
q1($_, "SELECT rlock_read_release('wqr')") for @w;

# ---- a newcomer queues behind this server's waiters without trying first;
# ---- a session that took a lock others wait for stays subscribed, and
# ---- its next wait on the lock needs no round trip before it queues ----

my $chan = 'redisson_lock__channel:{wqn}';

sub listeners
{
	my $r = $redis->cli('PUBSUB', 'NUMSUB', $chan) // '';
	my ($n) = $r =~ /(\d+)\s*$/;
	return $n // 0;
}

# (script calls, SUBSCRIBE calls) on Redis so far
sub redis_calls
{
	my $info = $redis->cli('INFO', 'commandstats');
	my ($scripts, $subs) = (0, 0);
	$scripts += $1 while $info =~ /cmdstat_eval(?:sha)?:calls=(\d+)/g;
	$subs = $1 if $info =~ /cmdstat_subscribe:calls=(\d+)/;
	return ($scripts, $subs);
}

q1($h, "SELECT rlock_acquire('wqn', '1 minute')");
start($w[0], "SELECT rlock_acquire('wqn', '1 minute')");
ok(RlockTest::wait_until(sub { listeners() == 1 }, 30), 'a first waiter subscribes');
my @c0 = redis_calls();
start($w[1], "SELECT rlock_acquire('wqn', '1 minute')");
ok(RlockTest::wait_until(sub { listeners() == 2 }, 30), 'a second waiter subscribes');
my @c1 = redis_calls();
is($c1[0] - $c0[0], 0,
	'the second waiter made no attempt: it queued behind the first, its subscription its only round trip');
start($w[2], "SELECT rlock_acquire('wqn', '1 minute')");
ok(RlockTest::wait_until(sub { listeners() == 3 }, 30), 'a third waiter subscribes');
RlockTest::wait_for_rlock_waiters($node, 'postgres', 3, "%rlock_acquire('wqn'%");

q1($h, "SELECT rlock_release('wqn')");
ok(RlockTest::wait_until(sub { finished($w[0]) }, 10), 'the first waiter gets the lock');
collect($w[0]);
q1($w[0], "SELECT rlock_release('wqn')");
ok(RlockTest::wait_until(sub { finished($w[1]) }, 10), 'then the second');
collect($w[1]);
is(listeners(), 3,
	'the two that took the lock while others waited for it are still subscribed');

# the first comes back for the lock while the third still waits
my @c2 = redis_calls();
start($w[0], "SELECT rlock_acquire('wqn', '1 minute')");
RlockTest::wait_for_rlock_waiters($node, 'postgres', 2, "%rlock_acquire('wqn'%");
q1($w[1], "SELECT rlock_release('wqn')");
ok(RlockTest::wait_until(sub { finished($w[2]) }, 10), 'the third waiter gets it next');
collect($w[2]);
ok(!finished($w[0]), 'the one that came back waits behind it');
q1($w[2], "SELECT rlock_release('wqn')");
ok(RlockTest::wait_until(sub { finished($w[0]) }, 10), 'and gets it when the third releases it');
collect($w[0]);
my @c3 = redis_calls();
is($c3[1] - $c2[1], 0,
	'coming back cost no SUBSCRIBE: the kept subscription was resumed');
# two releases and the two waiters' attempts; plus at most one refused
# attempt, as above: the one that came back may read the release message
# that let the third in only after the third left the queue
cmp_ok($c3[0] - $c2[0], '<=', 5,
	'two releases and two attempts, at most one of them refused');
q1($w[0], "SELECT rlock_release('wqn')");
# w[0] took it last with no one behind it: it left the channel; w[1] and
# w[2] kept theirs, for 5 s after their wait, though they sit idle now
# (rlock.connection_idle_timeout, 1 minute, is not what closes them)
ok(RlockTest::wait_until(sub { listeners() == 0 }, 30),
	'a kept subscription is left a few seconds later, by a session that sits idle too');

# ---- only the first two waiters of the server read release messages; the
# ---- others sleep until a listener ahead of them leaves ----

# Bytes the kernel holds unread on process $pid's connections to Redis
# (rx_queue in /proc/net/tcp, for the sockets among its descriptors).
sub unread_bytes
{
	my ($pid) = @_;
	my %mine;
	opendir(my $d, "/proc/$pid/fd") or return -1;
	for my $fd (readdir $d)
	{
		my $l = readlink("/proc/$pid/fd/$fd") // '';
		$mine{$1} = 1 if $l =~ /^socket:\[(\d+)\]$/;
	}
	closedir $d;
	my $port = sprintf('%04X', $redis->port);
	my $unread = 0;
	open(my $t, '<', '/proc/net/tcp') or return -1;
	while (my $line = <$t>)
	{
		my @f = split ' ', $line;
		next unless @f > 9 && $f[2] =~ /:$port$/ && $mine{ $f[9] };
		my (undef, $rx) = split /:/, $f[4];
		$unread += hex($rx);
	}
	close $t;
	return $unread;
}

my @pid = map { q1($_, 'SELECT pg_backend_pid()') } @w;
q1($h, "SELECT rlock_acquire('wql', '1 minute')");
start_waiters("SELECT rlock_acquire('wql', '1 minute')", "%rlock_acquire('wql'%");
# a release message while the lock is still held: the first tries, in vain
$redis->cli('PUBLISH', 'redisson_lock__channel:{wql}', '0');
ok(RlockTest::wait_until(sub { unread_bytes($pid[0]) == 0 && unread_bytes($pid[1]) == 0
			&& unread_bytes($pid[2]) > 0 && unread_bytes($pid[3]) > 0 }, 30),
	'the first two waiters read the message, the other two do not');
ok(unread_bytes($pid[2]) > 0 && unread_bytes($pid[3]) > 0,
	'the third and the fourth were not woken by it');
# many more messages pile up unread (more than a skip reads at once: 64)
my $reconnects = $node->safe_psql('postgres', 'SELECT reconnects FROM rlock_stats');
$redis->cli('EVAL', "for i = 1, 200 do redis.call('PUBLISH', KEYS[1], '0') end", '1',
	'redisson_lock__channel:{wql}');
q1($h, "SELECT rlock_release('wql')");
ok(RlockTest::wait_until(sub { finished($w[0]) }, 10), 'the first waiter gets the lock');
collect($w[0]);
ok(RlockTest::wait_until(sub { unread_bytes($pid[2]) == 0 }, 30),
	'the third, second in line now, listens: it skipped what it had not read');
ok(unread_bytes($pid[3]) > 0, 'the fourth still sleeps');
$t0 = time();
for my $i (0 .. 3)
{
	q1($w[$i], "SELECT rlock_release('wql')");
	last if $i == 3;
	ok(RlockTest::wait_until(sub { finished($w[ $i + 1 ]) }, 10),
		'waiter ' . ($i + 2) . ' gets the lock when waiter ' . ($i + 1) . ' releases it');
	collect($w[ $i + 1 ]);
}
$handoffs = time() - $t0;
note sprintf('three hand-offs took %.3f s', $handoffs);
cmp_ok($handoffs, '<', 3, 'all hand-offs came from release messages and turns, not from rechecks');
is($node->safe_psql('postgres', 'SELECT reconnects FROM rlock_stats'), $reconnects,
	'skipping hundreds of unread messages kept the subscriptions: no reconnect');

# ---- only the first eight waiters of the server are subscribed at all:
# ---- Redis writes each release message to every subscriber, read or
# ---- not; one that leaves the first eight tells the next to subscribe ----

my @more = map { $node->background_psql('postgres', on_error_stop => 0) } 1 .. 7;
my @all = (@w, @more);
my $schan = 'redisson_lock__channel:{wqs}';

sub subscribers
{
	my $r = $redis->cli('PUBSUB', 'NUMSUB', $schan) // '';
	my ($n) = $r =~ /(\d+)\s*$/;
	return $n // 0;
}

q1($h, "SELECT rlock_acquire('wqs', '1 minute')");
for my $i (0 .. $#all)
{
	start($all[$i], "SELECT rlock_acquire('wqs', '1 minute')");
	RlockTest::wait_for_rlock_waiters($node, 'postgres', $i + 1, "%rlock_acquire('wqs'%");
	usleep(50_000);
}
ok(RlockTest::wait_until(sub { subscribers() == 8 }, 30),
	'of 11 waiters, the first 8 are subscribed');
usleep(300_000);
is(subscribers(), 8, 'and no more of them subscribe');
q1($h, "SELECT rlock_release('wqs')");
ok(RlockTest::wait_until(sub { finished($all[0]) }, 10), 'the first waiter gets the lock');
collect($all[0]);
# the first keeps its subscription (others wait for the lock), the ninth
# has moved up among the first eight waiting
ok(RlockTest::wait_until(sub { subscribers() == 9 }, 30),
	'the ninth in line subscribes when the first leaves the queue');
for my $i (0 .. $#all)
{
	q1($all[$i], "SELECT rlock_release('wqs')");
	last if $i == $#all;
	ok(RlockTest::wait_until(sub { finished($all[ $i + 1 ]) }, 15),
		'waiter ' . ($i + 2) . ' of 11 gets the lock when waiter ' . ($i + 1) . ' releases it');
	collect($all[ $i + 1 ]);
}
ok(RlockTest::wait_until(sub { subscribers() == 0 }, 30),
	'every subscription is left once no one waits');

$h->quit;
$_->quit for @all;
$node->stop;
$redis->stop;
done_testing();
