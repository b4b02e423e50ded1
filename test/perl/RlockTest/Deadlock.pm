
# Copyright (c) 2026, rlock developers

#
# Deadlock cycles for the TAP tests 065_deadlock_cycles.pl and
# 066_deadlock_kinds.pl: nodes with a server name and 1 s deadlock
# timeouts, sessions that know their pid and server, and one function that
# builds a cycle of waits, closes it, and checks what happens (SPEC.md 5.6).
#
package RlockTest::Deadlock;

use strict;
use warnings;

use RlockTest ();
use Carp;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

# the deadlock timeout of every node, seconds
our $DT = 1;

# a generous bound on each wait of the test, seconds: a deadlock that is
# not detected meets it
our $BOUND = 30;

# RLOCK_TEST_DEADLOCK_OFF=1 in the environment: rlock.deadlock_timeout = 0
# (never check), to see these tests fail without deadlock detection (each
# case then meets a bound of 10 s)
my $off = $ENV{RLOCK_TEST_DEADLOCK_OFF} // 0;
$BOUND = 10 if $off;

=pod

=head1 RlockTest::Deadlock

=over

=item RlockTest::Deadlock::node($server_name, $redis, %opts)

RlockTest::new_node with rlock.server_name = $server_name and
deadlock_timeout and rlock.deadlock_timeout of $DT seconds (%opts as
new_node's; extra_conf is added to; store => the RlockTest::Cluster the
node locks on, when $redis is undef).  Also creates table dl_rows (id int,
one row per id 1..3) for cycles through row locks.

=cut

