# Copyright (c) 2026, rlock developers
#
# Redlock (section 5.3 of the spec, PROTOCOL.md "Multi-lock and Redlock"):
# rlock_redlock_* over five independent standalone masters
# (rlock.redlock_urls), each in another URL form: redis:// (plain),
# rediss:// (TLS with a client certificate), unix:// (a Unix socket),
# redis://:password@host:port/3 (a password and a database index), and a
# plain one again.  rlock.redis_url names a sixth Redis, which Redlock never
# uses.  On each master the lock is Redisson's exclusive lock: hash <name>,
# field rlock_holder_id() -> count, TTL = lease.
#
#   a) All masters free: the lock is on every master (each URL form works,
#      master 3 keeps it in database 3), rlock_locks shows kind 'redlock';
#      release leaves nothing.
#   b) Quorum (as redsync's quorum test): for each of the 32 subsets of the
#      five masters, those of the subset are made unavailable, each either
#      stopped (SIGSTOP) or locked by a Redisson client (foreign holder),
#      alternating so that both kinds and mixes occur.  try_acquire returns
#      true exactly when at least 3 masters are free, within
#      command_timeout + connect_timeout (+ slack) however many are stopped;
#      when true the lock is on every free master, rlock_locks shows it held
#      and release returns true.  Afterwards (and when false) nothing of this
#      session's holder is on the masters that could be reached, and a
#      Redisson holder's field is untouched.  A stopped master may run the
#      acquisition script it had been sent once it goes on again, after the
#      attempt gave up on it (lock_redlock.c: "a master that does not answer
#      keeps the lock until its lease runs out"): what it keeps must then
#      be this holder's field with at most the lease as TTL, and be gone
#      within the lease.  Such a late grant is put right by the next release
#      of the name (rl_late).
#   c) The watchdog (rlock.watchdog_timeout 3 s): a Redlock taken without a
#      lease is renewed on every master; masters killed (SIGKILL) one after
#      the other: with 4 and with 3 left it is still held (renewed on the
#      survivors, still there more than a lease after the kill, another
#      session cannot take it); with 2 left it is reported lost (rlock_locks
#      state 'lost', a log line naming it) and release returns false with a
#      WARNING; it does not stay on the survivors, and a try_acquire is an
#      ERROR (08001: three masters refuse the connection).  The masters started
#      again (empty), the name can be taken again.  The same when the key
#      disappears from masters (DEL, as after a restart without
#      persistence): held while 3 have it, lost when only 2 do.
#   d) Redisson: a client holding the name (RLock) on 3 of the 5 masters
#      excludes rlock's Redlock, on 2 it does not; while rlock holds the
#      Redlock, a RedissonRedLock's RLock fails on at least 3 masters.
#   e) Transaction level: xact_acquire / xact_try_acquire hold on every
#      master until COMMIT / ROLLBACK, then nothing is left.  A blocking
#      rlock_redlock_acquire in another session waits (pg_stat_activity)
#      and gets the lock once it is released, on at least a majority of the
#      masters (woken by the first master's release message, it may ask the
#      others before the release reached them); try_acquire with a wait
#      gives up after it.
#   f) rlock.redlock_urls empty: every rlock_redlock_* function raises an
#      ERROR with SQLSTATE 55000 naming the setting.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use RlockTest;
use RlockTest::Redlock;

# a Redisson client's holder: <client uuid>:<thread id>
my $foreign = '6f1c2b9e-3d4a-4e5f-8a7b-9c0d1e2f3a4b:57';
# rlock.command_timeout and rlock.connect_timeout of the sessions that
# meet stopped masters
my $short_ms = 300;
# what a call may take beyond them (process start-up, psql, a loaded machine)
my $slack_s = 1.0;
my $watchdog_s = 3;    # rlock.watchdog_timeout: renewals every second

my $rl = RlockTest::Redlock->new(
	masters => [
		{},                                          # 0 redis://
		{ tls => 1 },                                # 1 rediss://, client certificate
		{ unix => 1 },                               # 2 unix:///.../redis.sock
		{ password => 'redlock-secret-3', db => 3 }, # 3 redis://:pw@host:port/3
		{},                                          # 4 redis://
	]);
my $N = $rl->n;
my $quorum = int($N / 2) + 1;
my $tls = $rl->master(1);
my $home = RlockTest::Redis->new;    # rlock.redis_url: not a Redlock master

my $node = RlockTest::new_node('redlock', $home,
	watchdog_timeout => "${watchdog_s}s",
	extra_conf => "rlock.redlock_urls = '" . $rl->urls . "'\n"
	  . "rlock.tls_ca_file = '" . $tls->ca_file . "'\n"
	  . "rlock.tls_cert_file = '" . $tls->client_cert_file . "'\n"
	  . "rlock.tls_key_file = '" . $tls->client_key_file . "'\n"
	  . "rlock.command_timeout = '1s'\n"
	  . "rlock.connect_timeout = '1s'\n");
note 'rlock.redlock_urls = ' . $rl->urls;

sub session { return $node->background_psql('postgres', on_error_stop => 0); }

sub q1
{
	my ($sess, $sql) = @_;
	my ($o, $e) = RlockTest::query_err($sess, $sql);
	note "$sql: $e" if $e ne '';
	return $o;
}

my @all = (0 .. $N - 1);

# What master $i has of lock $name: 'none' (no key), 'down' (the cli could
# not ask), else "field=count,..." sorted, with this file's holders named
# ("me" for $me, "java" for the Redisson client, "other" for the rest).
sub state_on
{
	my ($i, $name, $me) = @_;
	my $f = $rl->fields($i, $name);
	return 'down' unless defined $f;
	return 'none' unless %$f;
	return join(',',
		map {
			my $who = $_ eq $me ? 'me' : $_ eq $foreign ? 'java' : 'other';
			"$who=$f->{$_}";
		} sort keys %$f);
}

# state_on for each master of @$idx, as "i:state i:state ..."
sub states
{
	my ($idx, $name, $me) = @_;
	return join(' ', map { "$_:" . state_on($_, $name, $me) } @$idx);
}

