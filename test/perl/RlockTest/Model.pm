
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

# the locks' checks and the report; the semaphores and latches
use RlockTest::ModelCheck;
use RlockTest::ModelSync;
use RlockTest::ModelSyncOps;
our @ISA = qw(RlockTest::ModelCheck RlockTest::ModelSync RlockTest::ModelSyncOps);

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
a session index or 'J' (the Redisson client).  Semaphores (sem_names) and
count-down latches (latch_names) have a model of their own:
RlockTest::ModelSync (their steps: RlockTest::ModelSyncOps).

=cut

our @CATEGORIES = qw(exclusion ttl truth untracked belief fencing permits latch errors);
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
		sem_names => [],
		latch_names => [],
		%o,
		holds => {},      # who => name => [ hold, ... ]
		sem => {},        # who => semaphore => its permits (RlockTest::ModelSync)
		sem_total => {},  # semaphore => its permits in all (undef: never set)
		latch => {},      # latch => its count
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
		"SET lock_timeout = '5s'; SET rlock.deadlock_timeout = '20ms'; "
		  . "SELECT pg_backend_pid() || ' ' || rlock_holder_id()");
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
	my $t0 = time();
	my ($out, $err, $state) = RlockTest::run_sql($s->{psql}, $sql);
	$out =~ s/^\s+|\s+$//g;
	$state //= 'none';
	$err =~ s/\s+/ /g;
	$self->trail("S$i $sql -> " . ($state eq '00000' ? "'$out'" : "$state $err")
		  . ($state eq '00000' && $err =~ /WARNING/ ? " $err" : ''));
	$self->sync_warnings($i, $err, $t0) if $err =~ /permits of semaphore/;
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

Run one step.  Ops of semaphores and latches: RlockTest::ModelSyncOps's
run_sync_op.  Ops (s: session index): acq {s, kind, name, lease, wait
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
	if ($t =~ /^(?:sem|latch|jsem|jlatch)_|^probe$/)
	{
		$self->{last} = undef;
		return $self->run_sync_op($op);
	}
	my $was_pending = defined $i ? $self->{pending}{$i} : undef;
	# (what a rollback to a savepoint gave back is settled by the next
	# rlock call or the transaction's end: not by a SAVEPOINT or RELEASE)
	delete $self->{pending}{$i}
	  if defined $i && $t !~ /^(?:sleep|cancel|savepoint|release_sp)$/;
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
		# the names (both sides of a read/write lock: one) with session
		# holds that may still be live, and those that must be
		my (%may, %must);
		foreach my $n (keys %{ $self->{holds}{$i} // {} })
		{
			foreach my $h (@{ $self->{holds}{$i}{$n} })
			{
				next unless $h->{scope} eq 'session' && !$h->{dead};
				my $c = $h->{kind} =~ /^[rw]$/ ? 'rw' : _cls($h->{kind});
				$may{"$n/$c"} = 1;
				$must{"$n/$c"} = _promise($h)
				  if !defined $must{"$n/$c"} || _promise($h) > $must{"$n/$c"};
			}
		}
		my $nsem = grep { $_->{sc} } values %{ $self->{sem}{$i} // {} };
		my ($out, $st, $err) = $self->sql($i,
			$t eq 'discard' ? "DISCARD ALL" : "SELECT rlock_release_all()");
		return $self->_failed($i, $st, $err, $op) if $st ne '00000';
		my $t1 = time();
		if ($t eq 'release_all')
		{
			my $max = keys(%may) + $nsem;
			my $min = grep { $must{$_} > $t1 } keys %must;
			$self->violation('belief',
				"S$i: rlock_release_all() returned $out: it released between $min and $max names")
			  if $out !~ /^\d+$/ || ($out > $max && !$was_pending) || $out < $min;
		}
		$self->sql($i, "SET lock_timeout = '5s'; SET rlock.deadlock_timeout = '20ms'")
		  if $t eq 'discard';
		$self->sync_session_end($i, time());
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
	$self->{pending}{$i} = 1;
	$self->abort_xact($i);
	$self->violation('errors', "S$i: $op->{t} " . ($op->{name} // '') . ": $st $err")
	  unless $st eq '25P02';
	return 0;
}

# A statement of session $i failed: in a transaction, PostgreSQL aborts at
# once the (sub)transaction it runs in, whose transaction-level holds rlock
# gives back then (the top level: all of them; a savepoint's: those taken
# since); ROLLBACK (TO) ends it.
sub abort_xact
{
	my ($self, $i) = @_;
	my $s = $self->session($i);
	return if !$s->{in_xact} || $s->{aborted};
	my $d = $s->{depth};
	foreach my $n (keys %{ $self->{holds}{$i} // {} })
	{
		$self->_drop_all($i, $n, sub { $_[0]{scope} eq 'transaction' && $_[0]{depth} >= $d });
	}
	$self->sync_xact_end($i, 'abort', '00000', '', time());
	$s->{aborted} = 1;
	return;
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
	$self->sync_xact_end($i, $t, $st, $err, $t0) unless $t eq 'begin' || $t eq 'savepoint';
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
		  if $st ne '00000' && !$may_fail && $err !~ /permits of semaphore/;
	}
	foreach my $n (keys %{ $self->{holds}{$i} // {} })
	{
		$self->_drop_all($i, $n, sub { $_[0]{scope} eq 'transaction' && $_[0]{depth} >= $d });
	}
	if ($t eq 'rollback_to')
	{
		# no round trip at a rollback to a savepoint: Redis keeps what it
		# gave back until the session's next rlock call (holds_xact.c)
		$s->{aborted} = 0;
		$self->{pending}{$i} = 1;
	}
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

1;