sub node
{
	my ($name, $redis, %opts) = @_;
	my $ms = $DT * 1000;
	my $store = delete $opts{store} // $redis;
	$opts{extra_conf} = ($opts{extra_conf} // '')
	  . "\nrlock.server_name = '$name'\n"
	  . "deadlock_timeout = '${ms}ms'\n"
	  . "rlock.deadlock_timeout = '" . ($off ? 0 : $ms) . "ms'\n";
	my $n = RlockTest::new_node($name, $redis, %opts);
	$n->{dl_store} = $store;
	$n->safe_psql('postgres',
		'CREATE TABLE dl_rows (id int PRIMARY KEY); '
		  . 'INSERT INTO dl_rows SELECT generate_series(1, 3)');
	return $n;
}

=pod

=item RlockTest::Deadlock::session($node)

A background psql session (database postgres, on_error_stop off, VERBOSITY
verbose so that errors show their SQLSTATE) that knows its node, pid,
server name and holder id ($s->{dl_node}, {dl_pid}, {dl_server},
{dl_holder}).

=cut

sub session
{
	my ($node) = @_;
	my $s = $node->background_psql('postgres',
		on_error_stop => 0,
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	$s->{dl_node} = $node;
	$s->{dl_pid} = $s->query_safe('SELECT pg_backend_pid()');
	chomp $s->{dl_pid};
	$s->{dl_server} = $s->query_safe('SELECT rlock_server_name()');
	chomp $s->{dl_server};
	$s->{dl_holder} = $s->query_safe('SELECT rlock_holder_id()');
	chomp $s->{dl_holder};
	return $s;
}

# A DETAIL line of SPEC 5.6: $w waits for $what, blocked by $b.
sub edge_line
{
	my ($w, $what, $b) = @_;
	return "Process $w->{dl_pid} on server \"$w->{dl_server}\" waits for $what; "
	  . "blocked by process $b->{dl_pid} on server \"$b->{dl_server}\".";
}

# The DETAIL of a verbose psql error message, as lines.
sub detail_lines
{
	my ($err) = @_;
	my ($d) = $err =~ /^DETAIL:  (.*?)\n(?:CONTEXT|LOCATION|HINT):/ms;
	return defined $d ? split(/\n/, $d) : ();
}

# Run $sql in $s and wait for it; dies on an error.
sub must
{
	my ($s, $sql) = @_;
	my ($out, $err, $state) = RlockTest::run_sql($s, $sql);
	croak "$sql in pid $s->{dl_pid}: $state $err"
	  unless defined $state && $state eq '00000';
	return $out;
}

# Wait until $s's backend waits (for rlock, or for a PostgreSQL lock), and
# an rlock wait is known in Redis, its "since" fixed there: a wait started
# after that began later on Redis's clock, whatever the load (the victim
# is the knot's waiter whose wait began last).
sub wait_waiting
{
	my ($s) = @_;
	my $node = $s->{dl_node};
	$node->poll_query_until('postgres',
		"SELECT wait_event_type IN ('Extension', 'Lock') FROM pg_stat_activity "
		  . "WHERE pid = $s->{dl_pid}")
	  or croak "pid $s->{dl_pid} never waited";
	my $type = $node->safe_psql('postgres',
		"SELECT wait_event_type FROM pg_stat_activity WHERE pid = $s->{dl_pid}");
	return if $type eq 'Lock';
	my $r = $node->{dl_store};
	my $key = "{rlock:servers}:wait:$s->{dl_holder}";
	RlockTest::wait_until(
		sub {
			my $v = $r->isa('RlockTest::Cluster')
			  ? scalar($r->call($key, 'EXISTS', $key))
			  : scalar($r->cli('EXISTS', $key));
			return ($v // '') eq '1';
		},
		$BOUND) or croak "the wait of pid $s->{dl_pid} never reached Redis";
	return;
}

# bg_result, and the session is no longer busy
sub result
{
	my ($s) = @_;
	$s->{dl_busy} = 0;
	return RlockTest::bg_result($s);
}

# After a failed check: cancel each session's statement in progress, if
# any, and roll its transaction back, so that the next case starts clean.
sub cancel_all
{
	my (@sessions) = @_;
	foreach my $s (@sessions)
	{
		if (defined $s->{dl_busy} && $s->{dl_busy})
		{
			$s->{dl_node}->safe_psql('postgres',
				"SELECT pg_cancel_backend($s->{dl_pid})");
			RlockTest::wait_until(sub { RlockTest::bg_done($s) }, $BOUND);
			result($s);
		}
		RlockTest::run_sql($s, 'ROLLBACK');
	}
	return;
}

=pod

=item RlockTest::Deadlock::cycle($name, %case)

One case, some TAP checks.  Every session of the case first runs BEGIN,
then its hold statements ($case{hold}: [session, sql] in order; their
outputs are kept).  Then each of $case{waits} ([session, sql]) is started
in the background, in order, each after the previous one is seen waiting;
the last closes the cycle.

With $case{lines} (or a function of the hold outputs returning them):
[waiter, what, blocker] for each DETAIL line, the victim's first (or a
list of such lists, when the way round a knot may be any of them): checks
that the victim, and only it, fails with 40P01 "deadlock detected" within
$DT + 3 s of the cycle closing, with exactly those DETAIL lines (the first
one the victim's, the others in any order).

With $case{no_deadlock}: checks that no session fails for 3 x $DT
(polled), runs $case{during}->() if given (more checks while they all
wait), then commits the sessions of $case{free} (holders that do not
wait), which lets the waits end.

Then (both): the victim's transaction is rolled back, and each wait that
ends is checked to have succeeded and its transaction committed, until all
have: the others acquire.  Returns the measured seconds to the error.

=cut

sub cycle
{
	my ($name, %case) = @_;
	my @holds = @{ $case{hold} };
	my @waits = @{ $case{waits} };
	my %seen;
	my @sessions = grep { !$seen{$_}++ } map { $_->[0] } @holds, @waits;
	my @hold_out;
	my $secs;

	must($_, 'BEGIN') foreach @sessions;
	push @hold_out, must($_->[0], $_->[1]) foreach @holds;

	my $t0;
	foreach my $i (0 .. $#waits)
	{
		my ($s, $sql) = @{ $waits[$i] };
		RlockTest::start_bg($s, $sql);
		$s->{dl_busy} = 1;
		$t0 = time();
		wait_waiting($s) if $i < $#waits;
	}
	my @pending = map { $_->[0] } @waits;
	my $any_done = sub {
		grep { RlockTest::bg_done($_) } @pending;
	};

	my @rest;
	if ($case{no_deadlock})
	{
		my $ended = RlockTest::wait_until($any_done, 3 * $DT + 0.5);
		ok(!$ended, "$name: no session fails for 3 x deadlock_timeout");
		if ($ended)
		{
			foreach my $s (grep { RlockTest::bg_done($_) } @pending)
			{
				my (undef, $err) = result($s);
				diag("$name: pid $s->{dl_pid} ended: $err");
			}
		}
		$case{during}->() if $case{during};
		must($_, 'COMMIT') foreach @{ $case{free} // [] };
		@rest = @pending;
	}
	else
	{
		my $lines = $case{lines};
		$lines = $lines->(@hold_out) if ref $lines eq 'CODE';
		# several ways round a knot may be right: a list of line lists
		my @choices = ref $lines->[0][0] eq 'ARRAY' ? @$lines : ($lines);
		my $victim = $choices[0][0][0];
		my $ended = RlockTest::wait_until($any_done, $BOUND);
		$secs = time() - $t0;
		if (!$ended)
		{
			fail("$name: the victim (pid $victim->{dl_pid}) ends");
			diag("$name: no session ended in $BOUND s: no deadlock found");
			cancel_all(@sessions);
			return undef;
		}
		# the victim has ended; others may have too, but only by
		# acquiring once its abort freed what they waited for (checked
		# below: every other session's wait succeeds).  Such a session's
		# result may even be read before the victim's error is (the
		# victim's abort frees the lock before its client has the error):
		# the victim's own end is awaited a moment too.
		RlockTest::wait_until(sub { RlockTest::bg_done($victim) }, 5);
		my @done = grep { RlockTest::bg_done($_) } @pending;
		ok(grep({ $_ == $victim } @done),
			"$name: the victim (pid $victim->{dl_pid}) ends")
		  or diag("ended: " . join(',', map { $_->{dl_pid} } @done));
		note(sprintf("%s: the victim failed %.3f s after the cycle closed",
			$name, $secs));
		ok($secs < $DT + 3,
			"$name: within deadlock_timeout + 3 s of the cycle closing");
		my (undef, $err, $state) = result($victim);
		is($state, '40P01', "$name: SQLSTATE 40P01");
		like($err, qr/ERROR:  40P01: deadlock detected\n/,
			"$name: ERROR 40P01 deadlock detected");
		note("$name: the victim's error:\n$err");
		my @got = detail_lines($err);
		my @want = map { edge_line(@$_) } @{ $choices[0] };
		foreach my $c (@choices)
		{
			my @w = map { edge_line(@$_) } @$c;
			@want = @w if $w[0] eq ($got[0] // '');
		}
		is($got[0], $want[0], "$name: the DETAIL's first line is the victim's wait");
		is_deeply([ sort @got ], [ sort @want ],
			"$name: one DETAIL line per edge")
		  or diag($err);
		must($victim, 'ROLLBACK');
		@rest = grep { $_ != $victim } @pending;
	}

	# the others acquire, one after the other as each commits
	while (@rest)
	{
		my $ok = RlockTest::wait_until($any_done = sub {
				grep { RlockTest::bg_done($_) } @rest }, $BOUND);
		if (!$ok)
		{
			fail("$name: the other sessions acquire");
			cancel_all(@sessions);
			return $secs;
		}
		foreach my $s (grep { RlockTest::bg_done($_) } @rest)
		{
			my ($out, $err, $state) = result($s);
			is($state, '00000', "$name: pid $s->{dl_pid} acquires")
			  or diag($err);
			must($s, 'COMMIT');
			@rest = grep { $_ != $s } @rest;
		}
	}
	# sessions that only held (no wait): their transactions end
	my %waiting = map { ($_->[0] => 1) } @waits;
	foreach my $s (@sessions)
	{
		next if $waiting{$s};
		next if grep { $_ == $s } @{ $case{free} // [] };
		must($s, 'COMMIT');
	}
	return $secs;
}

=pod

=back

=cut

1;
