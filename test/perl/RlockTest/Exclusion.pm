
# Copyright (c) 2026, rlock developers

#
# Sessions that take one lock in a loop around a recorded critical
# section, to check that no two committed sections overlap.
#
package RlockTest::Exclusion;

use strict;
use warnings;

use RlockTest ();    # wait_until: at run time

use IPC::Run;
use Time::HiRes ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

=pod

=head1 RlockTest::Exclusion

psql sessions, each in its own database, that take one lock in a loop
for a transaction around a critical section whose start and end they
record, while the test makes Redis fail over, move slots, ...; then
whether any two committed sections overlap.

  my $ex = RlockTest::Exclusion->new(
      sessions => [ [ $node_a, 'postgres' ], [ $node_a, 'db2' ],
                    [ $node_b, 'postgres' ], [ $node_b, 'db2' ] ],
      lease => '10s', timeout_s => 120);
  ok($ex->drive(sub { $ex->sections >= 20 }, 60), 'they take turns');
  my $t = time();
  ...;                                   # a failover, say
  ok($ex->drive(sub { $ex->sections($t) >= 20 }, 60), 'and after it');
  $ex->finish;                           # one assertion per session
  note scalar(@{ $ex->intervals }) . ' sections committed';
  $ex->check;                            # the two assertions on them

=over

=item RlockTest::Exclusion->new(%opts)

In each [node, database] of sessions (each database once): create the
tables excl_log (sess text, t_start timestamptz, t_end timestamptz) and
excl_stop (x int); then start psql there (IPC::Run, ON_ERROR_STOP=0,
psql variable sess = "<node name>/<database>", the session's name), fed a
script that sets lock_timeout and then repeats an iteration: unless
excl_stop has a row, BEGIN, rlock_xact_acquire(lock, lease), note
clock_timestamp(), pg_sleep(0.005), insert (sess, start,
clock_timestamp()) into excl_log, COMMIT.  An error (during a failover,
say) rolls the transaction back and the next iteration begins.  The
script is fed as it goes (by drive): the loops run only while drive is
called.

Options (defaults in brackets):

=over

=item sessions => [ [ $node, $db ], ... ]

Required.

=item lock => 'name' ['excl']

=item lease => 'interval' ['10s']

The lease of each acquisition.

=item lock_timeout => 'interval' ['20s']

=item timeout_s => N [120]

The IPC::Run timeout of each psql: it is killed after that.

=back

=cut

sub new
{
	my ($class, %opts) = @_;
	my $lock = $opts{lock} // 'excl';
	my $lease = $opts{lease} // '10s';
	my $lock_timeout = $opts{lock_timeout} // '20s';
	my $timeout_s = $opts{timeout_s} // 120;
	my $self = bless {
		loops => [],
		intervals => [],
		by_sess => {},
		errors => {},
		iteration => <<"EOS",
SELECT NOT EXISTS (SELECT FROM excl_stop) AS go \\gset
\\if :go
BEGIN;
SELECT rlock_xact_acquire('$lock', '$lease');
SELECT clock_timestamp() AS t0 \\gset
SELECT pg_sleep(0.005);
INSERT INTO excl_log VALUES (:'sess', :'t0', clock_timestamp());
COMMIT;
\\endif
EOS
	}, $class;

	foreach my $s (@{ $opts{sessions} })
	{
		my ($n, $db) = @$s;
		$n->safe_psql($db,
			'CREATE TABLE excl_log (sess text, t_start timestamptz, t_end timestamptz); '
			  . 'CREATE TABLE excl_stop (x int)');
	}
	foreach my $s (@{ $opts{sessions} })
	{
		my ($n, $db) = @$s;
		# (PostgreSQL 13's test modules have no installed_command: psql is
		# in PATH)
		my $psql = $n->can('installed_command') ? $n->installed_command('psql') : 'psql';
		my $l = { node => $n, db => $db, in => '', out => '', err => '',
			sess => $n->name . "/$db" };
		$l->{in} = "SET lock_timeout = '$lock_timeout';\n" . $self->{iteration} x 20;
		$l->{h} = IPC::Run::start(
			[ $psql, '-X', '-q', '-A', '-t',
				'-v', 'ON_ERROR_STOP=0', '-v', "sess=$l->{sess}",
				'-d', $n->connstr($db) ],
			'<', \$l->{in}, '>', \$l->{out}, '2>', \$l->{err},
			IPC::Run::timeout($timeout_s));
		push @{ $self->{loops} }, $l;
	}
	return $self;
}

=pod

=item $ex->drive(\&cond, $timeout_s)

Pump the loops, feeding them more iterations, until cond() returns true
or $timeout_s passes (RlockTest::wait_until); returns whether cond() did.

=cut

sub drive
{
	my ($self, $cond, $timeout_s) = @_;
	return RlockTest::wait_until(
		sub {
			foreach my $l (@{ $self->{loops} })
			{
				$l->{in} .= $self->{iteration} x 20 if length($l->{in}) < 2000;
				$l->{h}->pump_nb;
				$l->{out} = '';    # results of SELECTs: not needed
			}
			return $cond->();
		},
		$timeout_s);
}

=pod

=item $ex->sections($after)

How many critical sections the sessions have committed so far, all or
those begun after epoch $after.

=cut

sub sections
{
	my ($self, $after) = @_;
	my $cond = defined $after ? "WHERE t_start > to_timestamp($after)" : '';
	my $total = 0;
	foreach my $l (@{ $self->{loops} })
	{
		$total += $l->{node}->safe_psql($l->{db}, "SELECT count(*) FROM excl_log $cond");
	}
	return $total;
}

=pod

=item $ex->each_since($after)

Per session, in the order given to new, how many critical sections it
committed that began after epoch $after.

=cut

sub each_since
{
	my ($self, $after) = @_;
	return map {
		$_->{node}->safe_psql($_->{db},
			"SELECT count(*) FROM excl_log WHERE t_start > to_timestamp($after)")
	} @{ $self->{loops} };
}

=pod

=item $ex->drive_until_each($after, $n, $what)

Drive the loops (at most 60 s) until every session has committed $n
sections begun after epoch $after: one TAP check, named $what, with the
counts as diagnostics when it fails.  Returns whether it passed.

=cut

sub drive_until_each
{
	my ($self, $after, $n, $what) = @_;
	my $ok = $self->drive(sub { !grep { $_ < $n } $self->each_since($after) }, 60);
	Test::More::ok($ok, $what)
	  or Test::More::diag('sections since: ' . join(', ', $self->each_since($after)));
	return $ok;
}

=pod

=item $ex->finish

Stop the loops (a row in each excl_stop, then the end of the script): an
assertion for each, "<sess>: the loop ends when told to" (one that does
not is killed).  Then read the committed sections of every session and
the ERROR lines each met (but "current transaction is aborted"): see
intervals, by_sess, errors.

=cut

sub finish
{
	my ($self) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	foreach my $l (@{ $self->{loops} })
	{
		$l->{node}->safe_psql($l->{db}, 'INSERT INTO excl_stop VALUES (1)');
	}
	my @intervals;
	foreach my $l (@{ $self->{loops} })
	{
		# the end of the script (what was not yet written is not needed)
		$l->{in} = "\\q\n";
		ok(eval { $l->{h}->finish; 1 }, "$l->{sess}: the loop ends when told to")
		  or $l->{h}->kill_kill;
		foreach my $row (split /\n/,
			$l->{node}->safe_psql($l->{db},
				'SELECT sess, extract(epoch FROM t_start), extract(epoch FROM t_end) FROM excl_log'))
		{
			my ($sess, $st, $en) = split /\|/, $row;
			push @intervals, [ $st, $en, $sess ];
			$self->{by_sess}{$sess}++;
		}
		$self->{errors}{ $l->{sess} } =
		  [ grep { !/current transaction is aborted/ } ($l->{err} =~ /^.*ERROR:.*$/mg) ];
	}
	$self->{intervals} = [ sort { $a->[0] <=> $b->[0] } @intervals ];
	return;
}

=pod

=item $ex->session_names

The sessions' names, "<node name>/<database>", in the order of new's
sessions.

=item $ex->intervals

After finish: the committed sections, [start epoch, end epoch, session
name] each, by start.

=item $ex->by_sess

After finish: a hash ref, session name => how many sections it committed
(only sessions that committed any).

=item $ex->errors

After finish: a hash ref, session name => [ its ERROR lines ].

=item $ex->error_count

After finish: how many ERROR lines all sessions met.

=item $ex->error_kinds

After finish: a hash, the message of an ERROR line with what is quoted
made "E<hellip>" (an ellipsis) and each number N => how many lines
had it.

=cut

sub session_names { return map { $_->{sess} } @{ $_[0]->{loops} }; }
sub intervals { return $_[0]->{intervals}; }
sub by_sess { return $_[0]->{by_sess}; }
sub errors { return $_[0]->{errors}; }

sub error_count
{
	my ($self) = @_;
	my $n = 0;
	$n += @$_ foreach values %{ $self->{errors} };
	return $n;
}

sub error_kinds
{
	my ($self) = @_;
	my %kinds;
	foreach my $e (map { @$_ } values %{ $self->{errors} })
	{
		(my $k = $e) =~ s/^.*ERROR:\s+//;
		$k =~ s/"[^"]*"/"…"/g;
		$k =~ s/\d+/N/g;
		$kinds{$k}++;
	}
	return %kinds;
}

