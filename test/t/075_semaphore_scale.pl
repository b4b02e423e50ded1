# Copyright (c) 2026, rlock developers
#
# A semaphore's cost as the permits out grow (SPEC.md 9, "Cost as work
# grows"; issue 44): rlock's scripts find a session's permits by id
# (ZSCORE "<holder>:1", "<holder>:2", ...: scripts_sync.c, SEM_MINE; the
# renew script's 's'/'t'), never by reading the whole {N}:timeout.
#
# The cost, structurally (no timing): Redis's MONITOR shows that one
# try_acquire + release issues the same commands inside its scripts with 10
# and with 10 000 permits out, and that no command of any script reads the
# whole {N}:timeout (ZRANGE ... 0 -1).
#
# The behaviour, the same with 10 and with 10 000 permits out (most held
# by Java-side clients, RlockTest::Redisson's raw 16-byte ids put in with
# one EVAL; some by other rlock sessions, one of them renewed by the
# watchdog): try_acquire, acquire, reentrant counts, release, the check
# before COMMIT, the watchdog's renewal, the reconcile after an
# interrupted call (its reply held by a proxy, the call cancelled, the
# next call gives back what it took); Java's permits untouched and counted right; expired
# permits (Java's and a dead rlock holder's) reclaimed; a permit of the
# session's deleted in Redis reported lost (the same WARNING, and the same
# refused COMMIT, SQLSTATE 40000); a gap made by Redisson's reclaim with
# LIMIT (two of five expired permits of the session) reported lost too.
# After every step the total is conserved: available + out = the size.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use RlockTest;

my $redis = RlockTest::Redis->new;
# (through a proxy that can hold Redis's replies: the interrupted call)
my $proxy = RlockTest::Proxy->new($redis);
# (a watchdog timeout long enough that no renewal is missed for good
# while the proxy holds every reply, the watchdog's too, for a moment)
my $node = RlockTest::new_node('semscale', $proxy, watchdog_timeout => '10s');

my $a = $node->background_psql('postgres', on_error_stop => 0);
my $b = $node->background_psql('postgres', on_error_stop => 0);
my $c = $node->background_psql('postgres', on_error_stop => 0);
my $ha = RlockTest::holder_of($a);
my $hc = RlockTest::holder_of($c);
my $a_pid = $a->query_safe('SELECT pg_backend_pid()');
chomp $a_pid;

sub q1
{
	my ($s, $sql) = @_;
	my ($out, $err, $state) = RlockTest::run_sql($s, $sql);
	diag("$sql: $state $err") if $state ne '00000';
	return $out;
}

sub epoch_ms { return int(time() * 1000); }

# n Java-side permits (raw 16-byte ids, as Redisson's) scored $score, in
# one EVAL, taken from the permits available as Redisson's tryAcquire does
my $java_fill = <<'LUA';
local n = tonumber(ARGV[1])
for i = 1, n do
  local h = string.sub(redis.sha1hex(ARGV[3] .. ':' .. i), 1, 32)
  local id = string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)
  redis.call('zadd', KEYS[2], ARGV[2], id)
end
redis.call('decrby', KEYS[1], n)
return redis.call('zcard', KEYS[2])
LUA

