# Copyright (c) 2026, rlock developers
#
# The generated privilege property (SPEC.md sections 5.5 "Only their own
# kind" and 8 "A lock function touches only locks"): every function PUBLIC
# may execute -- read from the catalog now, so that a function added later
# is covered without editing this file -- is called as a plain role, with
# arguments built from its signature, on a key of every Redis type and of
# every other rlock or Redisson kind, and the whole Redis database
# (every key's DUMP and expiry) must be unchanged afterwards.  A function
# is excused only on the keys of its own kind (a semaphore function on
# rlock's semaphore, say), where changing them is its job.  Errors are
# fine (with a SQLSTATE other than 38000, a script's error, or XX000);
# changes are not; no backend may crash.
use strict;
use warnings;

use IO::Socket::INET;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use RlockTest;

my $redis = RlockTest::Redis->new;
my $node = RlockTest::new_node('prop', $redis,
	extra_conf => "rlock.redlock_urls = '" . $redis->url(db => 0) . "'\n");
$node->safe_psql('postgres', 'CREATE ROLE prop_plain LOGIN');

# ---- a small RESP client: DUMP and expiries in one round trip ----

my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
	PeerPort => $redis->port, Proto => 'tcp')
  or die "cannot connect to Redis: $!";
binmode $sock;

sub resp_read
{
	my $line = <$sock>;
	die "Redis closed the connection\n" unless defined $line;
	$line =~ s/\r\n$//;
	my ($t, $rest) = (substr($line, 0, 1), substr($line, 1));
	return $rest if $t eq '+' || $t eq ':';
	return "ERR:$rest" if $t eq '-';
	if ($t eq '$')
	{
		return undef if $rest < 0;
		my $buf = '';
		read($sock, $buf, $rest + 2) == $rest + 2 or die "short read\n";
		return substr($buf, 0, $rest);
	}
	if ($t eq '*')
	{
		return undef if $rest < 0;
		return [ map { resp_read() } 1 .. $rest ];
	}
	die "unexpected reply $line\n";
}

sub cmds
{
	my @cmds = @_;
	my $out = '';
	foreach my $c (@cmds)
	{
		$out .= '*' . scalar(@$c) . "\r\n";
		$out .= '$' . length($_) . "\r\n$_\r\n" foreach @$c;
	}
	print $sock $out;
	return map { resp_read() } @cmds;
}
sub cmd { my @r = cmds([@_]); return $r[0]; }

