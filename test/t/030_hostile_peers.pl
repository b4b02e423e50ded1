
# Copyright (c) 2026, rlock developers
#
# A broken or hostile server costs a clear ERROR and nothing else (SPEC 7):
# a scripted fake Redis / Sentinel / Cluster node (RlockTest::FakeRedis)
# serves every malformed shape, and each case asserts
#   - an ERROR with the expected SQLSTATE and a DETAIL saying what was wrong,
#   - in bounded time (the figures are printed with note()),
#   - with bounded backend memory (VmHWM of the backend, /proc),
#   - and, at the end, that the server never restarted (no backend killed
#     by a signal, the postmaster's pid unchanged).
# Shapes: a huge array header then an endless stream (and cancel works),
# a huge bulk header plus data, a header line that never ends, nesting,
# wrong reply types, a truncated reply then close, a drip past
# rlock.command_timeout, bogus CLUSTER SLOTS maps, sentinels naming
# nonsense masters (also asked by the background worker, no SQL running),
# redis-cluster:// at a standalone Redis, rediss:// at a plain Redis, a
# Redlock master whose INFO is endless or copies another master's run_id,
# and a port with trailing garbage in the URL.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use IO::Socket::INET;
use List::Util;

use RlockTest;
use RlockTest::FakeRedis;

# A backend that parses a hostile reply may use this much memory at most
# (the bounds: 64 MB of one reply's bytes; its baseline is some 10 MB).
my $MEM_BOUND_KB = 160 * 1024;
# Under test/run --sanitize (RLOCK_TEST_SANITIZED=1) the backend runs on
# ASan's allocator -- every realloc copies, shadow memory counts in VmHWM --
# and a 64 MB reply took 16 s on a loaded machine: time and memory bounds
# are scaled for it.
my $SLOW = $ENV{RLOCK_TEST_SANITIZED} ? 3 : 1;
$MEM_BOUND_KB *= 2 if $ENV{RLOCK_TEST_SANITIZED};
# What the fake streams at most: enough to blow any bound above, not the
# machine (a build without the bounds is driven past $MEM_BOUND_KB).
my $CAP = 300 * 1024 * 1024;

my $redis = RlockTest::Redis->new;
my $node = RlockTest::new_node('hostile', $redis);
my $pm_pid = RlockTest::postmaster_pid($node);
my $log_start = -s $node->logfile;


# VmHWM and VmRSS (kB) of a process; (undef, undef) once it is gone.
sub vm
{
	my ($pid) = @_;
	open(my $fh, '<', "/proc/$pid/status") or return (undef, undef);
	my ($hwm, $rss);
	while (<$fh>)
	{
		$hwm = $1 if /^VmHWM:\s+(\d+)/;
		$rss = $1 if /^VmRSS:\s+(\d+)/;
	}
	close $fh;
	return ($hwm, $rss);
}