sub java_fill
{
	my ($name, $n, $score, $seed) = @_;
	return $redis->eval($java_fill, [ $name, "{$name}:timeout" ], $n, $score,
		$seed // "$name-java");
}

# the test's own count (a scan is fine here): Java's ids, 16 raw bytes
my $java_count = <<'LUA';
local n = 0
for _, m in ipairs(redis.call('zrange', KEYS[1], 0, -1)) do
  if #m == 16 then n = n + 1 end
end
return n
LUA

sub java_count { return $redis->eval($java_count, ["{$_[0]}:timeout"]); }

# available + out, the semaphore's size when nothing was lost from it
sub total
{
	my ($name) = @_;
	return ($redis->cli('GET', $name) // 0) + $redis->cli('ZCARD', "{$name}:timeout");
}

# which of the holder's ids 1..$upto Redis has, e.g. "1 2 3"
sub ids_of
{
	my ($name, $holder, $upto) = @_;
	return join(' ', grep {
			($redis->cli('ZSCORE', "{$name}:timeout", "$holder:$_") // '') ne ''
		} 1 .. $upto);
}

# ---- the sizes ----

# name => [Java's permits, b's (1 hour lease), c's (NULL lease: renewed)]
my %shape = (small => [ 4, 3, 3 ], big => [ 9990, 5, 5 ]);
my $SPARE = 20;
my %size;

foreach my $name (qw(small big))
{
	my ($java, $nb, $nc) = @{ $shape{$name} };
	my $out = $java + $nb + $nc;
	$size{$name} = $out + $SPARE;
	is(q1($a, "SELECT rlock_semaphore_set_permits('$name', $size{$name})"), 't',
		"$name: $size{$name} permits set");
	is(java_fill($name, $java, 9999999999999), $java, "$name: $java Java-side permits out");
	q1($b, "SELECT rlock_semaphore_acquire('$name', $nb, '1 hour')");
	q1($c, "SELECT rlock_semaphore_acquire('$name', $nc)");
	is($redis->cli('ZCARD', "{$name}:timeout"), $out, "$name: $out permits out in all");
	is(q1($a, "SELECT rlock_semaphore_available('$name')"), $SPARE,
		"$name: $SPARE available");
}

# ---- the cost: the same commands with 10 and 10 000 out, no full read ----

# the commands scripts ran that read the whole of a {N}:timeout
sub full_reads
{
	my ($buf) = @_;
	return grep { /^\d+\.\d+ \[\d+ lua\] "zrange" "[^"]*:timeout" "0" "-1"/i }
	  split /\n/, $buf;
}

# The commands Redis ran inside the scripts of one try_acquire + release of
# session a, caught with MONITOR: a script's commands follow its EVALSHA
# line ("[db lua]"), nothing runs between them.  Returns (the lua commands
# of a's scripts, their count, every lua line seen).
sub pair_commands
{
	my ($name) = @_;
	my $m = $redis->monitor_start;
	my ($out) = q1($a,
		"SELECT rlock_semaphore_try_acquire('$name'), rlock_semaphore_release('$name')");
	my $buf = $redis->monitor_stop($m);

	my (@mine, @lua);
	my $ours = 0;
	my $scripts = 0;
	foreach my $line (split /\n/, $buf)
	{
		next unless $line =~ /^\d+\.\d+ \[\d+ ([^\]]+)\] (.*)$/;
		my ($who, $cmd) = ($1, $2);
		if ($who eq 'lua')
		{
			push @lua, $cmd;
			next unless $ours;
			# (an EVALSHA refused NOSCRIPT ran nothing: count those that ran)
			$scripts++ if $ours == 1;
			$ours = 2;
			push @mine, $cmd;
			next;
		}
		$ours = ($cmd =~ /^"eval(sha)?"/i && index($cmd, "\"$ha\"") >= 0) ? 1 : 0;
	}
	return ($out, $scripts, \@mine, $buf);
}

# (Redis has every script cached: none is sent as EVAL after a NOSCRIPT)
is(q1($a, "SELECT rlock_semaphore_set_permits('warm', 1), rlock_semaphore_try_acquire('warm'), rlock_semaphore_release('warm')"),
	't|t|t', 'the scripts are warm');
my %pair;
foreach my $name (qw(small big))
{
	my ($out, $scripts, $mine, $buf) = pair_commands($name);
	is($out, 't|t', "$name: try_acquire + release");
	is($scripts, 2, "$name: two scripts of the session's");
	# a command's verb and how many arguments, not their values
	$pair{$name} = join(',', map { my @w = /"((?:[^"\\]|\\.)*)"/g; lc($w[0]) . '/' . scalar(@w) } @$mine);
	my @full = full_reads($buf);
	is(scalar(@full), 0, "$name: no script read the whole {N}:timeout (ZRANGE 0 -1)")
	  or diag(join("\n", @full[ 0 .. ($#full < 3 ? $#full : 3) ]));
	note "$name: " . scalar(@$mine) . " commands: $pair{$name}";
}
is($pair{big}, $pair{small},
	'the same commands inside the scripts with 10 000 permits out as with 10');

# ---- the behaviour, the same with 10 and 10 000 out ----

my %said;
foreach my $name (qw(small big))
{
	my ($java, $nb, $nc) = @{ $shape{$name} };
	my $out = $java + $nb + $nc;
	my ($o, $e, $st);

	is(q1($a, "SELECT rlock_semaphore_try_acquire('$name', 3)"), 't', "$name: try_acquire 3");
	q1($a, "SELECT rlock_semaphore_acquire('$name', 2)");
	is(q1($a, "SELECT hold_count FROM rlock_locks WHERE name = '$name' AND pid = pg_backend_pid()"), '5',
		"$name: reentrant: the session holds 5");
	is(ids_of($name, $ha, 7), '1 2 3 4 5', "$name: its ids 1..5 in Redis");
	is(q1($a, "SELECT rlock_semaphore_release('$name', 2)"), 't', "$name: gives back 2");
	is(ids_of($name, $ha, 7), '1 2 3', "$name: the highest two went");
	is(q1($a, "SELECT rlock_semaphore_available('$name')"), $SPARE - 3, "$name: available");
	is(q1($a, "SELECT rlock_semaphore_try_acquire('$name', " . ($SPARE - 2) . ")"), 'f',
		"$name: more than available: refused");
	is(total($name), $size{$name}, "$name: available + out = size");

	# transaction permits: the check before COMMIT (the renew script)
	my $m = $redis->monitor_start;
	($o, $e, $st) = RlockTest::run_sql($a,
		"BEGIN; SELECT rlock_semaphore_xact_acquire('$name', 2, '1 hour'); COMMIT");
	is($st, '00000', "$name: the check before COMMIT passes") or diag($e);
	my $buf = $redis->monitor_stop($m);
	like($buf, qr/\[\d+ lua\] "zscore" "\{$name\}:timeout" "\Q$ha\E:5"/,
		"$name: the check before COMMIT looked for the session's permits by id");
	is(scalar(full_reads($buf)), 0, "$name: ... not by reading them all");
	is(ids_of($name, $ha, 7), '1 2 3', "$name: the transaction's permits given back at its end");

	# the watchdog's renewal of c's permits (NULL lease)
	$m = $redis->monitor_start;
	my $before = $redis->cli('ZSCORE', "{$name}:timeout", "$hc:1");
	ok( RlockTest::wait_until(
			sub { $redis->cli('ZSCORE', "{$name}:timeout", "$hc:1") > $before }, 60),
		"$name: the watchdog renews the other session's permits");
	$buf = $redis->monitor_stop($m);
	like($buf, qr/\[\d+ lua\] "zadd" "\{$name\}:timeout" "xx" "\d+" "\Q$hc\E:1"/,
		"$name: (the renewal seen)");
	is(scalar(full_reads($buf)), 0, "$name: the renewal read no whole {N}:timeout");
	my $s1 = $redis->cli('ZSCORE', "{$name}:timeout", "$hc:1");
	ok(RlockTest::wait_until(
			sub {
				my %sc = map { ($redis->cli('ZSCORE', "{$name}:timeout", "$hc:$_") // '') => 1 } 1 .. $nc;
				return scalar(keys %sc) == 1 && !exists $sc{''};
			}, 60),
		"$name: all $nc of them, at one expiry");

	# Java's permits untouched, counted right by rlock and by Java
	is(java_count($name), $java, "$name: Java's $java permits still out");
	is($redis->cli('ZCOUNT', "{$name}:timeout", 9999999999999, 9999999999999), $java,
		"$name: at their own score");
	is(RlockTest::Redisson::sem_available($redis, $name), $SPARE - 3,
		"$name: Java's availablePermits agrees");

	# expired permits: 3 of Java's and 2 of a dead rlock holder's
	java_fill($name, 3, 1000, "$name-expired");
	$redis->cli('ZADD', "{$name}:timeout", 1000, "dead-holder:1", 1000, "dead-holder:2");
	$redis->cli('DECRBY', $name, 2);
	is(q1($a, "SELECT rlock_semaphore_available('$name')"), $SPARE - 3,
		"$name: expired permits count as available");
	is(q1($a, "SELECT rlock_semaphore_try_acquire('$name', 1)"), 't',
		"$name: an acquisition reclaims them");
	is($redis->cli('ZCOUNT', "{$name}:timeout", 0, epoch_ms()), 0, "$name: none expired left");
	is($redis->cli('GET', $name), $SPARE - 4, "$name: the permits available, right");
	is(q1($a, "SELECT rlock_semaphore_release('$name', 1)"), 't', "$name: given back");
	is(total($name), $size{$name}, "$name: available + out = size");

	# the reconcile after an interrupted call: the acquisition runs in
	# Redis, its reply is held (the proxy), the statement is cancelled
	# (the session waits for the reply until it is cancelled)
	RlockTest::run_sql($a, "SET rlock.command_timeout = '1min'");
	$proxy->stall_replies;
	$a->{stderr} = '';
	$a->query_until(qr/asking\n/,
		"\\echo asking\nSELECT rlock_semaphore_try_acquire('$name', 2);\n");
	ok(RlockTest::wait_until(sub { ids_of($name, $ha, 7) eq '1 2 3 4 5' }, 60),
		"$name: an acquisition ran in Redis (ids 1..5), its reply held");
	$b->query_safe("SELECT pg_cancel_backend($a_pid)");
	ok( RlockTest::wait_until(
			sub {
				$a->{run}->pump_nb;
				return $a->{stderr} =~ /canceling statement due to user request/;
			},
			60),
		"$name: the session stops waiting for the reply (cancelled)");
	$proxy->resume;
	RlockTest::run_sql($a, 'RESET rlock.command_timeout');
	is(q1($a, "SELECT rlock_semaphore_available('$name')"), $SPARE - 3,
		"$name: the next call reconciles: the two given back");
	is(ids_of($name, $ha, 7), '1 2 3', "$name: Redis has the session's 3");
	is(q1($a, "SELECT hold_count FROM rlock_locks WHERE name = '$name' AND pid = pg_backend_pid()"), '3',
		"$name: as the session believes");
	is(total($name), $size{$name}, "$name: available + out = size");

	# a permit of the session's deleted in Redis (a hole at 2): lost
	$redis->cli('ZREM', "{$name}:timeout", "$ha:2");
	$redis->cli('INCRBY', $name, 1);
	($o, $e) = RlockTest::query_err($a, "SELECT rlock_semaphore_release('$name', 3)");
	is($o, 'f', "$name: the release finds one gone: false");
	($said{$name}{release}) = $e =~ /(WARNING:  .*)/;
	$said{$name}{release} =~ s/\Q$name\E/N/g;
	like($e, qr/WARNING:  permits of semaphore "$name" were lost/, "$name: with a WARNING");
	is(ids_of($name, $ha, 7), '', "$name: the rest given back");
	is(total($name), $size{$name}, "$name: available + out = size");

	# ... and transaction permits, one deleted (a hole at 1): COMMIT refused
	($o, $e, $st) = RlockTest::run_sql($a,
		"BEGIN; SELECT rlock_semaphore_xact_acquire('$name', 2, '1 hour')");
	$redis->cli('ZREM', "{$name}:timeout", "$ha:1");
	$redis->cli('INCRBY', $name, 1);
	($o, $e, $st) = RlockTest::run_sql($a, 'COMMIT');
	is($st, '40000', "$name: COMMIT refused, SQLSTATE 40000");
	($said{$name}{commit}) = $e =~ /(ERROR:  .*)/;
	$said{$name}{commit} =~ s/\Q$name\E/N/g;
	like($e, qr/ERROR:  cannot commit: permits of semaphore "$name" held by this transaction were lost/,
		"$name: the permits were lost");
	is(ids_of($name, $ha, 7), '', "$name: the one left (past the hole) given back");
	is(total($name), $size{$name}, "$name: available + out = size");

	# Redisson's reclaim with LIMIT takes 2 of the session's 5 expired
	# permits (the lowest scored; its ids in order): a gap at 1..2
	is(q1($a, "SELECT rlock_semaphore_try_acquire('$name', 5, '1 hour')"), 't',
		"$name: the session takes 5");
	$redis->cli('ZADD', "{$name}:timeout", 'XX', map { (1000, "$ha:$_") } 1 .. 5);
	my ($jids, $answer) = RlockTest::Redisson::sem_try_acquire($redis, $name, 2, 600000);
	is($answer, 'OK', "$name: Java's tryAcquire(2) reclaims two of them and takes 2");
	is(ids_of($name, $ha, 7), '3 4 5', "$name: a gap: the session's 1 and 2 gone");
	($o, $e) = RlockTest::query_err($a, "SELECT rlock_semaphore_release('$name', 5)");
	is($o, 'f', "$name: the release reports them lost");
	like($e, qr/WARNING:  permits of semaphore "$name" were lost/, "$name: with a WARNING");
	is(ids_of($name, $ha, 7), '', "$name: none of the session's left");
	is(total($name), $size{$name}, "$name: available + out = size (nothing lost from the total)");
	is(q1($a, "SELECT count(*) FROM rlock_locks WHERE name = '$name' AND pid = pg_backend_pid()"), '0',
		"$name: the session holds nothing of it");
	is(java_count($name), $java + 2, "$name: Java has its permits and the two it took");
}
is($said{big}{release}, $said{small}{release}, 'the same WARNING with 10 000 out as with 10');
is($said{big}{commit}, $said{small}{commit}, 'the same refusal of COMMIT');

$_->quit foreach ($a, $b, $c);
$node->stop;
$proxy->stop;
done_testing();
