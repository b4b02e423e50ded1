
# Copyright (c) 2026, rlock developers

#
# The semaphores and count-down latches of the model-based test
# (test/t/032_model.pl): their reference model, how the ends of
# transactions and sessions change it, and the checks after each step
# (their steps: RlockTest::ModelSyncOps).  Methods of RlockTest::Model
# (which inherits them).
#
package RlockTest::ModelSync;

use strict;
use warnings;

use RlockTest ();
use List::Util qw(max min sum0);
use Time::HiRes qw(time);

=pod

=head1 RlockTest::ModelSync

The model of a semaphore: its total (undef until set: what
rlock_semaphore_set_permits set plus every rlock_semaphore_add_permits),
and for each holder (a session, or 'J', the Redisson client) an entry
{ ids, sc, xc, renew, lo, hi, null_t0, unsure }: ids are the permit ids
Redis was given, [ { k (the n of rlock's "<holder>:<n>"; J: id, a hex
string), lease (ms, undef: NULL), t0, t1 (the call's start and end), dead
(taken away) } ], kept as rlock's scripts keep them (a release gives back
the highest k, whatever its scope); sc and xc ([ { depth, n } ]) are what
rlock counts at session and transaction level.  A session's permits
share one expiry, never lowered, as a lock's holds do: lo and hi bound
the latest fixed lease's end (the latest t0 + lease, t1 + lease); renew:
some permit was taken without a lease (the latest at null_t0), so the
watchdog renews them all; unsure: which ids are left is not known (a
release gave back some while others may have expired).  Their promise
(_id_promise) is as a lock hold's; they are surely gone when one was
taken away, or when the fixed leases ran out and nothing renews them.
The Redisson client's permits each have their own lease.  A latch's
model is its count (0: absent).

Safety, as demanded: Redis's permits available plus its permit ids out
are the total, always; an acquisition never leaves more permits promised
than the total; a refusal only when fewer may be available; each
session's ids in Redis are ids the model holds, and its live ones are
there, scored no lower than promised; rlock_locks shows each session's
permits with the model's counts ('held' while all are live), nothing
else; once an id is surely gone, the session's next release returns
false, its next acquisition reports the loss and COMMIT is refused (never
believed held); a loss is never reported while every permit is promised.
A latch's count in Redis is the model's, never 0 or below.  A lock call
on a semaphore's or a latch's name fails with 42809 (and the reverse),
changing nothing.

=cut


sub _who { return $_[0] eq 'J' ? 'J' : "S$_[0]"; }