# every key: its DUMP and its absolute expiry (ms; -1 none); not the
# servers' announcements ({rlock:servers}...), which their workers refresh
# on their own
sub snapshot
{
	my %s;
	my $cursor = 0;
	my @keys;
	do
	{
		my $r = cmd('SCAN', $cursor, 'COUNT', 1000);
		($cursor, my $k) = @$r;
		push @keys, grep { index($_, '{rlock:servers}') != 0 } @$k;
	} while ($cursor ne '0');
	my @r = cmds(map { ([ 'DUMP', $_ ], [ 'PEXPIRETIME', $_ ]) } @keys);
	for my $i (0 .. $#keys)
	{
		$s{ $keys[$i] } = [ $r[ 2 * $i ], $r[ 2 * $i + 1 ] ];
	}
	return \%s;
}

sub diff_snapshots
{
	my ($a, $b) = @_;
	my @d;
	foreach my $k (sort keys %$a)
	{
		if (!exists $b->{$k}) { push @d, "deleted $k"; next; }
		push @d, "changed $k"
		  if ($a->{$k}[0] // '') ne ($b->{$k}[0] // '');
		push @d, "expiry of $k changed"
		  if ($a->{$k}[1] // '') ne ($b->{$k}[1] // '');
	}
	# a key created is no change: taking a free name is what a lock
	# function does, and rlock keeps request latches of its own
	return @d;
}

# put the database back as the snapshot has it (keys created deleted)
sub restore
{
	my ($base) = @_;
	my $now = snapshot();
	my @c;
	foreach my $k (keys %$now)
	{
		push @c, [ 'DEL', $k ] unless exists $base->{$k};
	}
	foreach my $k (keys %$base)
	{
		next
		  if exists $now->{$k}
		  && ($now->{$k}[0] // '') eq ($base->{$k}[0] // '')
		  && ($now->{$k}[1] // '') eq ($base->{$k}[1] // '');
		my $exp = $base->{$k}[1];
		push @c, [ 'RESTORE', $k, ($exp > 0 ? $exp : 0), $base->{$k}[0],
			'REPLACE', ($exp > 0 ? ('ABSTTL') : ()) ];
	}
	return unless @c;
	foreach my $r (cmds(@c))
	{
		die "restore: $r\n" if defined $r && $r =~ /^ERR:/;
	}
}

# ---- the keys under test, one name each ----
#
# kind: the rlock kind whose functions may change it (undef: none may).
# The rlock kinds are made by a superuser session that keeps holding them
# with fixed leases (nothing renews them while the property runs).

my $owner = $node->background_psql('postgres', on_error_stop => 0);
my $far = 600000;
my %fixtures = (
	int_string => { kind => undef, make => sub { cmd('SET', $_[0], '42') } },
	one_string => { kind => undef, make => sub { cmd('SET', $_[0], '1') } },
	zero_string => { kind => undef, make => sub { cmd('SET', $_[0], '0') } },
	negative_string => { kind => undef, make => sub { cmd('SET', $_[0], '-7') } },
	huge_string =>
	  { kind => undef, make => sub { cmd('SET', $_[0], '99999999999999999999') } },
	text_string => { kind => undef, make => sub { cmd('SET', $_[0], 'hello') } },
	hash => {
		kind => undef,
		make => sub { cmd('HSET', $_[0], 'f', '1', 'mode', 'read', 'item', '3') }
	},
	hash_expiring => {
		kind => undef,
		make => sub {
			cmd('HSET', $_[0], 'f', '1', 'mode', 'write');
			cmd('PEXPIRE', $_[0], $far);
		}
	},
	zset => { kind => undef, make => sub { cmd('ZADD', $_[0], 1, 'a', 2, 'b') } },
	# an application's sorted set where a semaphore keeps its permits out
	timeout_zset => {
		kind => undef,
		make => sub { cmd('ZADD', "{$_[0]}:timeout", 1, 'a', 9999999999999, 'b') }
	},
	list => { kind => undef, make => sub { cmd('RPUSH', $_[0], 'a', 'b') } },
	set => { kind => undef, make => sub { cmd('SADD', $_[0], 'a', 'b') } },
	stream => { kind => undef, make => sub { cmd('XADD', $_[0], '*', 'f', 'v') } },
	# Redisson's objects, made by a Java client: an RLock held, and a
	# semaphore with a permit out (an integer without rlock's marker: one
	# cannot tell it from an application's counter, so no PUBLIC function
	# may change it)
	redisson_lock => {
		kind => undef,
		make => sub {
			RlockTest::Redisson::try_lock($redis, $_[0], $far,
				'6b7d2e4c-0000-4000-8000-000000000001:1');
		}
	},
	redisson_semaphore => {
		kind => undef,
		make => sub {
			RlockTest::Redisson::sem_try_set_permits($redis, $_[0], 3);
			RlockTest::Redisson::sem_try_acquire($redis, $_[0], 1, $far);
		}
	},
	# rlock's own kinds, held by another session
	lock => { kind => 'lock', sql => "SELECT rlock_acquire('%s', '10 min')" },
	lock_owner_token => {
		kind => 'lock',
		sql => "SELECT rlock_acquire('%s', '10 min', owner => 'prop-token')"
	},
	read_lock => { kind => 'rw', sql => "SELECT rlock_read_acquire('%s', '10 min')" },
	write_lock => { kind => 'rw', sql => "SELECT rlock_write_acquire('%s', '10 min')" },
	fair_lock => { kind => 'fair', sql => "SELECT rlock_fair_acquire('%s', '10 min')" },
	fenced_lock =>
	  { kind => 'fenced', sql => "SELECT rlock_fenced_acquire('%s', '10 min')" },
	semaphore => {
		kind => 'semaphore',
		sql => "SELECT rlock_semaphore_set_permits('%s', 3), rlock_semaphore_acquire('%s', 1, '10 min')"
	},
	latch => { kind => 'latch', sql => "SELECT rlock_latch_set_count('%s', 3)" },
);

foreach my $f (sort keys %fixtures)
{
	my $name = "pp_$f";
	$fixtures{$f}{name} = $name;
	if ($fixtures{$f}{sql})
	{
		my ($out, $err) = RlockTest::query_err($owner,
			$fixtures{$f}{sql} =~ s/%s/$name/gr);
		die "making $f: $err" if $err =~ /ERROR/;
	}
	else
	{
		$fixtures{$f}{make}->($name);
	}
}
# an rlock lock and an application key side by side must stay apart too
my $base = snapshot();
ok(scalar(keys %$base) >= scalar(keys %fixtures),
	scalar(keys %$base) . ' keys under test');

# ---- the functions PUBLIC can execute, from the catalog ----

my $fns = $node->safe_psql('postgres', q{
	SELECT p.proname, p.oid::regprocedure,
	       array_to_string(ARRAY(SELECT format_type(t, NULL)
	                               FROM unnest(p.proargtypes::oid[]) AS t), ','),
	       array_to_string(coalesce(p.proargnames, '{}'), ','), p.pronargdefaults
	  FROM pg_proc p
	  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
	  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'rlock'
	 WHERE has_function_privilege('prop_plain', p.oid, 'EXECUTE')
	 ORDER BY 2::text});
my @functions;
foreach my $line (split /\n/, $fns)
{
	my ($proname, $sig, $types, $names, $ndefaults) = split /\|/, $line;
	push @functions, {
		proname => $proname,
		sig => $sig,
		types => [ split /,/, $types ],
		names => [ split /,/, $names ],
		ndefaults => $ndefaults };
}
ok(scalar(@functions) > 30, scalar(@functions) . ' functions PUBLIC can execute');

# the kind a function acts on, by its name
sub kind_of
{
	my ($proname) = @_;
	return 'semaphore' if $proname =~ /^rlock_semaphore_/;
	return 'latch' if $proname =~ /^rlock_latch_/;
	return 'rw' if $proname =~ /^rlock_(read|write)_/;
	return 'fair' if $proname =~ /^rlock_fair_/;
	return 'fenced' if $proname =~ /^rlock_fenced_/;
	return 'redlock' if $proname =~ /^rlock_redlock_/;
	return 'lock';
}

# Argument lists for a call: two variants, every argument given (a first,
# "small" one and a second with the other choices).
sub arg_value
{
	my ($type, $argname, $key, $v) = @_;
	my $q = "'$key'";
	if ($type eq 'text')
	{
		return $q unless defined $argname && $argname eq 'owner';
		return $v ? "'f'" : 'NULL';
	}
	return "ARRAY[$q]" if $type eq 'text[]';
	return $v ? '100' : '1' if $type eq 'integer' || $type eq 'bigint';
	if ($type eq 'interval')
	{
		return $v ? "'10 ms'" : "'0'" if defined $argname && $argname eq 'wait';
		return $v ? 'NULL' : "'1 minute'";
	}
	return $v ? 'true' : 'false' if $type eq 'boolean';
	return 'NULL';
}

sub calls_of
{
	my ($fn, $key) = @_;
	my @calls;
	for my $v (0, 1)
	{
		my @args;
		for my $i (0 .. $#{ $fn->{types} })
		{
			push @args, arg_value($fn->{types}[$i], $fn->{names}[$i], $key, $v);
		}
		push @calls, "SELECT $fn->{proname}(" . join(', ', @args) . ')';
	}
	return @calls;
}

# ---- the property ----

my $plain = $node->background_psql('postgres', on_error_stop => 0,
	extra_params => [ '-U', 'prop_plain' ]);
RlockTest::query_err($plain,
	"SET lock_timeout = '50ms'; SET statement_timeout = '10s'");
my $log_start = -s $node->logfile;
my ($calls, $changes, $leaks) = (0, 0, 0);
my $t0 = time();

foreach my $fn (@functions)
{
	my @bad;
	my $keyed = grep { $_ eq 'text' || $_ eq 'text[]' } @{ $fn->{types} };
	my @targets = $keyed ? sort keys %fixtures : ('none');
	foreach my $f (@targets)
	{
		my $own = $f ne 'none' && defined $fixtures{$f}{kind}
		  && $fixtures{$f}{kind} eq kind_of($fn->{proname});
		my $key = $f eq 'none' ? 'pp_none' : $fixtures{$f}{name};
		foreach my $sql (calls_of($fn, $key))
		{
			$calls++;
			my ($out, $err, $state) = RlockTest::run_sql($plain, $sql);
			# what the session took of its own kind it gives back before the
			# database is looked at (taking is no change then); anything
			# else is looked at first
			RlockTest::run_sql($plain, 'SELECT rlock_release_all()') if $own;
			my @d = diff_snapshots($base, snapshot());
			RlockTest::run_sql($plain, 'SELECT rlock_release_all()') unless $own;
			if (@d && !$own)
			{
				$changes++;
				push @bad, "$f: $sql: " . join(', ', @d);
			}
			if (defined $state && ($state eq '38000' || $state eq 'XX000'))
			{
				$leaks++;
				my ($first) = $err =~ /(ERROR:[^\n]*)/;
				push @bad, "$f: $sql: SQLSTATE $state: " . ($first // $err);
			}
			restore($base) if @d;
		}
	}
	ok(!@bad, "$fn->{sig} leaves what is not its kind unchanged")
	  or diag(join("\n", @bad));
}
note sprintf('%d calls in %.1f s: %d changed a key not of their kind, %d gave 38000 or XX000',
	$calls, time() - $t0, $changes, $leaks);

# ---- no backend crashed ----

my $log = slurp_file($node->logfile, $log_start);
unlike($log, qr/terminated by signal|server process .* was terminated|PANIC/,
	'no backend crashed');
is($node->safe_psql('postgres', 'SELECT 1'), '1', 'the server answers');

$plain->quit;
$owner->quit;
done_testing();
