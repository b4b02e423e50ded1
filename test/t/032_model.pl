# Copyright (c) 2026, rlock developers
#
# Model-based, randomised (issue 21, section 2): four sessions in two
# databases of one server, and a Redisson client (RlockTest::Redisson, on
# the same Redis), run random sequences over a few names so that they
# collide: exclusive (blocking and try, re-entry with varied leases: NULL,
# 300 ms .. 30 s), fenced, read/write (read inside write), fair,
# multi-locks overlapping names held by the session and by others, Redlock
# (three more masters), transaction scope with savepoints (BEGIN,
# SAVEPOINT, ROLLBACK TO, RELEASE, COMMIT, ROLLBACK), DISCARD ALL,
# rlock_release_all, rlock_force_release, a blocking acquire cancelled
# mid-wait (pg_cancel_backend, statement_timeout), and time passing
# (rlock.watchdog_timeout 3 s: renewals every second).  Semaphores too
# (issue 23): permits set, added and taken away (negative adds), taken
# (1 to 3, session or transaction scope, NULL or a fixed lease, wait 0:
# more than the total is an ERROR), given back (more than held: false and
# a WARNING), counted; the Redisson client takes and gives back permits
# (its tryAcquire and tryRelease scripts; tryAcquire of 2 takes back at
# most 2 expired permits, LIMIT 0 2, which may leave a gap among a
# session's ids; hundreds of permits added and taken at once, so that
# rlock's scripts find a session's ids by id among many), and one of a
# session's permit ids is taken away (its permits are lost: a Redisson
# tryRelease of it, or a hostile ZREM that gives nothing back and leaves
# the semaphore one permit fewer); and count-down latches, set,
# counted down (from SQL and by the Redisson client), read and awaited
# (wait 0); and calls of another kind's functions on their names.  After
# every step RlockTest::Model compares its reference model (what each
# session holds, by kind, scope and count, from the calls' results) with
# rlock's beliefs (rlock_locks) and with Redis (HGETALL, PTTL, the read
# timeout keys; a semaphore's permits and its sorted set of permit ids; a
# latch's count):
#
#   exclusion  no acquisition while another holder's hold is promised
#              beyond it; no two holders of an exclusive key, no writer
#              beside another's field
#   ttl        a key's PTTL covers the longest lease promised to a live
#              hold on it (promise = time before the call + lease: Redis
#              can only have set it later; a Redlock: its validity; a
#              NULL lease: the last renewal seen + 4/5 of the watchdog
#              timeout, where rlock fails closed, so that a watchdog
#              starved by a loaded machine is no false alarm)
#   truth      a live hold is in Redis, with the model's count (Redlock:
#              on a majority); each live read hold has its timeout key
#   untracked  no field of a session that holds nothing there
#   belief     rlock_locks shows each live hold as 'held' with the model's
#              counts per scope, and nothing the model does not hold; a
#              release returns false only for a hold whose lease is over;
#              rlock_release_all counts no more names than may still be
#              held (none force-released) and no fewer than surely are;
#              COMMIT with NULL-lease transaction holds works
#   fencing    fencing tokens strictly increase
#   permits    a semaphore's permits available plus its ids out are the
#              total set and added, always; an acquisition beyond the
#              total is an ERROR, and a refusal comes only when fewer
#              may be available
#   latch      a latch's count in Redis and from every call is the
#              model's (absent: 0, never below)
#   errors     no call fails unexpectedly; a lock function on a
#              semaphore's or a latch's name fails with 42809 (and the
#              reverse), changing nothing; every wait checks for
#              deadlocks (rlock.deadlock_timeout 20 ms) and none is ever
#              reported (40P01): the steps never wait at once, so no
#              cycle of waits exists
#
# For semaphores, the categories above mean: exclusion, no acquisition
# while the permits promised to others and this one exceed the total; ttl,
# each permit id scored no lower than promised; truth, a session's live
# permit ids are in Redis; untracked, no id of a session that the model
# does not hold; belief, rlock_locks shows each session's permits with the
# model's counts ('held' while all are live), and a permit gone from Redis
# (taken away, or its fixed lease over) is never believed held: the next
# release returns false, the next acquisition reports the loss, COMMIT is
# refused; a loss is never reported while every permit is promised
# (RlockTest::ModelSync).
#
# Interleaved deterministically with the random steps: the shapes of
# issue 21 items 1-3 (a failed multi-lock over a held name, re-entry with a
# shorter lease, read inside write then released, a long-lease reader and
# a NULL-lease reader, write release of a writer that still reads), and of
# a semaphore's (one of two permits taken away, then one given back at
# once; a long and a short lease, then both given back after the short
# one's end).
#
# One ok() per category at the end; a failing one diags its first
# violations with their step numbers and the steps that led there, and
# every step (violations inline) is written to
# tmp_check/032_model_trail.txt (also without a violation when
# RLOCK_MODEL_TRAIL is set).  RLOCK_MODEL_SEED=n replays a run's
# choices (the seed is printed as "seed=n"; the calls' results, hence the
# later choices, may differ with timing); RLOCK_MODEL_SECONDS (default
# 60) and RLOCK_MODEL_STEPS bound it: a longer run is one variable away.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use RlockTest;
use RlockTest::Redlock;
use RlockTest::Model;