sub expect_states
{
	my ($idx, $state) = @_;
	return join(' ', map { "$_:$state" } @$idx);
}

# The log lines of $node from $offset that contain "lost" and the name.
sub lost_lines
{
	my ($offset, $name) = @_;
	return grep { /lost/ && /(?<![\w])\Q$name\E(?![\w])/ }
	  split /\n/, slurp_file($node->logfile, $offset);
}

my ($out, $err, $state, $t0, $elapsed, $ok);

# ---- a) every master free; the URL forms ----

like($rl->url(0), qr{^redis://127\.0\.0\.1:\d+/0$}, 'master 0: redis://host:port/0');
like($rl->url(1), qr{^rediss://127\.0\.0\.1:\d+/0$}, 'master 1: rediss:// (TLS)');
like($rl->url(2), qr{^unix:///\S+\.sock$}, 'master 2: unix:///path.sock');
like($rl->url(3), qr{^redis://:[^@]+\@127\.0\.0\.1:\d+/3$},
	'master 3: redis://:password@host:port/3');

my $s = session();
my $mon = session();
my $me = RlockTest::holder_of($s);
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_redlock_try_acquire('rl_first', '30s')");
is("$out/$err", 't/', 'rlock_redlock_try_acquire over the five masters')
  or RlockTest::stop_file('rlock_redlock_try_acquire does not work');
foreach my $i (@all)
{
	is(state_on($i, 'rl_first', $me), 'me=1',
		$rl->describe($i) . ': the hash holds field rlock_holder_id() = 1');
	my $pttl = $rl->cli($i, 'PTTL', 'rl_first');
	ok($pttl =~ /^\d+$/ && $pttl > 20000 && $pttl <= 30000,
		$rl->describe($i) . ": with the lease as TTL ($pttl ms)");
}
is($rl->master(3)->cli('EXISTS', 'rl_first'), '0',
	'master 3 keeps it in database 3 (the URL\'s), not in 0');
is(q1($mon, "SELECT kind, scope, state, holder = '$me' FROM rlock_locks WHERE name = 'rl_first'"),
	'redlock|session|held|t', 'rlock_locks: kind redlock, scope session, held, this holder');
# the introspection functions ask the masters of a Redlock this session
# holds (rlock.redis_url's Redis has nothing of it): what a majority has
my $intro = "SELECT rlock_is_held('rl_first'), rlock_hold_count('rl_first'), "
  . "rlock_is_locked('rl_first'), rlock_remaining_lease('rl_first') > '20 s'";
is(q1($s, $intro), 't|1|t|t',
	'is_held, hold_count 1, is_locked, a remaining lease from the masters');
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_redlock_try_acquire('rl_first', '30s')");
is("$out/$err", 't/', 're-entered');
$rl->cli($_, 'DEL', 'rl_first') for (0, 1);
is(q1($s, $intro), 't|2|t|t', '... 2 holds while a majority (3 of 5) has them');
$rl->cli(2, 'DEL', 'rl_first');
is(q1($s, "SELECT rlock_is_held('rl_first'), rlock_hold_count('rl_first')"), 'f|0',
	'... none once only 2 of 5 have them');
is($home->cli('EXISTS', 'rl_first'), '0', "rlock.redis_url's Redis was never written");
($out, $err) = RlockTest::run_sql($s,
	"SELECT rlock_redlock_release('rl_first'), rlock_redlock_release('rl_first')");
like($out, qr/^[tf]\|[tf]$/, 'rlock_redlock_release, twice (the lock was cut to a minority)');
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_redlock_try_acquire('rl_first', '30s')");
is("$out/$err", 't/', 'taken again on the five masters');
is(q1($s, $intro), 't|1|t|t', '... the introspection functions say so');
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_redlock_release('rl_first')");
is("$out/$err", 't/', 'rlock_redlock_release returns true');
is(q1($s, "SELECT rlock_is_held('rl_first'), rlock_hold_count('rl_first'), rlock_is_locked('rl_first')"),
	'f|0|f', '... and then none is held, nothing locked');
is(states(\@all, 'rl_first', $me), expect_states(\@all, 'none'), 'nothing is left on any master');
is(q1($mon, "SELECT count(*) FROM rlock_locks WHERE name = 'rl_first'"), '0',
	'nor in rlock_locks');

# ---- b) quorum: every subset of unavailable masters ----

q1($s, "SET rlock.command_timeout = '${short_ms}ms'");
q1($s, "SET rlock.connect_timeout = '${short_ms}ms'");
# A stopped master may run the acquisition script once it goes on again,
# after the attempt gave up on it: what it keeps then expires with this
# lease (nobody renews it).  Short, so that part b can wait for that.
my $lease_ms = 5000;
my $bound_s = 2 * $short_ms / 1000 + $slack_s;
my %kinds;
my @names;
my $late = 0;    # stopped masters that kept something once resumed
my $t_part = time();
foreach my $mask (0 .. 2**$N - 1)
{
	my $name = sprintf('rl_quorum_%02d', $mask);
	push @names, $name;
	my (@stopped, @locked, @free);
	foreach my $i (@all)
	{
		if (!($mask & (1 << $i))) { push @free, $i; }
		elsif (($mask + $i) % 2) { push @stopped, $i; }
		else { push @locked, $i; }
	}
	$kinds{ (@stopped ? 'stopped' : '') . (@stopped && @locked ? '+' : '')
		  . (@locked ? 'locked' : '') || 'none' }++;
	my $what = sprintf('subset %02d (stopped: %s; locked by Redisson: %s)',
		$mask, @stopped ? join(',', @stopped) : '-',
		@locked ? join(',', @locked) : '-');
	my $expect = @free >= $quorum ? 't' : 'f';
	my @reachable = sort { $a <=> $b } (@free, @locked);

	my @got = map { $rl->try_lock($_, $name, 60000, $foreign) } @locked;
	is(join(',', @got), join(',', ('') x @locked),
		"$what: the Redisson client takes the name on its masters")
	  if @locked;
	$rl->pause($_) foreach @stopped;

	$t0 = time();
	($out, $err) = RlockTest::run_sql($s,
		"SELECT rlock_redlock_try_acquire('$name', '${lease_ms}ms')");
	$elapsed = time() - $t0;
	is("$out/$err", "$expect/",
		"$what: try_acquire returns $expect (" . scalar(@free) . " free)");
	if (@stopped)
	{
		cmp_ok($elapsed, '<', $bound_s,
			sprintf('%s: answered in %.3f s (command/connect timeouts %d ms)',
				$what, $elapsed, $short_ms));
	}
	if ($expect eq 't')
	{
		is(states(\@free, $name, $me), expect_states(\@free, 'me=1'),
			"$what: the lock is on every free master");
		is(q1($mon, "SELECT kind, state FROM rlock_locks WHERE name = '$name'"),
			'redlock|held', "$what: rlock_locks shows it held");
		$t0 = time();
		($out, $err) = RlockTest::run_sql($s, "SELECT rlock_redlock_release('$name')");
		is($out, 't', "$what: release returns true");
		note sprintf('%s: release took %.3f s%s', $what, time() - $t0,
			$err ne '' ? ": $err" : '');
	}
	else
	{
		is(q1($mon, "SELECT count(*) FROM rlock_locks WHERE name = '$name'"), '0',
			"$what: nothing in rlock_locks");
	}
	# the reachable masters, while the others are still stopped
	is(states(\@reachable, $name, $me),
		join(' ', map { "$_:" . ($mask & (1 << $_) ? 'java=1' : 'none') } @reachable),
		"$what: nothing of this holder on the reachable masters, the Redisson holder's field untouched")
	  if @reachable;
	if (@stopped)
	{
		$rl->resume_all;
		# a new connection answered: the resumed master has also read
		# what had waited in its old connections
		$rl->cli($_, 'PING') foreach @stopped;
		my @kept;
		foreach my $i (@stopped)
		{
			my $st = state_on($i, $name, $me);
			next if $st eq 'none';
			my $pttl = $rl->cli($i, 'PTTL', $name);
			push @kept, "$i:$st,pttl=$pttl";
		}
		$late += @kept;
		note "$what: resumed, kept by the stopped masters: @kept" if @kept;
		is(scalar(grep { !/^\d:me=1,pttl=(\d+)$/ || $1 < 1 || $1 > $lease_ms } @kept), 0,
			"$what: resumed, the stopped masters have nothing of it, or it expires with its lease");
	}
}
note sprintf('part b took %.1f s; subsets by kind of unavailability: %s; '
	  . 'stopped masters that ran the acquisition late: %d',
	time() - $t_part, join(', ', map { "$_ $kinds{$_}" } sort keys %kinds), $late);
ok($kinds{'stopped+locked'} && $kinds{stopped} && $kinds{locked},
	'stopped masters, masters locked by Redisson, and mixes of both were tried');
my @left;
$ok = RlockTest::wait_until(
	sub {
		@left = ();
		foreach my $name (@names)
		{
			foreach my $i (@all)
			{
				push @left, "$name on $i" if state_on($i, $name, $me) =~ /\bme=/;
			}
		}
		!@left;
	},
	$lease_ms / 1000 + 10);
ok($ok, 'within the lease no name of part b has this holder\'s field on any master'
	  . (@left ? ' (left: ' . join('; ', @left) . ')' : ''));

# A master that ran the acquisition late has it put right by the release.
my $ll = 'rl_late';
# (a connection to master 0 that works: the script is sent to it)
($out, $err) = RlockTest::run_sql($s,
	"SELECT rlock_redlock_try_acquire('$ll', '60s'), rlock_redlock_release('$ll')");
is("$out/$err", 't|t/', "\"$ll\" taken and released with every master up");
$rl->pause(0);
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_redlock_try_acquire('$ll', '60s')");
is("$out/$err", 't/', 'master 0 stopped: try_acquire (lease 60 s) on the other 4');
$rl->resume(0);
$rl->cli(0, 'PING');
is(state_on(0, $ll, $me), 'me=1',
	'master 0 resumed: it ran the acquisition it had been sent (the attempt had given up on it)');
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_redlock_release('$ll')");
is("$out/$err", 't/', 'master 0 resumed: release returns true');
is(states(\@all, $ll, $me), expect_states(\@all, 'none'),
	'and leaves nothing on any master, master 0 included');

# ---- c) the watchdog: masters killed during a hold ----

my $sa = session();
my $sb = session();
my $ha = RlockTest::holder_of($sa);
my $lk = 'rl_watchdog';
($out, $err) = RlockTest::run_sql($sa, "SELECT rlock_redlock_acquire('$lk')");
is("$out/$err", '/', "rlock_redlock_acquire('$lk') without a lease");
is(states(\@all, $lk, $ha), expect_states(\@all, 'me=1'), 'held on every master');
my ($renewed, $low) = $rl->all_renewed(\@all, $lk, 30);
ok($renewed, 'the watchdog renews it on every master (PTTL went up from '
	  . join(', ', map { "$_: $low->{$_} ms" } sort keys %$low) . ')');

my @alive = @all;
foreach my $victim (4, 3)
{
	$rl->kill_master($victim);
	my $t_kill = time();
	@alive = grep { $_ != $victim } @alive;
	my $what = scalar(@alive) . ' masters left';
	($renewed, $low) = $rl->all_renewed(\@alive, $lk, 30);
	ok($renewed, "$what: still renewed on each of them (PTTL went up from "
		  . join(', ', map { "$_: $low->{$_} ms" } sort keys %$low) . ')');
	# more than a lease after the kill: without renewals since, it would be gone
	my $until = $t_kill + $watchdog_s + 1;
	usleep(1e6 * ($until - time())) if time() < $until;
	is(states(\@alive, $lk, $ha), expect_states(\@alive, 'me=1'),
		"$what: it is on each of them more than a lease after the kill");
	my $pttls = join(',', map { scalar $rl->cli($_, 'PTTL', $lk) } @alive);
	ok(!grep({ !/^\d+$/ || $_ <= 0 } split /,/, $pttls), "$what: with a TTL ($pttls ms)");
	is(q1($mon, "SELECT state FROM rlock_locks WHERE name = '$lk'"), 'held',
		"$what: rlock_locks says held");
	($out, $err) = RlockTest::run_sql($sb, "SELECT rlock_redlock_try_acquire('$lk', '30s')");
	is("$out/$err", 'f/', "$what: another session cannot take it");
	is(states(\@alive, $lk, $ha), expect_states(\@alive, 'me=1'),
		"$what: and left nothing of its own");
}

my $log_offset = -s $node->logfile;
$rl->kill_master(1);
my $t_kill = time();
@alive = grep { $_ != 1 } @alive;
$ok = RlockTest::wait_until(
	sub { q1($mon, "SELECT state FROM rlock_locks WHERE name = '$lk'") eq 'lost' }, 30);
ok($ok, 'a third master killed (2 of 5 left): rlock_locks reports the lock lost');
note sprintf('reported lost %.1f s after the kill', time() - $t_kill);
my @lines;
RlockTest::wait_until(sub { @lines = lost_lines($log_offset, $lk); @lines }, 10);
ok(scalar(@lines), "the server log has a line saying \"$lk\" was lost");
note "log: $_" foreach @lines;
($out, $err) = RlockTest::run_sql($sa, "SELECT rlock_redlock_release('$lk')");
is($out, 'f', 'rlock_redlock_release of the lost lock returns false');
like($err, qr/WARNING:  .*\Q$lk\E/, '... with a WARNING naming it');
note "release: $err";
is(q1($mon, "SELECT count(*) FROM rlock_locks WHERE name = '$lk'"), '0',
	'it is gone from rlock_locks');
my $st;
$ok = RlockTest::wait_until(
	sub { $st = states(\@alive, $lk, $ha); $st eq expect_states(\@alive, 'none') },
	$watchdog_s + 5);
ok($ok, "it does not stay on the two surviving masters ($st)");
($out, $err, $state) = RlockTest::run_sql($sb, "SELECT rlock_redlock_try_acquire('$lk', '30s')");
is("$out/$state", '/08001',
	'with 2 masters of 5 up (3 refuse the connection), nobody can take it: 08001');
like($err, qr/Redlock "\Q$lk\E".*3 of its 5 masters failed/, '... an ERROR naming the lock');

$rl->start($_) foreach (1, 3, 4);
my $hb = RlockTest::holder_of($sb);
($out, $err) = RlockTest::run_sql($sb, "SELECT rlock_redlock_try_acquire('$lk', '30s')");
is("$out/$err", 't/', 'the masters started again (empty): another session takes it');
is(states(\@all, $lk, $hb), expect_states(\@all, 'me=1'), 'on every master');
($out, $err) = RlockTest::run_sql($sb, "SELECT rlock_redlock_release('$lk')");
is("$out/$err", 't/', 'and releases it');

# the key disappears from masters (DEL: a restart without persistence)
my $lg = 'rl_gone';
($out, $err) = RlockTest::run_sql($sa, "SELECT rlock_redlock_acquire('$lg')");
is("$out/$err", '/', "rlock_redlock_acquire('$lg') without a lease");
is(states(\@all, $lg, $ha), expect_states(\@all, 'me=1'), 'held on every master');
$rl->cli($_, 'DEL', $lg) foreach (0, 1);
my $t_del = time();
@alive = (2, 3, 4);
($renewed, $low) = $rl->all_renewed(\@alive, $lg, 30);
ok($renewed, 'deleted from 2 masters: still renewed on the other 3');
my $until = $t_del + $watchdog_s + 1;
usleep(1e6 * ($until - time())) if time() < $until;
is(states(\@alive, $lg, $ha), expect_states(\@alive, 'me=1'),
	'more than a lease later it is on the other 3');
is(q1($mon, "SELECT state FROM rlock_locks WHERE name = '$lg'"), 'held',
	'rlock_locks says held');
$log_offset = -s $node->logfile;
$rl->cli(2, 'DEL', $lg);
$ok = RlockTest::wait_until(
	sub { q1($mon, "SELECT state FROM rlock_locks WHERE name = '$lg'") eq 'lost' }, 30);
ok($ok, 'deleted from a third master: rlock_locks reports it lost');
RlockTest::wait_until(sub { @lines = lost_lines($log_offset, $lg); @lines }, 10);
ok(scalar(@lines), "the server log has a line saying \"$lg\" was lost");
note "log: $_" foreach @lines;
($out, $err) = RlockTest::run_sql($sa, "SELECT rlock_redlock_release('$lg')");
is($out, 'f', 'rlock_redlock_release returns false');
like($err, qr/WARNING:  .*\Q$lg\E/, '... with a WARNING naming it');
$ok = RlockTest::wait_until(
	sub { $st = states(\@all, $lg, $ha); $st eq expect_states(\@all, 'none') },
	$watchdog_s + 5);
ok($ok, "nothing of it stays on any master ($st)");

# ---- d) a Redisson client holding the name on some masters ----

my $lr = 'rl_redisson';
my @maj = (0, 1, 2);    # the plain, TLS and Unix socket masters
is(join(',', map { $rl->try_lock($_, $lr, 30000, $foreign) } @maj), ',,',
	'a Redisson client holds the name on masters 0, 1, 2 (a majority)');
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_redlock_try_acquire('$lr', '30s')");
is("$out/$err", 'f/', 'rlock cannot take the Redlock');
is(states(\@all, $lr, $me), '0:java=1 1:java=1 2:java=1 3:none 4:none',
	'and left nothing of its own on any master');
is(join(',', map { $rl->unlock($_, $lr, $foreign) } @maj), '1,1,1',
	'the Redisson client releases');

my @min = (3, 4);
is(join(',', map { $rl->try_lock($_, $lr, 30000, $foreign) } @min), ',',
	'a Redisson client holds the name on masters 3, 4 (a minority)');
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_redlock_try_acquire('$lr', '30s')");
is("$out/$err", 't/', 'rlock takes the Redlock');
is(states(\@all, $lr, $me), '0:me=1 1:me=1 2:me=1 3:java=1 4:java=1',
	'on the three other masters');
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_redlock_release('$lr')");
is("$out/$err", 't/', 'and releases it');
is(states(\@all, $lr, $me), '0:none 1:none 2:none 3:java=1 4:java=1',
	'leaving the Redisson holds alone');
is(join(',', map { $rl->unlock($_, $lr, $foreign) } @min), '1,1',
	'the Redisson client releases');

($out, $err) = RlockTest::run_sql($s, "SELECT rlock_redlock_try_acquire('$lr', '30s')");
is("$out/$err", 't/', 'rlock holds the Redlock');
my @refused = grep { $rl->try_lock($_, $lr, 30000, $foreign) =~ /^\d+$/ } @all;
cmp_ok(scalar(@refused), '>=', $quorum,
	'a RedissonRedLock\'s RLock fails on at least 3 masters (on: '
	  . join(',', @refused) . ')');
foreach my $i (@all)
{
	$rl->unlock($i, $lr, $foreign) unless grep { $_ == $i } @refused;
}
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_redlock_release('$lr')");
is("$out/$err", 't/', 'rlock releases it');

# ---- d2) validity: a majority granted, but after the lease ran out ----

# Masters 2, 3 and 4 stopped: 0 and 1 grant at once, but a majority needs
# a third, and they answer only once the test resumes them, 300 ms after
# the session is seen waiting (its commands sent): the majority grants a
# 100 ms lease after it could have run out: not acquired (validity =
# lease - elapsed - drift <= 0), and given back on every master.  The same
# with a lease that outlasts the wait is acquired.  (An attempt returns
# once a majority granted: only a wait for the majority itself eats into
# the lease, not one for the last masters; f) shows that.)
q1($s, "SET rlock.command_timeout = '60s'");
my $lv = 'rl_validity';

# (lease, then the expected result)
sub late_majority
{
	my ($lease) = @_;
	$rl->pause($_) for (2, 3, 4);
	RlockTest::start_bg($s,
		"SELECT rlock_redlock_try_acquire('$lv', '$lease')");
	RlockTest::wait_for_rlock_waiters($node, 'postgres', 1,
		"%rlock_redlock_try_acquire('$lv'%");
	usleep(300_000);
	$rl->resume($_) for (2, 3, 4);
	RlockTest::wait_until(sub { RlockTest::bg_done($s) }, 60)
	  or die 'the Redlock attempt did not end';
	my ($o, $e) = RlockTest::bg_result($s);
	return "$o/$e";
}
is(late_majority('100ms'), 'f/',
	'a majority grants a 100 ms lease after 300 ms: not acquired (no validity left)');
is(states(\@all, $lv, $me), expect_states(\@all, 'none'),
	'... and given back on every master');
is(q1($mon, "SELECT count(*) FROM rlock_locks WHERE name = '$lv'"), '0',
	'... the session holds nothing');
is(late_majority('30s'), 't/',
	'with a 30 s lease the same wait leaves validity: acquired');
is(states(\@all, $lv, $me), expect_states(\@all, 'me=1'),
	'... on every master');
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_redlock_release('$lv')");
is("$out/$err", 't/', '... and released');
is(states(\@all, $lv, $me), expect_states(\@all, 'none'),
	'... from every master');
q1($s, "SET rlock.command_timeout = '${short_ms}ms'");
q1($s, "SET rlock.connect_timeout = '${short_ms}ms'");

# ---- d3) a stopped master does not hold the others up ----

# Master 4 stopped and a command timeout (60 s) longer than the statement
# may run (30 s): the acquisition returns once a majority granted, without waiting
# for master 4 (which grants when it runs again, and then runs the release
# that followed on its connection); the connection to it is used again,
# its late replies read first.
my $lq = 'rl_quorum';
($out, $err) = RlockTest::run_sql($s,
	"SET rlock.command_timeout = '60s'; SET statement_timeout = '30s'");
is($err, '', 'a 60 s command timeout, a 30 s statement timeout');
$rl->pause(4);
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_redlock_try_acquire('$lq', '30s')");
is("$out/$err", 't/',
	'master 4 stopped: acquired once a majority granted, not after the command timeout');
is(states([ 0 .. 3 ], $lq, $me), expect_states([ 0 .. 3 ], 'me=1'),
	'... held on the four running masters');
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_redlock_release('$lq')");
is("$out/$err", 't/', '... released the same way');
is(states([ 0 .. 3 ], $lq, $me), expect_states([ 0 .. 3 ], 'none'),
	'... from the four running masters');
$rl->resume(4);
ok(RlockTest::wait_until(sub { state_on(4, $lq, $me) eq 'none' }, 60),
	'master 4, running again, took it and released it (no lease to wait for)');
($out, $err) = RlockTest::run_sql($s,
	"SELECT rlock_redlock_try_acquire('$lq', '30s'), rlock_redlock_release('$lq')");
is("$out/$err", 't|t/', 'the next acquisition and release work, over the same connections');
is(states(\@all, $lq, $me), expect_states(\@all, 'none'), '... leaving nothing');
q1($s, "RESET statement_timeout");
q1($s, "SET rlock.command_timeout = '${short_ms}ms'");

# ---- d4) a master that timed out is not waited for again ----

# Each of master 4 (plain: its socket is kept, owing the replies), master 3
# (a password: a fresh connection's handshake is pending) and master 1 (TLS:
# its handshake stalls) stopped in turn, in a new session that took a
# Redlock once (every master answered): its connection to the master is
# cut (CLIENT KILL) before the stop, so its next round trip there, on a
# new connection, is waited for and times out (300 ms).  The next ones do
# not wait for it, even with command and connect timeouts (60 s) longer
# than the statement may run (30 s) and a fresh connection each time:
# acquired on the other four, again and again, released.  Resumed, it is
# heard again: an acquisition is soon held on all five.
foreach my $m (4, 3, 1)
{
	my $ls = "rl_silent$m";
	my $t = session();
	my $tme = RlockTest::holder_of($t);
	my @up = grep { $_ != $m } @all;
	($out, $err) = RlockTest::run_sql($t,
		"SELECT rlock_redlock_try_acquire('$ls', '30s'), rlock_redlock_release('$ls')");
	is("$out/$err", 't|t/', "a new session takes and releases \"$ls\" on the five masters");
	q1($t, "SET rlock.command_timeout = '${short_ms}ms'");
	q1($t, "SET rlock.connect_timeout = '${short_ms}ms'");
	$rl->cli($m, 'CLIENT', 'KILL', 'TYPE', 'normal');
	$rl->pause($m);
	($out, $err) = RlockTest::run_sql($t,
		"SELECT rlock_redlock_try_acquire('$ls', '30s'), rlock_redlock_release('$ls')");
	is("$out/$err", 't|t/',
		"master $m cut and stopped: its round trip on a new connection times out, the others grant");
	($out, $err) = RlockTest::run_sql($t,
		"SET rlock.command_timeout = '60s'; SET rlock.connect_timeout = '60s'; SET statement_timeout = '30s'");
	is($err, '', '... then 60 s command and connect timeouts, a 30 s statement timeout');
	for my $round (1 .. 3)
	{
		($out, $err) = RlockTest::run_sql($t,
			"SELECT rlock_redlock_try_acquire('$ls', '30s')");
		is("$out/$err", 't/',
			"... acquisition $round does not wait for master $m: acquired");
		is(states(\@up, $ls, $tme), expect_states(\@up, 'me=1'),
			'... held on the four running masters');
		($out, $err) = RlockTest::run_sql($t, "SELECT rlock_redlock_release('$ls')");
		is("$out/$err", 't/', '... released');
	}
	$rl->resume($m);
	ok(RlockTest::wait_until(sub { state_on($m, $ls, $tme) eq 'none' }, 60),
		"master $m, running again, ran what it was sent and has nothing left of it");
	ok( RlockTest::wait_until(
			sub {
				my ($o, $e) = RlockTest::run_sql($t,
					"SELECT rlock_redlock_try_acquire('$ls', '30s')");
				my $st = states(\@all, $ls, $tme);
				RlockTest::run_sql($t, "SELECT rlock_redlock_release('$ls')");
				return $o eq 't' && $st eq expect_states(\@all, 'me=1');
			},
			60),
		'... and is heard again: an acquisition is held on all five masters');
	is(states(\@all, $ls, $tme), expect_states(\@all, 'none'), '... leaving nothing');
	$t->quit;
}

# ---- d5) a new session does not pay again what another one learned ----

# Master 2 cut (CLIENT KILL) and stopped, found silent by one session (its
# round trip there, on a new connection, times out: 300 ms): a new
# session, whose command and connect timeouts
# (60 s) are longer than its statement may run (30 s), does not wait for
# that master either, on its very first Redlock call and the next: the
# processes of one server share which masters they found silent.
# Resumed, master 2 is heard again by the new session.
{
	my $m = 2;
	my $ls = 'rl_silent_shared';
	my @up = grep { $_ != $m } @all;
	my $t = session();
	q1($t, "SET rlock.command_timeout = '${short_ms}ms'");
	q1($t, "SET rlock.connect_timeout = '${short_ms}ms'");
	($out, $err) = RlockTest::run_sql($t,
		"SELECT rlock_redlock_try_acquire('$ls', '30s'), rlock_redlock_release('$ls')");
	is("$out/$err", 't|t/', "a session takes and releases \"$ls\" on the five masters");
	$rl->cli($m, 'CLIENT', 'KILL', 'TYPE', 'normal');
	$rl->pause($m);
	($out, $err) = RlockTest::run_sql($t,
		"SELECT rlock_redlock_try_acquire('$ls', '30s'), rlock_redlock_release('$ls')");
	is("$out/$err", 't|t/',
		"master $m cut and stopped: that session's round trip there times out, the others grant");
	my $u = session();
	my $ume = RlockTest::holder_of($u);
	($out, $err) = RlockTest::run_sql($u,
		"SET rlock.command_timeout = '60s'; SET rlock.connect_timeout = '60s'; SET statement_timeout = '30s'");
	is($err, '', 'a new session: 60 s command and connect timeouts, a 30 s statement timeout');
	for my $round (1 .. 2)
	{
		($out, $err) = RlockTest::run_sql($u,
			"SELECT rlock_redlock_try_acquire('$ls', '30s')");
		is("$out/$err", 't/',
			"... its Redlock call $round does not wait for master $m: acquired");
		is(states(\@up, $ls, $ume), expect_states(\@up, 'me=1'),
			'... held on the four running masters');
		($out, $err) = RlockTest::run_sql($u, "SELECT rlock_redlock_release('$ls')");
		is("$out/$err", 't/', '... released');
	}
	$rl->resume($m);
	ok( RlockTest::wait_until(
			sub {
				my ($o, $e) = RlockTest::run_sql($u,
					"SELECT rlock_redlock_try_acquire('$ls', '30s')");
				my $st = states(\@all, $ls, $ume);
				RlockTest::run_sql($u, "SELECT rlock_redlock_release('$ls')");
				return $o eq 't' && $st eq expect_states(\@all, 'me=1');
			},
			60),
		"master $m resumed is heard again: an acquisition is held on all five");
	ok(RlockTest::wait_until(sub { state_on($m, $ls, $ume) eq 'none' }, 60),
		'... leaving nothing');
	$t->quit;
	$u->quit;
}

# ---- e) transaction level, waiting ----

my $lx = 'rl_xact';
($out, $err) = RlockTest::run_sql($s, "BEGIN; SELECT rlock_redlock_xact_acquire('$lx', '30s')");
is($err, '', 'rlock_redlock_xact_acquire in a transaction');
is(states(\@all, $lx, $me), expect_states(\@all, 'me=1'), 'held on every master');
is(q1($s, "SELECT kind, scope, state FROM rlock_locks WHERE name = '$lx'"),
	'redlock|transaction|held', 'rlock_locks: kind redlock, scope transaction');
($out, $err) = RlockTest::run_sql($s, 'COMMIT');
is($err, '', 'COMMIT');
is(states(\@all, $lx, $me), expect_states(\@all, 'none'),
	'after COMMIT nothing is left on any master');
is(q1($mon, "SELECT count(*) FROM rlock_locks WHERE name = '$lx'"), '0',
	'nor in rlock_locks');

($out, $err) = RlockTest::run_sql($s, "BEGIN; SELECT rlock_redlock_xact_try_acquire('$lx')");
is("$out/$err", 't/', 'rlock_redlock_xact_try_acquire (no lease) in a transaction');
is(states(\@all, $lx, $me), expect_states(\@all, 'me=1'), 'held on every master');
($out, $err) = RlockTest::run_sql($s, 'ROLLBACK');
is(states(\@all, $lx, $me), expect_states(\@all, 'none'),
	'after ROLLBACK nothing is left on any master');

my $lb = 'rl_block';
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_redlock_try_acquire('$lb', '60s')");
is("$out/$err", 't/', "one session holds \"$lb\" (lease 60 s)");
RlockTest::start_bg($sb,
	"SELECT rlock_redlock_acquire('$lb', '60s'), extract(epoch FROM clock_timestamp())");
RlockTest::wait_for_rlock_waiters($node, 'postgres', 1, "%rlock_redlock_acquire('$lb'%");
pass('a blocking rlock_redlock_acquire in another session waits');
usleep(500_000);
ok(!RlockTest::bg_done($sb), 'it still waits while the lock is held');
is(states(\@all, $lb, $me), expect_states(\@all, 'me=1'),
	'and has nothing of its own on any master meanwhile');
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_redlock_release('$lb')");
my $t_rel = time();
is("$out/$err", 't/', 'the holder releases');
$ok = RlockTest::wait_until(sub { RlockTest::bg_done($sb) }, 30);
ok($ok, 'the waiter returns');
($out, $err, $state) = RlockTest::bg_result($sb);
is("$err/$state", '/00000', 'having acquired the lock');
my ($t_acq) = $out =~ /\|([\d.]+)$/;
$elapsed = ($t_acq // 1e12) - $t_rel;
note sprintf('the waiter got it %.3f s after the release returned', $elapsed);
cmp_ok($elapsed, '<', 20, 'long before the 60 s lease would have run out');
# (woken by the first master's release message, it may have asked the
# others before the release reached them: a majority is what it needs)
my $got = states(\@all, $lb, $hb);
my $on = () = $got =~ /:me=1\b/g;
ok($on >= $quorum && $got !~ /other|java/,
	"it holds it on a majority of the masters, nothing of the first holder is left ($got)");
$t0 = time();
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_redlock_try_acquire('$lb', '60s', '1s')");
$elapsed = time() - $t0;
is("$out/$err", 'f/', 'try_acquire with a 1 s wait gives up');
cmp_ok($elapsed, '>=', 0.9, sprintf('after its wait (%.3f s)', $elapsed));
($out, $err) = RlockTest::run_sql($sb, "SELECT rlock_redlock_release('$lb')");
is("$out/$err", 't/', 'the waiter releases');
is(states(\@all, $lb, $hb), expect_states(\@all, 'none'), 'nothing is left');

# A waiter listens on the channel of one master, the first that refused it
# (master 0 here).  That master killed while it waits: the waiter looks
# again, listens on another, and gets the lock when the holder releases it.
$lk = 'rl_wait_kill';
my $chan = "redisson_lock__channel:{$lk}";
my $listeners = sub {
	my ($i) = @_;
	my $r = $rl->cli($i, 'PUBSUB', 'NUMSUB', $chan) // '';
	my ($n) = $r =~ /(\d+)\s*$/;
	return $n // 0;
};
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_redlock_try_acquire('$lk', '60s')");
is("$out/$err", 't/', "one session holds \"$lk\"");
RlockTest::start_bg($sb, "SELECT rlock_redlock_acquire('$lk', '60s')");
RlockTest::wait_for_rlock_waiters($node, 'postgres', 1, "%rlock_redlock_acquire('$lk'%");
ok(RlockTest::wait_until(sub { $listeners->(0) == 1 }, 30),
	'a waiter listens on master 0');
$rl->kill_master(0);
ok( RlockTest::wait_until(
		sub {
			RlockTest::bg_done($sb)
			  || grep { $listeners->($_) == 1 } 1 .. $N - 1;
		},
		30),
	'master 0 killed: the waiter ...');
ok(!RlockTest::bg_done($sb), '... still waits, without an error');
ok((grep { $listeners->($_) == 1 } 1 .. $N - 1),
	'... listening on another master');
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_redlock_release('$lk')");
is("$out/$err", 't/', 'the holder releases (on the four masters left)');
ok(RlockTest::wait_until(sub { RlockTest::bg_done($sb) }, 30),
	'the waiter returns');
($out, $err, $state) = RlockTest::bg_result($sb);
is("$err/$state", '/00000', '... having acquired the lock');
$rl->start(0);
($out, $err) = RlockTest::run_sql($sb, "SELECT rlock_redlock_release('$lk')");
is("$out/$err", 't/', '... which it releases');

# ---- e2) a late master's script is not lost (it flushes scripts: last
# of the sections on masters) ----

# Scripts flushed on every master, a new session: its release's script is
# new to each server, so a master that answers late (master 4, stopped
# while the release runs) is waited for: its NOSCRIPT makes rlock send the
# body, and the lock is gone from every master, not left on master 4 until
# its lease ends.
my $lsc = 'rl_script';
$rl->cli($_, 'SCRIPT', 'FLUSH') for @all;
my $sn = session();
q1($sn, "SET rlock.command_timeout = '60s'");
($out, $err) = RlockTest::run_sql($sn, "SELECT rlock_redlock_try_acquire('$lsc', '60s')");
is("$out/$err", 't/', 'a new session takes a Redlock on masters without scripts');
$rl->pause(4);
RlockTest::start_bg($sn, "SELECT rlock_redlock_release('$lsc')");
ok( RlockTest::wait_until(
		sub {
			RlockTest::bg_done($sn) || q1($mon,
				"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Extension' AND query LIKE '%rlock_redlock_release(''$lsc''%'"
			) eq '1';
		},
		60),
	'its release waits for master 4, or returns');
$rl->resume(4);
ok(RlockTest::wait_until(sub { RlockTest::bg_done($sn) }, 60), '... and returns');
($out, $err) = RlockTest::bg_result($sn);
is("$out/$err", 't/', '... true');
is(states(\@all, $lsc, $me), expect_states(\@all, 'none'),
	'... the lock is gone from every master, master 4 included');
$sn->quit;

# ---- e2) a lease the drift eats whole ----

# Valid for its lease less the round trip and a drift of 1 % plus 2 ms: a
# lease of 2 ms can never be valid.  Refused at once (the code before
# waited for ever, on a free name, or said false after the wait).
{
	my $tl = session();
	q1($tl, "SET statement_timeout = '20s'");
	for my $sql ("SELECT rlock_redlock_acquire('rl_tiny', '2 ms')",
		"SELECT rlock_redlock_try_acquire('rl_tiny', '1 ms', '5 s')",
		"SELECT rlock_redlock_xact_acquire('rl_tiny', '2 ms')")
	{
		($out, $err, $state) = RlockTest::run_sql($tl, $sql);
		is($state, '22023', "$sql: refused (22023)");
		like($err, qr/lease of Redlock "rl_tiny" is too short/, '... saying so');
	}
	($out, $err) = RlockTest::run_sql($tl,
		"SELECT rlock_redlock_try_acquire('rl_tiny', '3 s'), rlock_redlock_release('rl_tiny')");
	is("$out/$err", 't|t/', 'a lease of seconds is taken on the free name');
	$tl->quit;
}

# ---- e3) the masters change while a Redlock is held ----

# A Redlock lives on the masters it was taken on.  After a reload that
# names masters none of which has it, the holder's next call reconciles
# its Redlocks with them before anything else: re-entering it reports it
# lost and takes it afresh there (count 1), where the code before counted
# a second level in the session over a first one on the new masters.  The
# watchdog is stopped (SIGSTOP) so that it cannot find the loss first.
{
	my @fresh = map { RlockTest::Redis->new } 1 .. 3;
	my $mv = session();
	q1($mv, "SELECT rlock_redlock_acquire('rl_moved')");
	my $wd = $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'rlock watchdog'");
	kill 'STOP', $wd;
	RlockTest::set_gucs($node,
		'rlock.redlock_urls' => join(',', map { $_->url } @fresh));
	($out, $err, $state) = RlockTest::run_sql($mv,
		"SELECT rlock_redlock_acquire('rl_moved')");
	is($state, '00000', 'the masters changed: the holder re-enters its Redlock');
	like($err, qr/WARNING:  lock "rl_moved" was lost/,
		'... told first that the one on the old masters is lost');
	is(RlockTest::sql($node,
			"SELECT hold_count FROM rlock_locks WHERE name = 'rl_moved'"),
		'1', '... and holds it once, as the new masters count');
	is(join(',', map { scalar $_->cli('HVALS', 'rl_moved') } @fresh),
		'1,1,1', '... which hold it once each');
	kill 'CONT', $wd;
	is(q1($mv, "SELECT rlock_redlock_release('rl_moved')"), 't', '... and release it');
	is(join(',', map { scalar $_->cli('EXISTS', 'rl_moved') } @fresh), '0,0,0',
		'... on every new master');
	RlockTest::set_gucs($node, 'rlock.redlock_urls' => $rl->urls);
	$mv->quit;
	$_->stop foreach @fresh;
}

# ---- f) no masters configured ----

# A Redlock held when the setting is emptied is lost, as one held on
# rlock.redis_url's Redis when that setting changes: the view says so (the
# code before showed a fixed lease 'held' that no call could release), and
# its release warns and returns false.
my $kept = session();
q1($kept, "SELECT rlock_redlock_acquire('rl_kept', '1 hour')");
RlockTest::set_gucs($node, 'rlock.redlock_urls' => '');
ok( RlockTest::wait_until(sub {
		RlockTest::sql($node, "SELECT state FROM rlock_locks WHERE name = 'rl_kept'") eq 'lost' }, 30),
	'rlock.redlock_urls emptied: a Redlock held with a lease is shown lost');
($out, $err, $state) = RlockTest::run_sql($kept, "SELECT rlock_redlock_release('rl_kept')");
is("$out/$state", 'f/00000', '... its release returns false');
like($err, qr/WARNING:  lock "rl_kept" was lost/, '... with the WARNING of a lost lock');
is(RlockTest::sql($node, "SELECT count(*) FROM rlock_locks WHERE name = 'rl_kept'"), '0',
	'... and the view forgets it');
$kept->quit;

my $e = session();
foreach my $sql (
	"SELECT rlock_redlock_acquire('rl_none')",
	"SELECT rlock_redlock_try_acquire('rl_none')",
	"SELECT rlock_redlock_xact_acquire('rl_none')",
	"SELECT rlock_redlock_xact_try_acquire('rl_none')",
	"SELECT rlock_redlock_release('rl_none')")
{
	($out, $err, $state) = RlockTest::run_sql($e, $sql);
	is($state, '55000', "rlock.redlock_urls empty: $sql: SQLSTATE 55000");
	like($err, qr/ERROR:  .*rlock\.redlock_urls/s, '... the error names rlock.redlock_urls');
}

$_->quit foreach ($s, $mon, $sa, $sb, $e);
done_testing();