# Run $c{sql} in a new session with rlock.redis_url (or $c{setting}) =
# $c{url} (set for the server: it is not a session's setting) and the
# settings of $c{gucs}); cancel it after $c{cancel_after} s if it still
# runs; then check the outcome against $c{state} and $c{detail} (regexes),
# the time against $c{limit} s, the backend's memory against the bound.
sub hostile_case
{
	my (%c) = @_;
	my $name = $c{name};
	my $limit = ($c{limit} // 20) * $SLOW;
	my %gucs = ('rlock.command_timeout' => '5s', %{ $c{gucs} // {} });
	RlockTest::set_gucs($node, $c{setting} // 'rlock.redis_url' => $c{url});
	my $s = $node->background_psql('postgres', on_error_stop => 0);
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	chomp $pid;
	$s->query_safe("SET $_ = '$gucs{$_}'") foreach sort keys %gucs;

	my $t0 = time;
	RlockTest::start_bg($s, $c{sql});
	my $done = RlockTest::wait_until(sub { RlockTest::bg_done($s) },
		defined $c{cancel_after} ? $c{cancel_after} * $SLOW : $limit);
	my $cancelled = 0;
	if (!$done)
	{
		# cancel; a backend deaf to it is terminated, then left behind
		$cancelled = 1;
		$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
		$done = RlockTest::wait_until(sub { RlockTest::bg_done($s) },
			$c{cancel_after} ? $limit : 5);
	}
	my $secs = time - $t0;
	my ($hwm, $rss) = vm($pid);
	my ($out, $err, $state) = ('', '', 'none');
	if ($done)
	{
		($out, $err, $state) = RlockTest::bg_result($s);
		$s->quit;
	}
	else
	{
		$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
		$s->{run}->kill_kill;
	}
	$err =~ s/\n+$//;
	note sprintf(
		"%s: %s in %.2f s%s; backend VmHWM %s kB, VmRSS %s kB; %s",
		$name, $state, $secs, $cancelled ? ' (cancelled)' : '',
		$hwm // 'gone', $rss // 'gone', $err);
	ok($done, "$name: the call ended (cancel heard)");
	like($state, $c{state}, "$name: SQLSTATE");
	like($err, $c{detail}, "$name: the ERROR says what was wrong")
	  if $c{detail};
	ok($secs < $limit, "$name: within $limit s");
	ok(defined $hwm && $hwm < $MEM_BOUND_KB,
		"$name: backend memory bounded (VmHWM < $MEM_BOUND_KB kB)");
	return;
}

# ---- a fake Redis answering PING with each malformed shape ----

my @redis_cases = (
	{
		name => 'array header *999999999 then an endless stream',
		answer =>
		  RlockTest::FakeRedis::endless("*999999999\r\n", ":1\r\n", $CAP / 10),
		state => qr/^08P01$/,
		detail => qr/DETAIL:.*999999999 array elements/,
		cancel_after => 5,
	},
	{
		name => 'bulk header $999999999 plus data',
		answer => RlockTest::FakeRedis::endless("\$999999999\r\n", 'x' x 4096,
			$CAP),
		gucs => { 'rlock.command_timeout' => '60s' },
		state => qr/^08P01$/,
		detail => qr/DETAIL:.*exceeded 64 MB/,
		cancel_after => 15,
	},
	{
		# within the element and byte bounds, yet some 350 MB to the code
		# before: each element counts toward the bytes
		name => 'a million strings of 60 bytes',
		answer => RlockTest::FakeRedis::endless("*1048570\r\n",
			"\$60\r\n" . ('x' x 60) . "\r\n", 1048570 * 67),
		gucs => { 'rlock.command_timeout' => '60s' },
		state => qr/^08P01$/,
		detail => qr/DETAIL:.*exceeded 64 MB/,
		cancel_after => 30,
	},
	{
		name => 'a header line that never ends',
		answer => RlockTest::FakeRedis::endless('+', 'a' x 4096, $CAP),
		gucs => { 'rlock.command_timeout' => '60s' },
		state => qr/^08P01$/,
		detail => qr/DETAIL:.*line of a reply ran past 1024 kB/,
		cancel_after => 15,
	},
	{
		name => 'arrays nested 100 deep',
		answer => ("*1\r\n" x 100) . ":1\r\n",
		state => qr/^08P01$/,
		detail => qr/DETAIL:.*(nest|depth)/,
	},
	{
		name => 'an array where a status is expected',
		answer => "*2\r\n:1\r\n:2\r\n",
		state => qr/^08P01$/,
		detail => qr/DETAIL:.*answered an array of 2 elements/,
	},
	{
		name => 'a truncated reply, then close',
		answer => RlockTest::FakeRedis::then_close("\$10\r\nabc"),
		state => qr/^08006$/,
		detail => qr/DETAIL:.*closed the connection/,
	},
	{
		name => 'a drip of one byte at a time past rlock.command_timeout',
		answer => RlockTest::FakeRedis::drip("\$100\r\n" . ('x' x 100), 0.1),
		gucs => { 'rlock.command_timeout' => '1s' },
		state => qr/^08006$/,
		detail => qr/DETAIL:.*command_timeout/,
		limit => 10,
	},
	{
		name => 'a slow stream within the bounds, cancelled',
		answer => RlockTest::FakeRedis::drip("*100000\r\n" . (":1\r\n" x 1000),
			0.01),
		gucs => { 'rlock.command_timeout' => '60s' },
		state => qr/^57014$/,
		cancel_after => 1,
		limit => 10,
	},);

foreach my $c (@redis_cases)
{
	my $fake = RlockTest::FakeRedis->new(PING => $c->{answer});
	hostile_case(%$c, url => 'redis://127.0.0.1:' . $fake->port,
		sql => 'SELECT rlock_ping() IS NOT NULL');
	$fake->stop;
}

# a script's reply of the wrong type
{
	my $fake = RlockTest::FakeRedis->new(EVALSHA => "*1\r\n*1\r\n:5\r\n");
	hostile_case(
		name => 'an array where a script answers nil or an integer',
		url => 'redis://127.0.0.1:' . $fake->port,
		sql => "SELECT rlock_try_acquire('hostile_type')",
		state => qr/^08P01$/,
		detail => qr/DETAIL:.*answered an array of 1 elements/);
	$fake->stop;
}

# a waiter's subscription answered by an endless stream: the waiter's memory
# stays bounded and its wait ends (whatever it then concludes)
{
	my $stream =
	  RlockTest::FakeRedis::endless("*999999999\r\n", ":1\r\n", $CAP / 10);
	my $fake = RlockTest::FakeRedis->new(
		EVALSHA => "*2\r\n:0\r\n:30000\r\n",    # held, 30 s to go
		EVAL => "*2\r\n:0\r\n:30000\r\n",
		SUBSCRIBE => $stream,
		SSUBSCRIBE => $stream);
	hostile_case(
		name => 'a subscription answered by *999999999 then an endless stream',
		url => 'redis://127.0.0.1:' . $fake->port,
		sql => "SELECT rlock_try_acquire('hostile_sub', NULL, '3 seconds')",
		state => qr/^(00000|08P01|08006)$/,
		cancel_after => 10);
	ok((grep { /SUBSCRIBE/ } $fake->commands),
		'the waiter did subscribe at the fake');
	$fake->stop;
}

# rediss:// at a server that answers the ClientHello with a RESP error
{
	my $fake = RlockTest::FakeRedis->new;
	hostile_case(
		name => 'rediss:// at a server answering RESP',
		url => 'rediss://127.0.0.1:' . $fake->port,
		sql => 'SELECT rlock_ping() IS NOT NULL',
		state => qr/^08001$/,
		detail => qr/DETAIL:.*the server does not speak TLS/,
		limit => 10);
	$fake->stop;
}

# ---- bogus CLUSTER SLOTS maps ----

# A CLUSTER SLOTS answer of entries [start, end, [host, port]]; a port of
# 'self' is the fake's own.
sub slots
{
	my @entries = @_;
	return sub {
		my ($sock) = @_;
		my $out = '*' . scalar(@entries) . "\r\n";
		foreach my $e (@entries)
		{
			if (!ref $e)
			{
				$out .= $e;
				next;
			}
			my ($start, $end, $host, $port) = @$e;
			$port = $sock->sockport if $port eq 'self';
			$out .= "*3\r\n:$start\r\n:$end\r\n*2\r\n\$"
			  . length($host)
			  . "\r\n$host\r\n:$port\r\n";
		}
		return RlockTest::FakeRedis::_write($sock, $out);
	};
}

my @cluster_cases = (
	[
		'start slot -9223372036854775808',
		slots([ '-9223372036854775808', 16383, '127.0.0.1', 'self' ]),
		qr/^08P01$/, qr/slot range -9223372036854775808-16383 is outside 0-16383/
	],
	[
		'end slot 99999999999', slots([ 0, 99999999999, '127.0.0.1', 'self' ]),
		qr/^08P01$/, qr/is outside 0-16383/
	],
	[
		'start after end', slots([ 100, 5, '127.0.0.1', 'self' ]),
		qr/^08P01$/, qr/slot range 100-5 ends before it starts/
	],
	[
		'port 0', slots([ 0, 16383, '127.0.0.1', 0 ]),
		qr/^08P01$/, qr/port 0, outside 1\.\.65535/
	],
	[
		'port 70000', slots([ 0, 16383, '127.0.0.1', 70000 ]),
		qr/^08P01$/, qr/port 70000, outside 1\.\.65535/
	],
	[
		'a host of 300 bytes', slots([ 0, 16383, 'h' x 300, 'self' ]),
		qr/^08P01$/, qr/host name longer than 255 bytes/
	],
	[
		'a host with a control character',
		slots([ 0, 16383, "127.0.0.1\x01x", 'self' ]),
		qr/^08P01$/, qr/control character/
	],
	[
		'an entry that is not an array', slots(":5\r\n"),
		qr/^08P01$/, qr/an entry is not an array/
	],
	[
		'a status instead of the map', "+OK\r\n",
		qr/^08P01$/, qr/did not answer an array/
	],
	[ 'a map without slots', "*0\r\n", qr/^08006$/, qr/no slot is assigned/ ],);

foreach my $cc (@cluster_cases)
{
	my ($name, $answer, $state, $detail) = @$cc;
	my $fake = RlockTest::FakeRedis->new('CLUSTER SLOTS' => $answer);
	hostile_case(
		name => "CLUSTER SLOTS: $name",
		url => 'redis-cluster://127.0.0.1:' . $fake->port,
		sql => "SELECT rlock_try_acquire('hostile_slots')",
		state => $state,
		detail => qr/DETAIL:.*$detail/,
		limit => 15);
	$fake->stop;
}

# redirections to addresses that make no sense
foreach my $redirect ("-MOVED 5 127.0.0.1:0\r\n", "-ASK 99999 127.0.0.1:6379\r\n",
	"-MOVED 5 127.0.0.1:65abc\r\n")
{
	my $fake = RlockTest::FakeRedis->new(
		'CLUSTER SLOTS' => slots([ 0, 16383, '127.0.0.1', 'self' ]),
		EVALSHA => $redirect,
		EVAL => $redirect);
	(my $what = $redirect) =~ s/\r\n//;
	hostile_case(
		name => "a redirection $what",
		url => 'redis-cluster://127.0.0.1:' . $fake->port,
		sql => "SELECT rlock_try_acquire('hostile_redirect')",
		state => qr/^08P01$/,
		detail => qr/DETAIL:.*redirection for hash slot \d+ makes no sense/,
		limit => 15);
	$fake->stop;
}

# A map whose masters all accept connections and never answer (a dozen
# here; a map may name hundreds): reading the map again after one of them
# failed waits for one node's connect and answer at most, not for each
# in turn (the code before took some 13 s here, 40 s for 40 nodes).
{
	my @silent = map {
		IO::Socket::INET->new(
			LocalAddr => '127.0.0.1',
			LocalPort => 0,
			Proto => 'tcp',
			Listen => 64,
			ReuseAddr => 1) or die "listen: $!"
	} 1 .. 12;
	my $per = int(16384 / @silent) + 1;
	my @ranges = map {
		[ $_ * $per, List::Util::min(($_ + 1) * $per - 1, 16383), '127.0.0.1', $silent[$_]->sockport ]
	} 0 .. $#silent;
	my $fake = RlockTest::FakeRedis->new('CLUSTER SLOTS' => slots(@ranges));
	hostile_case(
		name => 'a map of a dozen masters that never answer',
		url => 'redis-cluster://127.0.0.1:' . $fake->port,
		sql => "SELECT rlock_try_acquire('hostile_silent_map')",
		gucs => { 'rlock.command_timeout' => '3s', 'rlock.connect_timeout' => '1s' },
		state => qr/^08/,
		limit => 10);
	$fake->stop;
	close $_ foreach @silent;
}

# redis-cluster:// at a real standalone Redis (cluster support disabled)
hostile_case(
	name => 'redis-cluster:// at a standalone Redis',
	url => 'redis-cluster://127.0.0.1:' . $redis->port,
	sql => "SELECT rlock_try_acquire('hostile_standalone')",
	state => qr/^08006$/,
	detail => qr/DETAIL:.*cluster support disabled/);

# ---- sentinels naming nonsense masters ----

sub addr_reply
{
	my ($host, $port) = @_;
	return "*2\r\n\$"
	  . length($host)
	  . "\r\n$host\r\n\$"
	  . length($port)
	  . "\r\n$port\r\n";
}

my @sentinel_cases = (
	[ 'an empty host', addr_reply('', '6379'), qr/an empty host/ ],
	[ 'port 0', addr_reply('127.0.0.1', '0'), qr/port 0, outside/ ],
	[ 'port 70000', addr_reply('127.0.0.1', '70000'), qr/port 70000, outside/ ],
	[
		'port "65abc"', addr_reply('127.0.0.1', '65abc'),
		qr/the port is not a number/
	],
	[
		'a host of 300 bytes', addr_reply('h' x 300, '6379'),
		qr/host name longer than 255 bytes/
	],
	[
		'an integer instead of an address', ":1\r\n",
		qr/not an array of a host and a port/
	],
	[
		'*999999999 then an endless stream',
		RlockTest::FakeRedis::endless("*999999999\r\n", ":1\r\n", $CAP / 10),
		qr/999999999 array elements/
	],);

foreach my $sc (@sentinel_cases)
{
	my ($name, $answer, $detail) = @$sc;
	my $fake = RlockTest::FakeRedis->new(
		'SENTINEL GET-MASTER-ADDR-BY-NAME' => $answer);
	hostile_case(
		name => "sentinel names $name",
		url => 'redis-sentinel://127.0.0.1:' . $fake->port . '#hostile',
		sql => 'SELECT rlock_ping() IS NOT NULL',
		state => qr/^08001$/,
		detail => qr/DETAIL:.*$detail/,
		cancel_after => 10);
	$fake->stop;
}

# ---- the background worker asks a hostile sentinel, no SQL running ----
{
	my $fake = RlockTest::FakeRedis->new('SENTINEL GET-MASTER-ADDR-BY-NAME' =>
		  RlockTest::FakeRedis::endless("*999999999\r\n", ":1\r\n", $CAP / 10));
	my $wpid_sql = "SELECT pid FROM pg_stat_activity WHERE backend_type ~ 'rlock'";
	my $wpid = $node->safe_psql('postgres', $wpid_sql);
	RlockTest::set_gucs($node,
		'rlock.redis_url' =>
		  'redis-sentinel://127.0.0.1:' . $fake->port . '#hostile');
	my $t0 = time;
	my $asks = sub {
		scalar grep { /GET-MASTER-ADDR-BY-NAME/ } $fake->commands;
	};
	# the worker asks once a second: three asks, each refused and forgotten
	my $ok = RlockTest::wait_until(sub { $asks->() >= 3 }, 30);
	my ($hwm, $rss) = vm($wpid);
	note sprintf(
		"worker (pid %s): %d asks of the hostile sentinel in %.2f s; VmHWM %s kB, VmRSS %s kB",
		$wpid, $asks->(), time - $t0, $hwm // 'gone', $rss // 'gone');
	ok($ok, 'the worker keeps asking the hostile sentinel (each answer refused)');
	is($node->safe_psql('postgres', $wpid_sql),
		$wpid, 'the worker was not restarted');
	ok(defined $hwm && $hwm < $MEM_BOUND_KB,
		"the worker's memory is bounded (VmHWM < $MEM_BOUND_KB kB)");
	RlockTest::set_gucs($node, 'rlock.redis_url' => $redis->url);
	$fake->stop;
}

# ---- rediss:// at a plain Redis; a port with garbage ----

hostile_case(
	name => 'rediss:// at a plain Redis',
	url => 'rediss://127.0.0.1:' . $redis->port,
	sql => 'SELECT rlock_ping() IS NOT NULL',
	state => qr/^08001$/,
	detail => qr/DETAIL:.*the server does not speak TLS/,
	limit => 10);
hostile_case(
	name => 'redis-cluster:// at a standalone Redis, rlock.command_timeout 60s',
	url => 'redis-cluster://127.0.0.1:' . $redis->port,
	sql => "SELECT rlock_try_acquire('hostile_standalone')",
	gucs => { 'rlock.command_timeout' => '60s' },
	state => qr/^08006$/,
	detail => qr/DETAIL:.*cluster support disabled/,
	limit => 10);

# ---- WAIT answering what is not a replica count ----
#
# A master with one replica (ROLE) grants the lock, and WAIT answers -1:
# the acquisition is undone and the ERROR says what WAIT answered (it said
# "0 of the 1 acknowledgements").
{
	my $evals = 0;
	my $fake = RlockTest::FakeRedis->new(
		'ROLE' => "*3\r\n\$6\r\nmaster\r\n:0\r\n*1\r\n*3\r\n\$9\r\n127.0.0.1\r\n\$4\r\n6399\r\n\$1\r\n0\r\n",
		'EVALSHA' => sub {
			my ($sock) = @_;
			# the acquisition is granted; what follows (the undo) releases
			return RlockTest::FakeRedis::_write($sock,
				$evals++ == 0 ? "*2\r\n:1\r\n:1\r\n" : ":1\r\n");
		},
		'WAIT' => ":-1\r\n");
	hostile_case(
		name => 'WAIT answering -1',
		url => 'redis://127.0.0.1:' . $fake->port,
		sql => "SELECT rlock_try_acquire('hostile_wait')",
		state => qr/^08006$/,
		detail => qr/DETAIL:.*WAIT answered -1, not a number of replicas/,
		limit => 10);
	$fake->stop;
}

{
	my $s = $node->background_psql('postgres', on_error_stop => 0);
	foreach my $url ('redis://127.0.0.1:65abc', 'redis://127.0.0.1:0',
		'redis://127.0.0.1:65536', 'redis://127.0.0.1:+6379',
		'redis://127.0.0.1: 6379', 'redis://127.0.0.1:6379/+1',
		'redis-cluster://127.0.0.1:65abc',
		'redis-sentinel://127.0.0.1:65abc#m')
	{
		my ($out, $err, $state) =
		  RlockTest::run_sql($s, "ALTER SYSTEM SET rlock.redis_url = '$url'");
		is($state, '22023', "the URL $url is refused when set");
	}
	$s->quit;
}

# ---- a Redlock master that lies about who it is ----
#
# Which server answers on each new connection to a master (INFO server) is
# read within the reply bounds, and a master claiming another master's
# run_id is that master, not a second vote.  Two real masters and a fake
# one that grants every lock: an endless INFO costs the fake master only
# (the two real ones still make the majority), a copied run_id fails
# closed (22023) and leaves nothing on the real ones.
{
	my @real = map { RlockTest::Redis->new } 1 .. 2;
	my ($run_id) =
	  scalar($real[0]->cli('INFO', 'server')) =~ /run_id:([0-9a-f]{40})/;
	ok(defined $run_id, 'the first real master tells its run_id');
	my $urls = sub {
		join(',', (map { $_->url } @real),
			'redis://127.0.0.1:' . $_[0]->port);
	};

	my $fake = RlockTest::FakeRedis->new(INFO =>
		  RlockTest::FakeRedis::endless("\$999999999\r\n", 'x', $CAP / 10));
	hostile_case(
		name => 'a Redlock master answering INFO with an endless bulk',
		setting => 'rlock.redlock_urls',
		url => $urls->($fake),
		sql => "SELECT rlock_redlock_try_acquire('hostile_rl1', '30 seconds')",
		state => qr/^00000$/,
		limit => 20);
	$fake->stop;

	my $info = "# Server\r\nredis_version:7.0.0\r\nrun_id:$run_id\r\n";
	$fake = RlockTest::FakeRedis->new(
		INFO => '$' . length($info) . "\r\n$info\r\n");
	hostile_case(
		name => 'a Redlock master claiming another master\'s run_id',
		setting => 'rlock.redlock_urls',
		url => $urls->($fake),
		sql => "SELECT rlock_redlock_try_acquire('hostile_rl2', '30 seconds')",
		state => qr/^22023$/,
		detail => qr/DETAIL:.*[Mm]aster 1 .* master 3 /,
		limit => 20);
	is(join(',', map { scalar $_->cli('EXISTS', 'hostile_rl2') } @real),
		'0,0', '... nothing left on the real masters');
	$fake->stop;
	RlockTest::set_gucs($node, 'rlock.redlock_urls' => '');
	$_->stop for @real;
}

# ---- text a server sent, shown safely ----
#
# Bytes that are not valid text in the database's encoding never reach a
# query result or a message as they are: they are shown escaped (\xNN),
# so that the value can be stored and the message reaches a client in any
# encoding.  (The code before returned the bytes as text, and a LATIN1
# client got "invalid byte sequence" instead of rlock's ERROR.)
{
	$node->safe_psql('postgres',
		"CREATE DATABASE u8 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0");
	$node->safe_psql('u8', 'CREATE EXTENSION rlock');

	my $fake = RlockTest::FakeRedis->new(
		ROLE => "*3\r\n\$4\r\n\xff\xfe\xc0\x80\r\n:0\r\n*0\r\n");
	RlockTest::set_gucs($node, 'rlock.redis_url' => 'redis://127.0.0.1:' . $fake->port);
	is($node->safe_psql('u8', 'SELECT role FROM rlock_nodes()'),
		'\xff\xfe\xc0\x80', 'a ROLE answer of bytes that are no UTF-8 is shown escaped');
	$fake->stop;

	$fake = RlockTest::FakeRedis->new(
		EVALSHA => "-ERR bad \xff\xfe\x01\r\n",
		EVAL => "-ERR bad \xff\xfe\x01\r\n");
	RlockTest::set_gucs($node, 'rlock.redis_url' => 'redis://127.0.0.1:' . $fake->port);
	my ($ret, $o, $e) = $node->psql('u8',
		"SET client_encoding = 'LATIN1'; SELECT rlock_try_acquire('hostile_text')");
	like($e, qr/ERROR:  Redis returned an error for lock "hostile_text"\nDETAIL:  ERR bad \\xff\\xfe\\x01/,
		'an error reply of such bytes reaches a LATIN1 client as rlock\'s ERROR, escaped');
	$fake->stop;

	RlockTest::set_gucs($node, 'rlock.redis_url' => $redis->url);
	$redis->cli('HSET', 'hostile_field', "01234567-89ab-cdef-0123-456789abcdef:\xff\xfe", '1');
	$redis->cli('PEXPIRE', 'hostile_field', '60000');
	($ret, $o, $e) = $node->psql('u8',
		"SELECT encode(holder::bytea, 'hex'), convert_from(holder::bytea, 'UTF8') FROM rlock_status('hostile_field')");
	is("$ret/$e", '0/', "a lock's field of such bytes, shaped like a holder, is valid text");
	unlike($o, qr/fffe/, '... without the bytes');
}

# ---- the server never restarted ----

RlockTest::check_never_restarted($node, $log_start, $pm_pid);

done_testing();