my $seed = ($ENV{RLOCK_MODEL_SEED} // '') =~ /^(\d+)$/ ? $1
  : int(time() * 1000) % 1_000_000_007 ^ $$;
my $budget_s = $ENV{RLOCK_MODEL_SECONDS} // 60;
my $max_steps = $ENV{RLOCK_MODEL_STEPS} // 1e9;
srand($seed);
diag("seed=$seed (replay: RLOCK_MODEL_SEED=$seed), budget ${budget_s}s");

my $redis = RlockTest::Redis->new;
my $rl = RlockTest::Redlock->new(masters => [ {}, {}, {} ]);
my $node = RlockTest::new_node('model', $redis,
	dbs => [ 'postgres', 'db2' ],
	watchdog_timeout => '3s',
	extra_conf => "rlock.redlock_urls = '" . $rl->urls . "'\n");

my @X = qw(mx1 mx2 mx3);     # exclusive, fenced, multi, the Redisson client
my @RW = qw(mrw1 mrw2);      # read/write
my @F = qw(mf1);             # fair
my @RL = qw(mrl1);           # Redlock
my @S = qw(ms1 ms2);         # semaphores
my @L = qw(ml1 ml2);         # count-down latches

my $m = RlockTest::Model->new(
	node => $node, redis => $redis, redlock => $rl,
	dbs => [qw(postgres postgres db2 db2)],
	names => [ @X, @RW, @F ], rl_names => [@RL], wd_ms => 3000,
	sem_names => [@S], latch_names => [@L],
	j_holder => '6f1c2b9e-3d4a-4e5f-8a7b-9c0d1e2f3a4b:57');
$m->{t_start} = time();
my $NS = $m->nsessions;

sub pick { return $_[ int(rand(@_)) ]; }
sub chance { return rand() < $_[0]; }
my @LEASES = (undef, undef, undef, 300, 1000, 2000, 5000, 30000);
sub lease { return pick(@LEASES); }
sub wait_ms { return pick(0, 0, 100, 200); }
my @SEM_LEASES = (undef, undef, 300, 1000, 2000, 5000, 30000);

# Names session $i holds (with a session-scope hold) of a pool, by kind.
sub held_by
{
	my ($i, $pool, @kinds) = @_;
	my %k = map { ($_ => 1) } @kinds;
	return grep {
		my $n = $_;
		grep { $k{ $_->{kind} } && $_->{scope} eq 'session' } @{ $m->holds_of($i, $n) }
	} @$pool;
}

# An acquisition of $name: the blocking function when the model says
# nobody else holds it, else try with a small wait.
sub acq
{
	my ($i, $kind, $name, $lease, %o) = @_;
	my $blocking = !$o{xact} && $kind ne 'redlock' && !$m->others_may_hold($i, $name)
	  && chance(0.5);
	return { t => 'acq', s => $i, kind => $kind, name => $name, lease => $lease,
		wait => $blocking ? undef : wait_ms(), xact => $o{xact} };
}

# Whether session $i holds $n for reading and not for writing (asking to
# write would be an upgrade, refused).
sub reads_only
{
	my ($i, $n) = @_;
	my @h = @{ $m->holds_of($i, $n) };
	return grep({ $_->{kind} eq 'r' } @h) && !grep({ $_->{kind} eq 'w' } @h);
}

# A random step for session $i inside a transaction.
sub xact_step
{
	my ($i) = @_;
	my $s = $m->session($i);
	if ($s->{aborted})
	{
		return { t => ($s->{depth} > 0 && chance(0.5)) ? 'rollback_to' : 'rollback', s => $i };
	}
	if (chance(0.4))
	{
		my $op = sync_step($i, 1);
		return $op if $op;
	}
	my $r = rand();
	$s->{xsteps}++;
	return { t => chance(0.7) ? 'commit' : 'rollback', s => $i } if $s->{xsteps} > 8 || $r < 0.12;
	return { t => 'rollback', s => $i } if $r < 0.17;
	return { t => 'savepoint', s => $i } if $r < 0.30;
	return { t => 'rollback_to', s => $i } if $r < 0.38 && $s->{depth} > 0;
	return { t => 'release_sp', s => $i } if $r < 0.42 && $s->{depth} > 0;
	if ($r < 0.55)
	{
		return { t => 'multi', s => $i, names => [ pick(@X), pick(@X) ], lease => lease(),
			wait => wait_ms(), xact => 1 };
	}
	if ($r < 0.7)
	{
		my $n = pick(@RW);
		return acq($i, reads_only($i, $n) ? 'r' : pick('r', 'w'), $n, lease(), xact => 1);
	}
	return;    # an acquisition of another kind: random_step's
}

# A random step.
sub random_step
{
	my $i = int(rand($NS));
	my $s = $m->session($i);
	if ($s->{in_xact})
	{
		my @op = xact_step($i);
		return $op[0] if @op;
		my $k = pick('x', 'x', 'fenced', 'fair', 'redlock');
		my $n = $k eq 'fair' ? pick(@F) : $k eq 'redlock' ? pick(@RL) : pick(@X);
		return acq($i, $k, $n, lease(), xact => 1);
	}
	# a name whose leases are all over (or force released): release first
	if (my ($n, $k) = $m->stale_name($i))
	{
		return { t => 'rel', s => $i, kind => $k, name => $n };
	}
	if (chance(0.35))
	{
		my $op = sync_step($i, 0);
		return $op if $op;
	}
	my $r = rand();
	if ($r < 0.22)    # exclusive, fenced: new or re-entry
	{
		return acq($i, pick('x', 'x', 'fenced'), pick(@X), lease());
	}
	if ($r < 0.40)    # release something held
	{
		my @h = map {
			my $n = $_;
			map { [ $n, $_->{kind} ] } grep { $_->{scope} eq 'session' } @{ $m->holds_of($i, $n) }
		} @X, @RW, @F, @RL;
		return random_step() unless @h;
		my ($n, $k) = @{ pick(@h) };
		return { t => 'rel', s => $i, kind => $k, name => $n };
	}
	if ($r < 0.55)    # read/write: read inside write, downgrade
	{
		my $n = pick(@RW);
		return acq($i, reads_only($i, $n) ? 'r' : pick('r', 'w'), $n, lease());
	}
	if ($r < 0.63)
	{
		my @names = map { pick(@X) } 1 .. 1 + int(rand(3));
		return { t => 'multi', s => $i, names => \@names, lease => lease(), wait => wait_ms() };
	}
	return acq($i, 'fair', pick(@F), lease()) if $r < 0.68;
	return acq($i, 'redlock', pick(@RL), pick(undef, 2000, 10000)) if $r < 0.73;
	if ($r < 0.77)
	{
		$s->{xsteps} = 0;
		return { t => 'begin', s => $i };
	}
	return { t => 'discard', s => $i } if $r < 0.785;
	return { t => 'release_all', s => $i } if $r < 0.80;
	return { t => 'force', s => $i, name => pick(@X, @RW) } if $r < 0.815;
	if ($r < 0.84)    # cancel mid-wait on a name another holds for long
	{
		foreach my $n (@X)
		{
			next if @{ $m->holds_of($i, $n) };
			foreach my $w ($m->whos)
			{
				next if "$w" eq "$i";
				return { t => 'cancel', s => $i, name => $n, how => pick('cancel', 'timeout') }
				  if grep { !defined $_->{lease} || RlockTest::Model::_promise($_) > time() + 10 }
				  $m->live($w, $n, time());
			}
		}
		my @free = grep { !$m->others_may_hold('J', $_) && !@{ $m->holds_of('J', $_) } } @X;
		return { t => 'jlock', name => pick(@free), lease => 30000 } if @free;
		return random_step();
	}
	if ($r < 0.93)    # the Redisson client
	{
		my $n = pick(@X);
		return { t => 'junlock', name => $n } if @{ $m->holds_of('J', $n) };
		return { t => 'jlock', name => $n, lease => pick(2000, 30000) };
	}
	return { t => 'sleep', ms => 200 + int(rand(1300)) };
}

# A random step on a semaphore or a latch for session $i (in a
# transaction: no probe, whose ERROR would abort it); the Redisson client's
# steps on them; a permit taken away.
sub sync_step
{
	my ($i, $in_xact) = @_;
	my $r = rand();
	my $n = pick(@S);
	my $e = $m->{sem}{$i}{$n};
	my $total = $m->sem_total($n);
	if ($r < 0.30)    # permits taken (set first, mostly)
	{
		return { t => 'sem_set', s => $i, name => $n, permits => 1 + int(rand(4)) }
		  if !defined $total && chance(0.7);
		# (more than the total is an ERROR: rarely in a transaction)
		my $p = pick(1, 1, 2, 3);
		$p = 1 + int(rand($total)) if $in_xact && ($total // 0) >= 1 && $p > $total && chance(0.8);
		return { t => 'sem_acq', s => $i, name => $n, permits => $p,
			lease => pick(@SEM_LEASES), xact => $in_xact && chance(0.85) };
	}
	if ($r < 0.46)    # given back: some of those held, or more (false)
	{
		my $sc = $e ? $e->{sc} : 0;
		return { t => 'sem_rel', s => $i, name => $n,
			permits => $sc && !chance(0.15) ? 1 + int(rand($sc)) : 1 + $sc };
	}
	if ($r < 0.53)
	{
		my $d = !defined $total || $total <= 1 ? pick(1, 2) : $total >= 6 ? -pick(1, 2) : pick(-2, -1, 1, 2);
		return { t => 'sem_add', s => $i, name => $n, permits => $d };
	}
	return { t => 'sem_set', s => $i, name => $n, permits => 1 + int(rand(4)) } if $r < 0.56;
	return { t => 'sem_avail', s => $i, name => $n } if $r < 0.60;
	if ($r < 0.74)
	{
		my $l = pick(@L);
		my $t = $m->latch_count($l) == 0 && chance(0.5) ? 'latch_set'
		  : pick(qw(latch_down latch_down latch_count latch_await latch_set));
		return { t => $t, s => $i, name => $l, count => pick(0, 1, 2, 3) };
	}
	if ($r < 0.83)    # the Redisson client
	{
		return { t => 'jsem_rel', name => $n } if $m->{sem}{J}{$n} && chance(0.5);
		# (Java-side permits in bulk, hundreds: rlock finds its own by id)
		return { t => 'jsem_bulk', name => $n, count => pick(100, 200, 400),
			lease => pick(2000, 30000) } if $r < 0.77 && defined $total;
		return { t => 'jsem_acq', name => $n, permits => pick(1, 1, 2),
			lease => pick(2000, 30000) } if $r < 0.80;
		my $l = pick(@L);
		return { t => $m->latch_count($l) ? 'jlatch_down' : pick('jlatch_set', 'jlatch_down'),
			name => $l, count => 1 + int(rand(3)) };
	}
	if ($r < 0.88)    # a session's permit id taken away
	{
		my @w = grep {
			my $f = $m->{sem}{$_}{$n};
			$f && grep { !$_->{dead} } @{ $f->{ids} }
		} 0 .. $NS - 1;
		return @w ? { t => 'sem_drop', s => pick(@w), name => $n, how => pick('jrel', 'zrem') }
		  : undef;
	}
	return if $in_xact;
	if ($r < 0.92)    # a transaction (its steps: xact_step)
	{
		$m->session($i)->{xsteps} = 0;
		return { t => 'begin', s => $i };
	}
	# a function of another kind: a lock's on a semaphore or a latch that
	# exists, a semaphore's or a latch's on a lock's name
	my @other = ((grep { defined $m->sem_total($_) } @S), (grep { $m->latch_count($_) } @L));
	return { t => 'probe', s => $i, fn => pick(qw(lock lock held force release)), name => pick(@other) }
	  if @other && chance(0.6);
	return { t => 'probe', s => $i, fn => pick(qw(sem avail latch)), name => pick(@X) };
}

# The known-bad shapes of issue 21 items 1-3, as fixed step sequences on
# names nobody holds (found when the shape is due; postponed if none).
sub free_names
{
	my ($pool) = @_;
	return grep {
		my $n = $_;
		!grep { @{ $m->holds_of($_, $n) } || ($_ ne 'J' && $m->{pending}{$_}) } $m->whos
	} @$pool;
}

my @SHAPES = (
	# 1: a failed multi-lock over a name held with a 30 s lease, another
	# name held elsewhere
	sub {
		my ($a, $b, $s1, $s2) = @_;
		return ([ x => 2 ], acq_f($s1, 'x', $a, 30000), acq_f($s2, 'x', $b, 30000),
			{ t => 'multi', s => $s1, names => [ $a, $b ], lease => 1000, wait => 0 },
			{ t => 'sleep', ms => 1500 });
	},
	# 1: re-entry with a shorter lease, NULL then 10 s, and 30 s then 300 ms
	sub {
		my ($a, $b, $s1, $s2) = @_;
		return ([ x => 2 ], acq_f($s1, 'x', $a, undef), acq_f($s1, 'x', $a, 10000),
			acq_f($s2, 'x', $b, 30000), acq_f($s2, 'x', $b, 300),
			{ t => 'sleep', ms => 1500 });
	},
	# 2: read inside write with a short lease, then released
	sub {
		my ($a, $b, $s1) = @_;
		return ([ rw => 1 ], acq_f($s1, 'w', $a, 30000), acq_f($s1, 'r', $a, 1000),
			acq_f($s1, 'r', $a, 1000), { t => 'rel', s => $s1, kind => 'r', name => $a },
			{ t => 'sleep', ms => 1500 });
	},
	# 3: a long-lease reader and a NULL-lease reader, renewed
	sub {
		my ($a, $b, $s1, $s2) = @_;
		return ([ rw => 1 ], acq_f($s1, 'r', $a, 20000), acq_f($s2, 'r', $a, undef),
			{ t => 'sleep', ms => 1500 });
	},
	# 3: write release while the writer still reads (NULL writer, 20 s read)
	sub {
		my ($a, $b, $s1) = @_;
		return ([ rw => 1 ], acq_f($s1, 'w', $a, undef), acq_f($s1, 'r', $a, 20000),
			{ t => 'sleep', ms => 1200 }, { t => 'rel', s => $s1, kind => 'w', name => $a },
			{ t => 'sleep', ms => 1200 });
	},
	# a semaphore: one of two permits taken away, then one given back at
	# once (before the watchdog looks): the loss is reported
	sub {
		my ($a, $b, $s1) = @_;
		return ([ sem => 1 ], sem_room($s1, $a, 3),
			{ t => 'sem_acq', s => $s1, name => $a, permits => 2, lease => 30000 },
			{ t => 'sem_drop', s => $s1, name => $a },
			{ t => 'sem_rel', s => $s1, name => $a, permits => 1 },
			{ t => 'sem_rel', s => $s1, name => $a, permits => 1 });
	},
	# a semaphore: permits of one session with a long and a short lease
	# share the long one's expiry (the short one does not run out alone,
	# unseen by rlock until the watchdog looks)
	sub {
		my ($a, $b, $s1) = @_;
		return ([ sem => 1 ], sem_room($s1, $a, 3),
			{ t => 'sem_acq', s => $s1, name => $a, permits => 1, lease => 30000 },
			{ t => 'sem_acq', s => $s1, name => $a, permits => 1, lease => 300 },
			{ t => 'sleep', ms => 500 },
			{ t => 'sem_rel', s => $s1, name => $a, permits => 2 });
	},
	# a semaphore: Redisson's tryAcquire(2) takes back two of a session's
	# three expired permits (LIMIT 0 2) and leaves the third: a gap among
	# the session's ids, which its release reports lost
	sub {
		my ($a, $b, $s1) = @_;
		return ([ sem => 1 ], sem_room($s1, $a, 3),
			{ t => 'sem_acq', s => $s1, name => $a, permits => 3, lease => 300 },
			{ t => 'sleep', ms => 500 },
			{ t => 'jsem_acq', name => $a, permits => 2, lease => 30000 },
			{ t => 'sem_rel', s => $s1, name => $a, permits => 3 });
	},
);

# Before a semaphore shape: session $i gives back what it holds of $n, and
# $n gets permits enough that $need are available for sure.
sub sem_room
{
	my ($i, $n, $need) = @_;
	my $e = $m->{sem}{$i}{$n};
	my @ops = $e && $e->{sc} ? ({ t => 'sem_rel', s => $i, name => $n, permits => $e->{sc} }) : ();
	my $total = $m->sem_total($n);
	return (@ops, { t => 'sem_set', s => $i, name => $n, permits => $need }) unless defined $total;
	my $out = 0;
	foreach my $w ($m->whos)
	{
		next if "$w" eq "$i";
		my $f = $m->{sem}{$w}{$n} or next;
		$out += grep { !$_->{dead} } @{ $f->{ids} };
	}
	my $more = $need - ($total - $out);
	return (@ops, $more > 0 ? { t => 'sem_add', s => $i, name => $n, permits => $more } : ());
}

# a shape's acquisition: blocking when free, else try with 200 ms
sub acq_f
{
	my ($i, $k, $n, $lease) = @_;
	return { t => 'acq', s => $i, kind => $k, name => $n, lease => $lease,
		wait => $m->others_may_hold($i, $n) ? 200 : undef };
}

my @queue;
my $next_shape = 0;
my %shapes_run;

# Queue the next shape; when its names are not free, first queue the
# releases that free them (names held in a transaction are left alone).
sub queue_shape
{
	my @idle = grep { !$m->session($_)->{in_xact} } 0 .. $NS - 1;
	return 0 if @idle < 2;
	my $s1 = pick(@idle);
	my $s2 = pick(grep { $_ != $s1 } @idle);
	my ($need) = $SHAPES[$next_shape]->('a', 'b', $s1, $s2);
	my $pool = $need->[0] eq 'x' ? \@X : $need->[0] eq 'sem' ? \@S : \@RW;
	my @free = $pool == \@S ? (pick(@S)) : free_names($pool);
	if (@free < $need->[1])
	{
		foreach my $n (grep { my $n = $_; !grep { $_ eq $n } @free } @$pool)
		{
			my @ops;
			foreach my $w ($m->whos)
			{
				return 0 if $w ne 'J' && ($m->{pending}{$w} || $m->session($w)->{in_xact})
				  && @{ $m->holds_of($w, $n) };
				next unless @{ $m->holds_of($w, $n) };
				push @ops, $w eq 'J' ? { t => 'junlock', name => $n }
				  : map { { t => 'rel', s => $w, kind => $_->{kind}, name => $n } } @{ $m->holds_of($w, $n) };
			}
			push @queue, @ops;
			return 0;
		}
		return 0;
	}
	my ($a, $b) = @free;
	my $k = $next_shape;
	# ops are built when the shape starts, so that "free" is judged then
	push @queue, sub { my (undef, @ops) = $SHAPES[$k]->($a, $b // $a, $s1, $s2); return @ops; };
	$shapes_run{$k}++;
	$next_shape = ($next_shape + 1) % @SHAPES;
	return 1;
}

my $t_end = time() + $budget_s;
my $steps = 0;
my $shape_due = 0;
while ($steps < $max_steps && time() < $t_end)
{
	# a shape is due every 20 steps (from step 5), tried until it starts
	$shape_due = 1 if $steps % 20 == 5;
	$shape_due = 0 if $shape_due && !@queue && queue_shape();
	my $op;
	if (@queue)
	{
		my $q = shift @queue;
		if (ref $q eq 'CODE')
		{
			unshift @queue, $q->();
			next;
		}
		$op = $q;
	}
	else
	{
		$op = random_step();
	}
	$m->run_op($op);
	$m->check;
	$steps++;
}

# the end: every session lets go; no field left in Redis
foreach my $i (0 .. $NS - 1)
{
	$m->run_op({ t => 'rollback', s => $i }) if $m->session($i)->{in_xact};
	$m->run_op({ t => 'release_all', s => $i });
	$m->run_op({ t => 'rel', s => $i, kind => 'redlock', name => $_ }) for @RL;
}
$m->run_op({ t => 'junlock', name => $_ }) for @X;
foreach my $n (@S)
{
	$m->run_op({ t => 'jsem_rel', name => $n }) while $m->{sem}{J}{$n};
}
$m->check;

note(sprintf('%d steps in %.1f s, shapes run: %s', $m->{step}, time() - $m->{t_start},
	join(' ', map { "$_:" . ($shapes_run{$_} // 0) } 0 .. $#SHAPES)));
diag("seed=$seed: $m->{step} steps");
cmp_ok(scalar(keys %shapes_run), '==', scalar(@SHAPES), 'every known-bad shape of items 1-3 was run')
  if $budget_s >= 30 && $max_steps > 500;
$m->report;

done_testing();
