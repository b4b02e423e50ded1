# Copyright (c) 2026, rlock developers
#
# Fenced locks across sessions and servers: every acquisition — by either
# server, reentrant or after a wait — gets a larger token than every one
# before it, and a Redisson RFencedLock client driven from redis-cli shares
# the counter: its tokens and rlock's interleave in one increasing sequence,
# and its release wakes a blocked rlock waiter.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use RlockTest;

my $redis = RlockTest::Redis->new;
my $node1 = RlockTest::new_node('fenced1', $redis);
my $node2 = RlockTest::new_node('fenced2', $redis);

my $s1 = $node1->background_psql('postgres', on_error_stop => 0);
my $s2 = $node2->background_psql('postgres', on_error_stop => 0);

sub q1
{
	my ($s, $sql) = @_;
	my ($out, $err) = RlockTest::query_err($s, $sql);
	return $out;
}

my @tokens;    # [who, token], in the order they were handed out

# ---- two servers take turns, reentrant acquisitions included ----

for my $round (1 .. 5)
{
	my ($holder, $other) = $round % 2 ? ($s1, $s2) : ($s2, $s1);
	my $hname = $round % 2 ? 'server 1' : 'server 2';
	my $oname = $round % 2 ? 'server 2' : 'server 1';
	my $t = q1($holder, "SELECT rlock_fenced_acquire('fence', '1 minute')");
	push @tokens, [ "$hname acquires", $t ];
	$t = q1($holder, "SELECT rlock_fenced_acquire('fence', '1 minute')");
	push @tokens, [ "$hname re-enters", $t ];
	is(q1($other, "SELECT rlock_fenced_try_acquire('fence', '1 minute') IS NULL"),
		't', "round $round: ${oname}'s try gets no token while $hname holds the lock");
	q1($holder, "SELECT rlock_release('fence'), rlock_release('fence')");
}

# ---- a blocked waiter's token ----

push @tokens, [ 'server 1 acquires', q1($s1, "SELECT rlock_fenced_acquire('fence', '1 minute')") ];
$s2->query_until(qr/waiting\n/,
	"\\echo waiting\nSELECT 'token=' || rlock_fenced_acquire('fence', '1 minute');\n");
RlockTest::wait_for_rlock_waiters($node2, 'postgres', 1, "%rlock_fenced_acquire%");
q1($s1, "SELECT rlock_release('fence')");
my $out = $s2->query_until(qr/token=\d+\n/, '');
my ($waited) = $out =~ /token=(\d+)/;
push @tokens, [ 'server 2 after waiting', $waited ];
q1($s2, "SELECT rlock_release('fence')");

# ---- a Redisson RFencedLock client on the same Redis ----

# Redisson's fenced acquire: the RLock acquire, plus INCR of the token
# counter on success, returning {nil, token} / {pttl, nil}; written from
# PROTOCOL.md.  Its release is the RLock release.
my $java_acquire = <<'LUA';
if (redis.call('exists', KEYS[1]) == 0) or
   (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return redis.call('incr', KEYS[2])
end
return -redis.call('pttl', KEYS[1])
LUA
my $java_release = <<'LUA';
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then return nil end
if redis.call('hincrby', KEYS[1], ARGV[2], -1) > 0 then return 0 end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
return 1
LUA
my $java = '0b7e4c1a-9d2f-4a6b-8c3e-5f1a2b3c4d5e:31';

my $jt = $redis->eval($java_acquire, [ 'fence', 'redisson_lock_token:{fence}' ],
	60000, $java);
push @tokens, [ 'Redisson client acquires', $jt ];
is(q1($s1, "SELECT rlock_fenced_try_acquire('fence', '1 minute') IS NULL"),
	't', 'the Redisson client holds the lock: rlock gets no token');
$s1->query_until(qr/waiting\n/,
	"\\echo waiting\nSELECT 'token=' || rlock_fenced_acquire('fence', '1 minute');\n");
RlockTest::wait_for_rlock_waiters($node1, 'postgres', 1, "%rlock_fenced_acquire%");
is($redis->eval($java_release, [ 'fence', 'redisson_lock__channel:{fence}' ], '0', $java),
	'1', 'the Redisson client releases');
$out = $s1->query_until(qr/token=\d+\n/, '');
($waited) = $out =~ /token=(\d+)/;
push @tokens, [ 'server 1 woken by the Redisson release', $waited ];
is(q1($s2, "SELECT rlock_fenced_token('fence')"), $waited,
	'rlock_fenced_token reads the last token, on the other server too');
q1($s1, "SELECT rlock_release('fence')");
$jt = $redis->eval($java_acquire, [ 'fence', 'redisson_lock_token:{fence}' ],
	60000, $java);
push @tokens, [ 'Redisson client acquires again', $jt ];
$redis->eval($java_release, [ 'fence', 'redisson_lock__channel:{fence}' ], '0', $java);

# ---- one increasing sequence ----

my $ok = 1;
for my $i (0 .. $#tokens)
{
	my ($who, $t) = @{ $tokens[$i] };
	if (!defined $t || $t !~ /^\d+$/
		|| ($i > 0 && $t <= $tokens[ $i - 1 ][1]))
	{
		$ok = 0;
		diag("not increasing at $who: " . ($t // 'undef'));
	}
}
ok($ok,
	'fencing tokens strictly increase across ' . scalar(@tokens)
	  . ' acquisitions by two servers and a Redisson client: '
	  . join(' ', map { $_->[1] // '?' } @tokens));

$s1->quit;
$s2->quit;
$node1->stop;
$node2->stop;
$redis->stop;
done_testing();