sub sem_entry
{
	my ($self, $who, $n) = @_;
	return $self->{sem}{$who}{$n} //= { ids => [], sc => 0, xc => [], renew => 0, unsure => 0 };
}
sub _xcount { return sum0(map { $_->{n} } @{ $_[0]{xc} }); }
sub sem_count { my ($e) = @_; return $e ? $e->{sc} + _xcount($e) : 0; }
sub sem_total { return $_[0]->{sem_total}{ $_[1] }; }
sub latch_count { return $_[0]->{latch}{ $_[1] } // 0; }

# An entry that holds nothing is gone (rlock drops it too).
sub _tidy
{
	my ($self, $who, $n) = @_;
	my $e = $self->{sem}{$who}{$n};
	delete $self->{sem}{$who}{$n} if $e && ($who eq 'J' ? !@{ $e->{ids} } : !sem_count($e));
	return;
}

# Until when an id is kept for sure, as a lock's hold (RlockTest::Model's
# _promise): a session's, the entry's (its latest fixed lease, less the
# fail-closed margin when the watchdog renews them; the last NULL-lease
# acquisition or renewal seen + 4/5 of the watchdog timeout); J's, its own.
sub _id_promise
{
	my ($e, $id) = @_;
	return -1 if $id->{dead};
	return $id->{t0} + $id->{lease} / 1000 if defined $id->{id};
	my $wd = $RlockTest::Model::WD_S;
	my $p = defined $e->{lo} ? $e->{lo} - ($e->{renew} ? 0.2 * $wd : 0) : -1;
	if ($e->{renew})
	{
		my $last = $e->{null_t0};
		$last = $e->{renewed} if defined $e->{renewed} && $e->{renewed} > $last;
		$p = max($p, $last + 0.8 * $wd);
	}
	return $p;
}

# Is the id gone from Redis for sure at $t (taken away, or the leases
# over: Redis scored it before the call returned), or counted gone by
# every script (expired)?
sub _surely_gone
{
	my ($e, $id, $t) = @_;
	return 1 if $id->{dead};
	return $t > $id->{t1} + $id->{lease} / 1000 + 0.03 if defined $id->{id};
	return !$e->{renew} && defined $e->{hi} && $t > $e->{hi} + 0.03;
}

# The margin by which rlock believes a permit of a fixed lease gone before
# its lease ends (holds_clock_margin_ms: 1 % plus 100 ms, at most half):
# a loss reported within it is fail-closed, not wrong.
sub _id_margin
{
	my ($id) = @_;
	return 0 unless defined $id->{lease};
	return List::Util::min($id->{lease} / 100 + 100, $id->{lease} / 2) / 1000;
}

sub _gone_ids
{
	my ($e, $t) = @_;
	return $e ? grep { _surely_gone($e, $_, $t) } @{ $e->{ids} } : ();
}

sub _id_text
{
	my ($id) = @_;
	return sprintf('%s (lease %s%s)', $id->{k} // $id->{id}, $id->{lease} // 'NULL',
		$id->{dead} ? ', taken away' : '');
}

# Permits promised beyond $t (every holder but $except), and those that
# may still be out at $t (not surely gone).
sub _sem_live_out
{
	my ($self, $n, $t, $except) = @_;
	my $c = 0;
	foreach my $w ($self->whos)
	{
		next if defined $except && "$w" eq "$except";
		my $e = $self->{sem}{$w}{$n} or next;
		$c += grep { _id_promise($e, $_) > $t } @{ $e->{ids} };
	}
	return $c;
}

sub _sem_out_max
{
	my ($self, $n, $t) = @_;
	my $c = 0;
	foreach my $w ($self->whos)
	{
		my $e = $self->{sem}{$w}{$n} or next;
		$c += grep { !_surely_gone($e, $_, $t) } @{ $e->{ids} };
	}
	return $c;
}

# Give back $levels permits as rlock's release script does: the highest
# ids of those still there.
sub _give_back
{
	my ($e, $levels, $t) = @_;
	my @nd = sort { $b->{k} <=> $a->{k} } grep { !$_->{dead} } @{ $e->{ids} };
	# one that may have expired would have been skipped: not known which
	$e->{unsure} = 1 if grep { _id_promise($e, $_) <= $t } @nd[0 .. min($levels, scalar @nd) - 1];
	my %gone = map { ($_->{k} => 1) } @nd[0 .. min($levels, scalar @nd) - 1];
	@{ $e->{ids} } = grep { $_->{dead} || !$gone{ $_->{k} } } @{ $e->{ids} };
	return;
}

# The WARNINGs of a statement of session $i: permits lost (checked: some
# may have been gone), and forgotten with their ids (rlock gives back the
# rest).  From RlockTest::Model's sql, $t0 when the statement was sent.
sub sync_warnings
{
	my ($self, $i, $err, $t0) = @_;
	my %seen;
	while ($err =~ /WARNING: permits of semaphore "([^"]+)" were lost/g)
	{
		my $n = $1;
		next if $seen{$n}++;
		my $e = $self->{sem}{$i}{$n};
		if (!sem_count($e))
		{
			$self->violation('belief', "S$i: permits of $n reported lost; the model holds none");
			next;
		}
		# (rlock counts a fixed lease's permit lost a clock margin early:
		# holds_clock_margin_ms)
		my @l = grep { _id_promise($e, $_) - _id_margin($_) > $t0 } @{ $e->{ids} };
		$self->violation('belief', "S$i: permits of $n reported lost, but all are promised: "
			  . join(', ', map { sprintf('%s %.3f s more', _id_text($_), _id_promise($e, $_) - $t0) } @l))
		  if @l == @{ $e->{ids} } && !$e->{unsure};
		# (its transaction's permits with them: COMMIT may be refused)
		$self->{sem_xact_lost}{$i}{$n} = 1 if @{ $e->{xc} };
		delete $self->{sem}{$i}{$n};
	}
	return;
}

=pod

=item Hooks of RlockTest::Model

sync_xact_end($i, $t, $st, $err, $t0): a transaction (or savepoint) of
session $i ended ($t: commit, rollback, rollback_to, release_sp, abort
(an ERROR): before the model's depth changes).  sync_session_end($i,
$t1): rlock_release_all or DISCARD ALL gave back the session-level
permits.

