
# Copyright (c) 2026, rlock developers

#
# The checker of the model-based test (test/t/032_model.pl), for the
# locks: after every step, RlockTest::Model's reference model against
# rlock's beliefs (rlock_locks) and Redis's truth; and the report, one ok()
# per category.  Methods of RlockTest::Model (which inherits them); the
# semaphores' and latches' checks are RlockTest::ModelSync's.
#
package RlockTest::ModelCheck;

use strict;
use warnings;

use RlockTest ();
use Test::More;
use Time::HiRes qw(time);

sub _promise { return RlockTest::Model::_promise(@_); }
sub _range { return RlockTest::Model::_range(@_); }
sub _field { return RlockTest::Model::_field(@_); }
sub _cls { return RlockTest::Model::_cls(@_); }

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
	my @rows;
	foreach my $line (split /\n/, $rows)
	{
		my ($pid, $name, $kind, $scope, $cnt, $state, $renewed) = split /\|/, $line;
		next unless defined $renewed;
		push @rows, [ $pid, $name, $kind, $renewed ];
		# the last renewal seen extends the NULL-lease holds' promise
		if (defined $pid_of{$pid} && $kind ne 'semaphore')
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
					# holds past their lease may be gone already; a session
					# whose last call may have left a hold (a rollback to a
					# savepoint gives back at its next call) may have more
					my $surplus_ok = $w ne 'J' && $self->{pending}{$w};
					foreach my $v (@have)
					{
						$self->violation('truth', "$who holds $n ($side) " . _range(\@l, \@a)
							  . " times, Redis says $v->[0]{$field}")
						  if $v->[0]{$field} < @l || ($v->[0]{$field} > @a && !$surplus_ok);
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
	$self->check_sync(\%locks, \@rows);
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
			$self->abort_xact($i);
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
steps that led there.  Every step is written to
tmp_check/032_model_trail.txt when there was a violation, or when
RLOCK_MODEL_TRAIL is set.

=cut

sub report
{
	my ($self) = @_;
	if ((grep { $_ } values %{ $self->{nviol} }) || $ENV{RLOCK_MODEL_TRAIL})
	{
		my $f = "$PostgreSQL::Test::Utils::tmp_check/032_model_trail.txt";
		if (open my $fh, '>', $f)
		{
			print $fh "$_\n" foreach @{ $self->{trail} };
			close $fh;
			diag("every step: $f");
		}
	}
	foreach my $cat (@RlockTest::Model::CATEGORIES)
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
