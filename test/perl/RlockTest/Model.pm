
# Copyright (c) 2026, rlock developers

#
# The reference model and the checker of the model-based test
# (test/t/032_model.pl): what each session (and a Redisson client) should
# hold, how a step changes it, and the comparison of that model with
# rlock's beliefs (rlock_locks) and with Redis's truth after every step.
#
package RlockTest::Model;

use strict;
use warnings;

use RlockTest ();
use Test::More;
use List::Util ();
use Time::HiRes qw(time usleep);

=pod

=head1 RlockTest::Model

  my $m = RlockTest::Model->new(node => $node, redis => $redis,
      redlock => $rl, wd_ms => 3000, dbs => [qw(postgres postgres db2 db2)]);
  my $res = $m->run_op({ t => 'acq', s => 1, kind => 'x', name => 'mx1',
                         lease => 30000, wait => 100 });
  $m->check;                  # one step's checks, violations counted
  $m->report;                 # one ok() per category, diag of the first

A hold is { kind, lease (ms, undef: NULL), t0 (time before the call was
sent), scope ('session' | 'transaction'), depth (savepoint depth), dead
(force-released, or found gone from Redis: reported once, then no longer
demanded) }.  Its promise (_promise) is a lower bound of when Redis may
let it go and rlock may stop believing in it: t0 + lease (a Redlock: its
validity, less the drift and the call's time); a NULL lease: the last
renewal seen in rlock_locks (or t0) + 4/5 of rlock.watchdog_timeout,
where rlock fails closed.  Everything the checker compares is read after
the step's call returned: Redis at [ta, tb], so a hold is "live" when its
promise is after tb (the safe direction on a loaded machine: lateness
only makes it demand less).  A hold past its promise may or may not still
be there: counts are checked between the live holds and all holds.  A
release takes, of several holds, the one that leaves the least to demand
(a NULL-lease one first, then the longest lease).

Kinds: x (rlock_acquire and friends), fenced, fair, r, w, redlock; who is
a session index or 'J' (the Redisson client).

=cut

our @CATEGORIES = qw(exclusion ttl truth untracked belief fencing errors);
our $WD_S = 3;

# rlock_locks' kind of a model kind
my %LOCKS_KIND = (x => 'exclusive', fenced => 'exclusive', fair => 'fair',
	r => 'read', w => 'write', redlock => 'redlock');
# the Redis field suffix of a kind's holds
sub _field
{
	my ($holder, $kind) = @_;
	return $kind eq 'w' ? "$holder:write" : $holder;
}
sub _cls { return $LOCKS_KIND{ $_[0] }; }

sub new
{
	my ($class, %o) = @_;
	$WD_S = $o{wd_ms} / 1000 if $o{wd_ms};
	my $self = bless {
		%o,
		holds => {},      # who => name => [ hold, ... ]
		pending => {},    # session => 1: an interrupted call may have left a hold
		step => 0,
		trail => [],
		viol => { map { ($_ => []) } @CATEGORIES },
		nviol => { map { ($_ => 0) } @CATEGORIES },
		tokens => {},
		sessions => [],
		checks => 0,
	}, $class;
	$self->{r} = RlockTest::Resp->connect($o{redis}->port) or die $@;
	$self->{rl} = [ map { RlockTest::Resp->connect($_->port) or die $@ }
		  $o{redlock}->masters ];
	$self->{mon} = $o{node}->background_psql('postgres', on_error_stop => 0);
	foreach my $i (0 .. $#{ $o{dbs} })
	{
		my $p = $o{node}->background_psql($o{dbs}[$i], on_error_stop => 0);
		my $s = { i => $i, db => $o{dbs}[$i], psql => $p, depth => 0 };
		$self->{sessions}[$i] = $s;
		$self->_init_session($s);
	}
	return $self;
}

sub _init_session
{
	my ($self, $s) = @_;
	my ($out) = RlockTest::run_sql($s->{psql},
		"SET lock_timeout = '5s'; SELECT pg_backend_pid() || ' ' || rlock_holder_id()");
	($s->{pid}, $s->{holder}) = split ' ', $out;
	return;
}

sub session { return $_[0]->{sessions}[ $_[1] ]; }
sub nsessions { return scalar @{ $_[0]->{sessions} }; }
sub holds_of { return $_[0]->{holds}{ $_[1] }{ $_[2] } //= []; }

# When Redis may let a hold go at the earliest.  A fixed lease: t0 +
# lease.  A NULL lease: for as long as the watchdog keeps renewing it;
# rlock fails closed (SPEC 6) when its last renewal is 4/5 of
# rlock.watchdog_timeout old, so the promise runs to the last renewal
# seen (renewed_at in rlock_locks, or the acquisition) + 4/5 of it: a
# watchdog starved by a loaded machine is not taken for a protocol fault,
# while a hold lost between two timely renewals is.  ($WD_S: the
# watchdog_timeout in seconds, from new's wd_ms.)

sub _promise
{
	my ($h) = @_;
	return -1 if $h->{dead};
	if (!defined $h->{lease})
	{
		my $last = $h->{t0};
		$last = $h->{renewed} if defined $h->{renewed} && $h->{renewed} > $last;
		return $last + $WD_S * 0.8;
	}
	return $h->{t0} + $h->{lease} / 1000 - ($h->{cut} // 0);
}

# holds of who on name (kinds: a list, or all) that are live after $t
sub live
{
	my ($self, $who, $name, $t, @kinds) = @_;
	my %k = map { ($_ => 1) } @kinds;
	return grep { (!@kinds || $k{ $_->{kind} }) && _promise($_) > $t }
	  @{ $self->holds_of($who, $name) };
}

sub whos { return ((0 .. $_[0]->nsessions - 1), 'J'); }

# Does anyone but $me hold (or may hold: stale, interrupted) $name?
sub others_may_hold
{
	my ($self, $me, $name) = @_;
	foreach my $w ($self->whos)
	{
		next if "$w" eq "$me";
		return 1 if @{ $self->holds_of($w, $name) };
		return 1 if $w ne 'J' && $self->{pending}{$w};
	}
	return 0;
}

# A name of session $i whose holds are all past their promise (or force
# released): the session should release it before using it again.
sub stale_name
{
	my ($self, $i) = @_;
	my $now = time();
	foreach my $name (sort keys %{ $self->{holds}{$i} // {} })
	{
		my @h = grep { $_->{scope} eq 'session' } @{ $self->holds_of($i, $name) };
		next unless @h;
		next if grep { _promise($_) > $now } @h;
		return ($name, $h[0]{kind});
	}
	return;
}

sub violation
{
	my ($self, $cat, $msg) = @_;
	$self->{nviol}{$cat}++;
	push @{ $self->{trail} }, "step $self->{step}   !! $cat: $msg"
	  if $self->{nviol}{$cat} <= 200;
	push @{ $self->{viol}{$cat} }, [ $self->{step}, $msg ]
	  if @{ $self->{viol}{$cat} } < 5;
	return;
}

sub trail
{
	my ($self, $line) = @_;
	push @{ $self->{trail} }, sprintf('step %d %.3f: %s', $self->{step}, time() - $self->{t_start}, $line);
	return;
}

# "n" or "n-m": how many holds there must be (the live ones) to how many
# there may be (holds past their lease included)
sub _range
{
	my ($l, $a) = @_;
	return @$l == @$a ? scalar(@$a) : scalar(@$l) . '-' . scalar(@$a);
}

sub _lease_sql { return defined $_[0] ? "'$_[0] ms'" : 'NULL'; }

sub sql
{
	my ($self, $i, $sql) = @_;
	my $s = $self->session($i);
	my ($out, $err, $state) = RlockTest::run_sql($s->{psql}, $sql);
	$out =~ s/^\s+|\s+$//g;
	$state //= 'none';
	$err =~ s/\s+/ /g;
	$self->trail("S$i $sql -> " . ($state eq '00000' ? "'$out'" : "$state $err"));
	return ($out, $state, $err);
}

# An acquisition's exclusion check: any other holder with a hold promised
# beyond the moment the call returned, of an incompatible kind?
sub _check_exclusion
{
	my ($self, $me, $kind, $name, $t1) = @_;
	my @incompat = $kind eq 'r' ? ('w') : $kind eq 'redlock' ? ('redlock')
	  : $kind eq 'w' ? ('r', 'w') : ('x', 'fenced', 'fair');
	foreach my $w ($self->whos)
	{
		next if "$w" eq "$me";
		my @l = $self->live($w, $name, $t1, @incompat);
		$self->violation('exclusion',
			"$name acquired ($kind) by " . ($me eq 'J' ? 'J' : "S$me")
			  . " while " . ($w eq 'J' ? 'J' : "S$w")
			  . " holds it ($l[0]{kind}, "
			  . (defined $l[0]{lease} ? sprintf('lease %d ms, promised %.3f s more)',
					$l[0]{lease}, _promise($l[0]) - $t1) : 'NULL lease)'))
		  if @l;
	}
	return;
}

sub _add_hold
{
	my ($self, $who, $name, $kind, $lease, $t0, $scope) = @_;
	my $depth = $who eq 'J' ? 0 : $self->session($who)->{depth};
	my $list = $self->holds_of($who, $name);
	# holds known lost are gone; those past their lease may or may not be
	# (a count is then checked against a range)
	@$list = grep { !$_->{dead} } @$list;
	push @$list,
	  { kind => $kind, lease => $lease, t0 => $t0, scope => $scope, depth => $depth };
	return;
}

# Drop one session-scope hold of $kind's class (the one with the largest
# promise: what remains is then what every attribution of the release
# leaves at least).
sub _drop_one
{
	my ($self, $who, $name, $kind) = @_;
	my $list = $self->holds_of($who, $name);
	my $best;
	for my $j (0 .. $#$list)
	{
		my $h = $list->[$j];
		next unless $h->{scope} eq 'session' && _cls($h->{kind}) eq _cls($kind);
		$best = $j if !defined $best || _drop_rank($h) > _drop_rank($list->[$best]);
	}
	splice(@$list, $best, 1) if defined $best;
	return;
}

# a NULL-lease hold (renewed for as long as it lives) outranks any lease
sub _drop_rank
{
	my ($h) = @_;
	return defined $h->{lease} && !$h->{dead} ? _promise($h) : 9e99;
}

sub _drop_all
{
	my ($self, $who, $name, $pred) = @_;
	my $list = $self->holds_of($who, $name);
	@$list = grep { !$pred->($_) } @$list;
	return;
}

my %ACQ_FN = (x => 'rlock%s_try_acquire', fenced => 'rlock_fenced%s_try_acquire',
	fair => 'rlock_fair%s_try_acquire', r => 'rlock_read%s_try_acquire',
	w => 'rlock_write%s_try_acquire', redlock => 'rlock_redlock%s_try_acquire');
my %REL_FN = (x => 'rlock_release', fenced => 'rlock_release', fair => 'rlock_fair_release',
	r => 'rlock_read_release', w => 'rlock_write_release', redlock => 'rlock_redlock_release');

=pod

=item $m->run_op(\%op)

Run one step.  Ops (s: session index): acq {s, kind, name, lease, wait
(ms; undef: the blocking function), xact}; multi {s, names, lease, wait,
xact}; rel {s, kind, name}; release_all {s}; discard {s}; force {s,
name}; cancel {s, name, how: 'cancel' | 'timeout'}; begin, savepoint,
rollback_to, release_sp, commit, rollback {s}; jlock {name, lease};
junlock {name}; sleep {ms}.

=cut

sub run_op
{
	my ($self, $op) = @_;
	$self->{step}++;
	my $t = $op->{t};
	my $i = $op->{s};
	my $s = defined $i ? $self->session($i) : undef;
	delete $self->{pending}{$i} if defined $i && $t ne 'sleep' && $t ne 'cancel';
	my $t0 = time();
	$self->{last} = defined $i ? [ $i, $op->{names} ? @{ $op->{names} } : $op->{name} // () ] : undef;
	if ($t eq 'acq')
	{
		my ($k, $n) = ($op->{kind}, $op->{name});
		my $x = $op->{xact} ? '_xact' : '';
		my $sql;
		if (defined $op->{wait})
		{
			$sql = sprintf("SELECT $ACQ_FN{$k}('%s', %s, '%d ms')", $x, $n,
				_lease_sql($op->{lease}), $op->{wait});
		}
		else
		{
			(my $f = $ACQ_FN{$k}) =~ s/_try//;
			$sql = sprintf("SELECT $f('%s', %s)", $x, $n, _lease_sql($op->{lease}));
		}
		my ($out, $st, $err) = $self->sql($i, $sql);
		my $t1 = time();
		return $self->_failed($i, $st, $err, $op) if $st ne '00000';
		my $got = defined $op->{wait} ? ($k eq 'fenced' ? $out ne '' : $out eq 't') : 1;
		return 0 unless $got;
		$self->_check_exclusion($i, $k, $n, $t1);
		if ($k eq 'fenced')
		{
			my $last = $self->{tokens}{$n};
			$self->violation('fencing', "$n: token $out after $last")
			  if defined $last && $out <= $last;
			$self->{tokens}{$n} = $out;
		}
		$self->_add_hold($i, $n, $k, $op->{lease}, $t0, $op->{xact} ? 'transaction' : 'session');
		# a Redlock is valid for its lease less the time it took and the
		# clock drift (1 % + 2 ms: PROTOCOL.md), not for the whole lease
		$self->holds_of($i, $n)->[-1]{cut} = $op->{lease} / 100000 + 0.002 + ($t1 - $t0)
		  if $k eq 'redlock' && defined $op->{lease};
		return 1;
	}
	if ($t eq 'multi')
	{
		my $x = $op->{xact} ? '_xact' : '';
		my $arr = join(',', map { "'$_'" } @{ $op->{names} });
		my ($out, $st, $err) = $self->sql($i,
			sprintf("SELECT rlock_multi%s_try_acquire(ARRAY[%s], %s, '%d ms')",
				$x, $arr, _lease_sql($op->{lease}), $op->{wait}));
		my $t1 = time();
		return $self->_failed($i, $st, $err, $op) if $st ne '00000';
		return 0 unless $out eq 't';
		my %seen;
		foreach my $n (grep { !$seen{$_}++ } @{ $op->{names} })
		{
			$self->_check_exclusion($i, 'x', $n, $t1);
			$self->_add_hold($i, $n, 'x', $op->{lease}, $t0, $op->{xact} ? 'transaction' : 'session');
		}
		return 1;
	}
	if ($t eq 'rel')
	{
		my ($k, $n) = ($op->{kind}, $op->{name});
		my ($out, $st, $err) = $self->sql($i, "SELECT $REL_FN{$k}('$n')");
		return $self->_failed($i, $st, $err, $op) if $st ne '00000';
		my @sess = grep { $_->{scope} eq 'session' && _cls($_->{kind}) eq _cls($k) }
		  @{ $self->holds_of($i, $n) };
		if ($out eq 't')
		{
			$self->violation('belief', "S$i: $REL_FN{$k}('$n') true, the model holds none")
			  unless @sess;
			$self->_drop_one($i, $n, $k);
		}
		else
		{
			# false: not held (any more): fine only if no hold was promised
			# past the call's start
			my @l = grep { _promise($_) > $t0 } @sess;
			$self->violation('belief',
				"S$i: $REL_FN{$k}('$n') false, but a hold is promised "
				  . (defined $l[0]{lease} ? sprintf('%.3f s more (lease %d ms)',
						_promise($l[0]) - $t0, $l[0]{lease})
					  : sprintf('%.3f s more (NULL lease, renewed in time)', _promise($l[0]) - $t0)))
			  if @l;
			$self->_drop_all($i, $n, sub { $_[0]{scope} eq 'session' && _cls($_[0]{kind}) eq _cls($k) });
		}
		return $out eq 't';
	}
	if ($t eq 'release_all' || $t eq 'discard')
	{
		my ($out, $st, $err) = $self->sql($i,
			$t eq 'discard' ? "DISCARD ALL" : "SELECT rlock_release_all()");
		return $self->_failed($i, $st, $err, $op) if $st ne '00000';
		$self->sql($i, "SET lock_timeout = '5s'") if $t eq 'discard';
		foreach my $n (keys %{ $self->{holds}{$i} // {} })
		{
			$self->_drop_all($i, $n, sub { $_[0]{scope} eq 'session' });
		}
		return 1;
	}
	if ($t eq 'force')
	{
		my $n = $op->{name};
		my ($out, $st, $err) = $self->sql($i, "SELECT rlock_force_release('$n')");
		return $self->_failed($i, $st, $err, $op) if $st ne '00000';
		foreach my $w ($self->whos)
		{
			if ($w eq 'J') { $self->{holds}{J}{$n} = []; next; }
			$_->{dead} = 1 foreach @{ $self->holds_of($w, $n) };
		}
		return 1;
	}
	if ($t eq 'cancel')
	{
		return $self->_cancel($i, $op->{name}, $op->{how});
	}
	if ($t eq 'begin' || $t eq 'savepoint' || $t eq 'release_sp'
		|| $t eq 'rollback_to' || $t eq 'commit' || $t eq 'rollback')
	{
		return $self->_xact_op($i, $t);
	}
	if ($t eq 'jlock')
	{
		my $n = $op->{name};
		my $r = RlockTest::Redisson::try_lock($self->{redis}, $n, $op->{lease}, $self->{j_holder});
		my $t1 = time();
		$r //= '';
		$self->trail("J try_lock($n, $op->{lease}) -> '$r'");
		return 0 unless $r eq '';
		$self->_check_exclusion('J', 'x', $n, $t1);
		$self->_add_hold('J', $n, 'x', $op->{lease}, $t0, 'session');
		return 1;
	}
	if ($t eq 'junlock')
	{
		my $n = $op->{name};
		my $r = RlockTest::Redisson::unlock($self->{redis}, $op->{name}, $self->{j_holder}) // '';
		$self->trail("J unlock($n) -> '$r'");
		$self->{holds}{J}{$n} = [];
		return 1;
	}
	if ($t eq 'sleep')
	{
		# checked every 250 ms meanwhile: a loss is seen while its
		# promise still stands
		$self->trail("sleep $op->{ms} ms");
		my $until = $t0 + $op->{ms} / 1000;
		while (time() < $until)
		{
			usleep(1000 * List::Util::min(250, 1 + int(1000 * ($until - time()))));
			$self->check if time() < $until;
		}
		return 1;
	}
	die "unknown op $t";
}

# A call that ended in an error: no hold is added; the session may have
# been left with one it reconciles at its next call; in a transaction the
# transaction is aborted.
sub _failed
{
	my ($self, $i, $st, $err, $op) = @_;
	my $s = $self->session($i);
	$self->{pending}{$i} = 1;
	$s->{aborted} = 1 if $s->{in_xact};
	$self->violation('errors', "S$i: $op->{t} " . ($op->{name} // '') . ": $st $err")
	  unless $st eq '25P02';
	return 0;
}

sub _xact_op
{
	my ($self, $i, $t) = @_;
	my $s = $self->session($i);
	my $sql = {
		begin => 'BEGIN', commit => 'COMMIT', rollback => 'ROLLBACK',
		savepoint => 'SAVEPOINT sp' . ($s->{depth} + 1),
		release_sp => 'RELEASE SAVEPOINT sp' . $s->{depth},
		rollback_to => 'ROLLBACK TO SAVEPOINT sp' . $s->{depth},
	}->{$t};
	my $t0 = time();
	my ($out, $st, $err) = $self->sql($i, $sql);
	if ($t eq 'begin') { $s->{in_xact} = 1; $s->{depth} = 0; $s->{aborted} = 0; return 1; }
	if ($t eq 'savepoint') { $s->{depth}++ unless $s->{aborted}; return 1; }
	my @mine = map { @{ $self->holds_of($i, $_) } } keys %{ $self->{holds}{$i} // {} };
	if ($t eq 'release_sp')
	{
		return 1 if $s->{aborted};
		$_->{depth} = $s->{depth} - 1
		  foreach grep { $_->{scope} eq 'transaction' && $_->{depth} >= $s->{depth} } @mine;
		$s->{depth}--;
		return 1;
	}
	my $d = $t eq 'rollback_to' ? $s->{depth} : 0;
	if ($t eq 'commit' && !$s->{aborted})
	{
		# COMMIT may refuse a lock whose fixed lease cannot cover it, or one
		# that was lost; with only NULL-lease holds it must work
		my @x = grep { $_->{scope} eq 'transaction' } @mine;
		my $may_fail = grep { defined $_->{lease} || $_->{dead} } @x;
		$self->violation('belief', "S$i: COMMIT failed: $st $err")
		  if $st ne '00000' && !$may_fail;
	}
	foreach my $n (keys %{ $self->{holds}{$i} // {} })
	{
		$self->_drop_all($i, $n, sub { $_[0]{scope} eq 'transaction' && $_[0]{depth} >= $d });
	}
	if ($t eq 'rollback_to') { $s->{aborted} = 0; }
	else { $s->{in_xact} = 0; $s->{depth} = 0; $s->{aborted} = 0; }
	return 1;
}

# A blocking acquisition of a name someone else holds, ended while it
# waits: by pg_cancel_backend, or by statement_timeout.
sub _cancel
{
	my ($self, $i, $n, $how) = @_;
	my $s = $self->session($i);
	my $p = $s->{psql};
	my $t0 = time();
	$self->{pending}{$i} = 1;
	if ($how eq 'timeout')
	{
		$self->sql($i, "SET statement_timeout = '300ms'");
		my ($out, $st) = $self->sql($i, "SELECT rlock_acquire('$n')");
		$self->sql($i, "RESET statement_timeout");
		if ($st eq '00000')
		{
			$self->_check_exclusion($i, 'x', $n, time());
			$self->_add_hold($i, $n, 'x', undef, $t0, 'session');
		}
		return $st eq '57014';
	}
	RlockTest::start_bg($p, "SELECT rlock_acquire('$n')");
	my $waiting = RlockTest::wait_until(
		sub {
			my ($o) = RlockTest::run_sql($self->{mon},
				"SELECT count(*) FROM pg_stat_activity WHERE pid = $s->{pid} "
				  . "AND wait_event_type = 'Extension'");
			return $o =~ /^1/ || RlockTest::bg_done($p);
		}, 30);
	RlockTest::run_sql($self->{mon}, "SELECT pg_cancel_backend($s->{pid})");
	RlockTest::wait_until(sub { RlockTest::bg_done($p) }, 60);
	my ($out, $err, $st) = RlockTest::bg_result($p);
	$st //= 'none';
	$self->trail("S$i rlock_acquire('$n') cancelled mid-wait (waiting: $waiting) -> $st");
	if ($st eq '00000')
	{
		$self->_check_exclusion($i, 'x', $n, time());
		$self->_add_hold($i, $n, 'x', undef, $t0, 'session');
	}
	return $st eq '57014';
}

=pod

=item $m->check

Compare, after a step, the model with rlock_locks (read first) and with
Redis (read at [ta, tb]); count and keep the first violations.

=cut

sub check
{
	my ($self) = @_;
	$self->{checks}++;
	my ($rows) = RlockTest::run_sql($self->{mon},
		"SELECT pid, name, kind, scope, hold_count, state, "
		  . "extract(epoch FROM coalesce(renewed_at, acquired_at)) FROM rlock_locks");
	my %pid_of = map { ($self->session($_)->{pid} => $_) } 0 .. $self->nsessions - 1;
	my %locks;    # pid/name/kind => { session => n, transaction => n, state }
	foreach my $line (split /\n/, $rows)
	{
		my ($pid, $name, $kind, $scope, $cnt, $state, $renewed) = split /\|/, $line;
		next unless defined $renewed;
		# the last renewal seen extends the NULL-lease holds' promise
		if (defined $pid_of{$pid})
		{
			foreach my $h (@{ $self->holds_of($pid_of{$pid}, $name) })
			{
				next if defined $h->{lease} || _cls($h->{kind}) ne $kind;
				$h->{renewed} = $renewed if !defined $h->{renewed} || $renewed > $h->{renewed};
			}
		}
		my $e = $locks{"$pid/$name/$kind"} //= {};
		$e->{$scope} = $cnt;
		$e->{state}{$state} = 1;
	}
	$self->_check_own;
	my $ta = time();
	my (%hash, %pttl, %rl);
	foreach my $n (@{ $self->{names} })
	{
		my ($v) = $self->{r}->request('HGETALL', $n);
		$hash{$n} = { @{ $v // [] } };
		($pttl{$n}) = $self->{r}->request('PTTL', $n);
	}
	foreach my $n (@{ $self->{rl_names} })
	{
		foreach my $j (0 .. $#{ $self->{rl} })
		{
			my ($v) = $self->{rl}[$j]->request('HGETALL', $n);
			my ($p) = $self->{rl}[$j]->request('PTTL', $n);
			$rl{$n}[$j] = [ { @{ $v // [] } }, $p ];
		}
	}
	my $tb = time();
	my %holder = map { ($_ => $self->session($_)->{holder}) } 0 .. $self->nsessions - 1;
	$holder{J} = $self->{j_holder};

	foreach my $n (@{ $self->{names} }, @{ $self->{rl_names} })
	{
		my $is_rl = !exists $hash{$n};
		# the longest fixed promise of any live hold on the name
		my ($maxp, $any_live, $any_null) = (0, 0, 0);
		foreach my $w ($self->whos)
		{
			foreach my $h ($self->live($w, $n, $tb))
			{
				$any_live = 1;
				if (defined $h->{lease}) { $maxp = _promise($h) if _promise($h) > $maxp; }
				else { $any_null = 1; }
			}
		}
		my @views = $is_rl ? @{ $rl{$n} } : ([ $hash{$n}, $pttl{$n} ]);
		my $nhave = 0;
		foreach my $vi (0 .. $#views)
		{
			my ($hv, $p) = @{ $views[$vi] };
			my $where = $is_rl ? "$n on master $vi" : $n;
			next unless %$hv;
			$nhave++;
			if ($any_live)
			{
				$self->violation('ttl', "$where: no TTL (PTTL $p)") if $p == -1;
				$self->violation('ttl', sprintf(
					"%s: PTTL %d ms, but a hold was promised %.0f ms more",
					$where, $p, ($maxp - $tb) * 1000))
				  if $maxp > 0 && $p >= 0 && $tb + $p / 1000 < $maxp - 0.005;
			}
			# incompatible holders in Redis
			my @f = grep { $_ ne 'mode' } keys %$hv;
			if (!defined $hv->{mode} && @f > 1)
			{
				$self->violation('exclusion', "$where: two holders: @f");
			}
			if (($hv->{mode} // '') eq 'write')
			{
				my @w = grep { /:write$/ } @f;
				(my $wh = $w[0] // '') =~ s/:write$//;
				my @bad = grep { $_ ne "$wh:write" && $_ ne $wh } @f;
				$self->violation('exclusion', "$where: mode write with other fields: @f") if @bad || @w != 1;
			}
		}
		# per holder: the model against Redis and against rlock_locks
		foreach my $w ($self->whos)
		{
			my $all = $self->holds_of($w, $n);
			my $who = $w eq 'J' ? 'J' : "S$w";
			my %kinds;
			$kinds{ $_->{kind} eq 'w' ? 'w' : $_->{kind} eq 'r' ? 'r' : 'x' } = 1 foreach @$all;
			foreach my $side (qw(x r w))
			{
				next if $is_rl && $side ne 'x';
				my @sk = $side eq 'x' ? qw(x fenced fair redlock) : ($side);
				my %sk = map { ($_ => 1) } @sk;
				my @a = grep { $sk{ $_->{kind} } } @$all;
				my @l = $self->live($w, $n, $tb, @sk);
				my $field = _field($holder{$w}, $side);
				if (@l)
				{
					my @have = grep { defined $_->[0]{$field} } @views;
					my $need = $is_rl ? int(@views / 2) + 1 : 1;
					if (@have < $need)
					{
						$self->violation('truth', "$who holds $n ($side, "
							  . scalar(@l) . ' live of ' . scalar(@a)
							  . ", leases " . join(',', map { $_->{lease} // 'NULL' } @a)
							  . ') but Redis has no field' . ($is_rl ? " on a majority" : ''));
						# the model follows: that hold is lost (no cascade)
						$_->{dead} = 1 foreach @a;
						next;
					}
					# holds past their lease may be gone already
					foreach my $v (@have)
					{
						$self->violation('truth', "$who holds $n ($side) " . _range(\@l, \@a)
							  . " times, Redis says $v->[0]{$field}")
						  if $v->[0]{$field} < @l || $v->[0]{$field} > @a;
					}
					if ($side eq 'r' && !$is_rl)
					{
						# each live read hold has its own timeout key (read now,
						# then "live" judged after the reads)
						my $base = $n =~ /\{/ ? $n : "{$n}";
						my $cnt = grep {
							my ($e) = $self->{r}->request('EXISTS', "$base:$field:rwlock_timeout:$_");
							$e;
						} 1 .. @a;
						my @still = $self->live($w, $n, time(), 'r');
						$self->violation('truth', "$who: $n has $cnt read timeout keys for "
							  . scalar(@still) . ' live read holds') if $cnt < @still;
					}
				}
				elsif (!@a && $w ne 'J' && !$self->{pending}{$w}
					&& ($side eq 'w' || !grep { $_->{kind} ne 'w' } @$all))
				{
					my @have = grep { defined $_->[0]{$field} } @views;
					$self->violation('untracked', "$who holds nothing of $n ($side) but Redis has its field ("
						  . $have[0][0]{$field} . ')') if @have;
				}
				next if $w eq 'J';
				# rlock's beliefs
				my $pid = $self->session($w)->{pid};
				my @ks = $side eq 'x' ? (sort keys %{ { map { (_cls($_) => 1) } @sk } }) : (_cls($side));
				foreach my $lk (@ks)
				{
					my $e = $locks{"$pid/$n/$lk"};
					my @lk = grep { _cls($_->{kind}) eq $lk } @l;
					my @ak = grep { _cls($_->{kind}) eq $lk } @a;
					if (@lk)
					{
						my ($bad, $want) = (!$e || !$e->{state}{held} || keys %{ $e->{state} } != 1, '');
						foreach my $sc (qw(session transaction))
						{
							my @ls = grep { $_->{scope} eq $sc } @lk;
							my @as = grep { $_->{scope} eq $sc } @ak;
							my $got = $e ? $e->{$sc} // 0 : 0;
							$bad ||= $got < @ls || $got > @as;
							$want .= " $sc " . _range(\@ls, \@as);
						}
						my $got = $e ? join(',', map { $e->{$_} // 0 } qw(session transaction)) . ' ' . join('/', sort keys %{ $e->{state} }) : 'nothing';
						$self->violation('belief', "$who holds $n ($lk)$want; rlock_locks: $got") if $bad;
					}
					elsif (!@ak && $e && !$self->{pending}{$w})
					{
						$self->violation('belief', "$who holds nothing of $n ($lk) but rlock_locks shows "
							  . join('/', sort keys %{ $e->{state} }));
					}
				}
			}
		}
	}
	return;
}

# The acting session's own view of the names it touched:
# rlock_is_held and rlock_hold_count (its read and write holds, or its
# exclusive ones, as Redis counts them).
sub _check_own
{
	my ($self) = @_;
	my ($i, @names) = @{ $self->{last} // [] };
	return unless defined $i;
	my $s = $self->session($i);
	return if $s->{aborted} || $self->{pending}{$i};
	foreach my $n (grep { defined && !/^mrl/ } @names)
	{
		my ($out, $err, $st) = RlockTest::run_sql($s->{psql},
			"SELECT rlock_is_held('$n') || ' ' || rlock_hold_count('$n')");
		my $t1 = time();
		if (($st // '') ne '00000')
		{
			$s->{aborted} = 1 if $s->{in_xact};
			next;
		}
		my ($held, $cnt) = split ' ', $out;
		my @a = @{ $self->holds_of($i, $n) };
		my @l = $self->live($i, $n, $t1);
		if (@l)
		{
			$self->violation('belief', "S$i: rlock_is_held('$n') $held, rlock_hold_count $cnt; the model holds it "
				  . _range(\@l, \@a) . ' times') if $held ne 'true' || $cnt < @l || $cnt > @a;
		}
		elsif (!@a)
		{
			$self->violation('belief', "S$i: rlock_is_held('$n') $held, rlock_hold_count $cnt; the model holds nothing")
			  if $held ne 'false' || $cnt != 0;
		}
	}
	return;
}

=pod

=item $m->report

One ok() per category; diag of the first violations of each, with the
steps that led there.

=cut

sub report
{
	my ($self) = @_;
	if (grep { $_ } values %{ $self->{nviol} })
	{
		my $f = "$PostgreSQL::Test::Utils::tmp_check/032_model_trail.txt";
		if (open my $fh, '>', $f)
		{
			print $fh "$_\n" foreach @{ $self->{trail} };
			close $fh;
			diag("every step: $f");
		}
	}
	foreach my $cat (@CATEGORIES)
	{
		my $n = $self->{nviol}{$cat};
		ok($n == 0, "$cat: no violation in $self->{step} steps ($self->{checks} checks)");
		next unless $n;
		diag("$cat: $n violation(s); the first:");
		foreach my $v (@{ $self->{viol}{$cat} })
		{
			my ($step, $msg) = @$v;
			diag("  after step $step: $msg");
		}
		my $first = $self->{viol}{$cat}[0][0];
		diag("  steps leading to step $first:");
		diag("    $_") foreach grep {
			/^step (\d+) / && $1 > $first - 12 && $1 <= $first && !/ !! /
		} @{ $self->{trail} };
	}
	return;
}

1;