=cut

sub sync_xact_end
{
	my ($self, $i, $t, $st, $err, $t0) = @_;
	my $s = $self->session($i);
	my $depth = $s->{depth};
	my $committed = $t eq 'commit' && !$s->{aborted} && $st eq '00000';
	my ($refused) = $t eq 'commit' && !$s->{aborted} && $st ne '00000'
	  ? $err =~ /cannot commit: permits of semaphore "([^"]+)"/ : ();
	foreach my $n (sort keys %{ $self->{sem}{$i} // {} })
	{
		my $e = $self->{sem}{$i}{$n};
		if ($t eq 'release_sp')
		{
			next if $s->{aborted};
			$_->{depth} = $depth - 1 foreach grep { $_->{depth} >= $depth } @{ $e->{xc} };
			next;
		}
		my $d = $t eq 'rollback_to' || $t eq 'abort' ? $depth : 0;
		my $levels = sum0(map { $_->{n} } grep { $_->{depth} >= $d } @{ $e->{xc} });
		if ($committed && $levels)
		{
			my @gone = _gone_ids($e, $t0);
			$self->violation('belief', "S$i: COMMIT succeeded though permit " . _id_text($gone[0])
				  . " of $n (held by its transaction) was gone") if @gone;
		}
		if (defined $refused && $refused eq $n)
		{
			# refused for a permit lost, or about to expire (a NULL-lease
			# entry renewed in time must commit): what is left of them all is
			# given back, or (should rlock keep the session's permits when
			# only the lease was short) those of the session stay
			$self->violation('belief', "S$i: COMMIT refused for $n, whose permits are all promised "
				  . "and renewed: $err")
			  unless $self->{sem_xact_lost}{$i}{$n}
			  || grep { defined $_->{lease} || _id_promise($e, $_) <= $t0 } @{ $e->{ids} };
			my ($kept) = RlockTest::run_sql($self->{mon}, "SELECT coalesce(sum(hold_count), 0) "
				  . "FROM rlock_locks WHERE pid = $s->{pid} AND name = '$n' AND scope = 'session'");
			if ($e->{sc} && $kept)
			{
				@{ $e->{xc} } = ();
				$e->{unsure} = 1;
				next;
			}
			delete $self->{sem}{$i}{$n};
			next;
		}
		@{ $e->{xc} } = grep { $_->{depth} < $d } @{ $e->{xc} };
		_give_back($e, $levels, time()) if $levels;
		$self->_tidy($i, $n);
	}
	delete $self->{sem_xact_lost}{$i} if $t eq 'commit' || $t eq 'rollback';
	return;
}

sub sync_session_end
{
	my ($self, $i, $t1) = @_;
	foreach my $n (sort keys %{ $self->{sem}{$i} // {} })
	{
		my $e = $self->{sem}{$i}{$n};
		_give_back($e, $e->{sc}, $t1) if $e->{sc};
		$e->{sc} = 0;
		$self->_tidy($i, $n);
	}
	return;
}

=pod

=item $m->check_sync(\%locks, \@rows)

After a step, with rlock_locks as RlockTest::Model's check read it
(%locks: "pid/name/kind" => { session, transaction, state => {} }; @rows:
[ pid, name, kind, renewed ]): Redis's semaphores and latches against
the model.

=cut

sub check_sync
{
	my ($self, $locks, $rows) = @_;
	my %sess_of_pid = map { ($self->session($_)->{pid} => $_) } 0 .. $self->nsessions - 1;
	foreach my $row (@$rows)
	{
		my ($pid, $n, $kind, $renewed) = @$row;
		next unless $kind eq 'semaphore' && defined $sess_of_pid{$pid};
		my $e = $self->{sem}{ $sess_of_pid{$pid} }{$n} or next;
		$e->{renewed} = $renewed if !defined $e->{renewed} || $renewed > $e->{renewed};
	}
	my (%get, %z, %latch);
	foreach my $n (@{ $self->{sem_names} })
	{
		($get{$n}) = $self->{r}->request('GET', $n);
		my ($v) = $self->{r}->request('ZRANGE', "{$n}:timeout", 0, -1, 'WITHSCORES');
		$z{$n} = { @{ $v // [] } };
	}
	($latch{$_}) = $self->{r}->request('GET', $_) foreach @{ $self->{latch_names} };
	my $tb = time();
	my %sess_of_holder = map { ($self->session($_)->{holder} => $_) } 0 .. $self->nsessions - 1;

	foreach my $n (@{ $self->{sem_names} })
	{
		my $total = $self->sem_total($n);
		my @ids = keys %{ $z{$n} };
		if (!defined $total)
		{
			$self->violation('permits', "$n: never set, but Redis has " . ($get{$n} // 'no key')
				  . ' and ' . scalar(@ids) . ' ids') if defined $get{$n} || @ids;
		}
		elsif (!defined $get{$n} || $get{$n} !~ /^-?\d+$/ || $get{$n} + @ids != $total)
		{
			$self->violation('permits', sprintf('%s: %s available and %d out; the model\'s total is %d',
				$n, $get{$n} // 'none', scalar(@ids), $total));
		}
		# each holder's ids
		my %have;
		foreach my $id (@ids)
		{
			if ($id =~ /^(.*):(\d+)$/ && defined $sess_of_holder{$1}) { $have{ $sess_of_holder{$1} }{$2} = $z{$n}{$id}; }
			elsif ($id =~ /^[0-9a-f]{32}$/) { $have{J}{$id} = $z{$n}{$id}; }
			else { $self->violation('untracked', "$n: permit id $id of nobody"); }
		}
		foreach my $w ($self->whos)
		{
			my $e = $self->{sem}{$w}{$n};
			my %mine = map { (($_->{k} // $_->{id}) => $_) } grep { !$_->{dead} } @{ $e ? $e->{ids} : [] };
			foreach my $k (sort keys %{ $have{$w} // {} })
			{
				$self->violation('untracked', _who($w) . " holds no permit $k of $n, but Redis has it")
				  unless $mine{$k} || ($w ne 'J' && $self->{pending}{$w});
			}
			next unless $e && !$e->{unsure};
			foreach my $id (grep { _id_promise($e, $_) > $tb } values %mine)
			{
				my $k = $id->{k} // $id->{id};
				my $score = $have{$w}{$k};
				if (!defined $score)
				{
					$self->violation('truth', sprintf('%s holds permit %s of %s, promised %.3f s more, '
						  . 'but Redis has no such id', _who($w), _id_text($id), $n, _id_promise($e, $id) - $tb));
					$id->{dead} = 1;    # the model follows: it is gone (no cascade)
				}
				elsif ($score / 1000 < _id_promise($e, $id) - 0.005)
				{
					$self->violation('ttl', sprintf('%s: permit %s of %s scored %.0f ms before its promise',
						$n, _id_text($id), _who($w), (_id_promise($e, $id) - $score / 1000) * 1000));
				}
			}
		}
		# rlock's beliefs: each session's permits, with the model's counts
		foreach my $i (0 .. $self->nsessions - 1)
		{
			next if $self->{pending}{$i};
			my $e = $self->{sem}{$i}{$n};
			my $row = $locks->{ $self->session($i)->{pid} . "/$n/semaphore" };
			my $want = sprintf('%d,%d', $e ? $e->{sc} : 0, $e ? _xcount($e) : 0);
			my $got = $row ? sprintf('%d,%d', $row->{session} // 0, $row->{transaction} // 0) : '0,0';
			my @state = $row ? sort keys %{ $row->{state} } : ();
			# (within the clock margin of its fixed leases' end, rlock may
			# already count the permits lost: failing closed is allowed)
			my $all_live = $e && !(grep { _id_promise($e, $_) <= $tb } @{ $e->{ids} })
			  && ($e->{renew} || !defined $e->{blo} || $e->{blo} > $tb);
			$self->violation('belief', "S$i holds $want (session,transaction) permits of $n"
				  . ($all_live ? ', all live' : '') . "; rlock_locks: $got @state")
			  if $got ne $want || ($all_live && "@state" ne 'held');
		}
	}
	foreach my $n (@{ $self->{latch_names} })
	{
		my $c = $self->latch_count($n);
		my $v = $latch{$n};
		$self->violation('latch', "$n: Redis has " . ($v // 'no key') . "; the model's count is $c")
		  if ($c == 0 ? defined $v : ($v // '') ne $c) || (defined $v && $v !~ /^[1-9]\d*$/);
	}
	return;
}

1;