=pod

=item $ex->overlaps

After finish: each pair of committed sections that overlap, as text.

=item $ex->check

After finish: the assertions "no two committed critical sections overlap"
(showing the first 10 overlaps if not) and "every session committed
sections".

=cut

sub overlaps
{
	my ($self) = @_;
	my @overlaps;
	my $prev;
	foreach my $i (@{ $self->{intervals} })
	{
		push @overlaps, sprintf('%s [%.6f, %.6f] and %s [%.6f, %.6f]',
			$prev->[2], @$prev[ 0, 1 ], $i->[2], @$i[ 0, 1 ])
		  if $prev && $i->[0] < $prev->[1];
		$prev = $i if !$prev || $i->[1] > $prev->[1];
	}
	return @overlaps;
}

=pod

=item $ex->note_summary($since)

Note (TAP comments) what the loops did: sections committed, errors and
their kinds, sections per session, overlaps, and the time since epoch
$since.

=cut

sub note_summary
{
	my ($self, $since) = @_;
	my %by_sess = %{ $self->by_sess };
	my %kinds = $self->error_kinds;
	Test::More::note(sprintf('%d critical sections committed, %d errors; per session: %s',
		scalar(@{ $self->intervals }), $self->error_count,
		join(', ', map { "$_ $by_sess{$_}" } sort keys %by_sess)));
	Test::More::note("errors: $kinds{$_} x $_") foreach sort keys %kinds;
	Test::More::note(sprintf('overlaps: %d; %.1f s in all',
		scalar($self->overlaps), Time::HiRes::time() - $since));
	return;
}

sub check
{
	my ($self) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my @overlaps = $self->overlaps;
	is(scalar(@overlaps), 0, 'no two committed critical sections overlap')
	  or diag(join("\n", @overlaps[ 0 .. ($#overlaps < 9 ? $#overlaps : 9) ]));
	is(scalar(keys %{ $self->{by_sess} }), scalar(@{ $self->{loops} }),
		'every session committed sections');
	return;
}

=pod

=back

=cut

1;
