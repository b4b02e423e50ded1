
# Copyright (c) 2026, rlock developers

#
# The steps on semaphores and count-down latches of the model-based test
# (test/t/032_model.pl), sessions' and the Redisson client's, each checked
# as it returns against RlockTest::ModelSync's model.  Methods of
# RlockTest::Model (which inherits them).
#
package RlockTest::ModelSyncOps;

use strict;
use warnings;

use List::Util qw(max sum0);
use Time::HiRes qw(time);

use RlockTest::ModelSync;

# the model's helpers
BEGIN
{
	no strict 'refs';
	*{$_} = \&{"RlockTest::ModelSync::$_"}
	  foreach qw(_xcount sem_count _id_promise _gone_ids _id_text _give_back _who);
}

# The Redisson client's side (RedissonPermitExpirableSemaphore's
# tryAcquire and tryRelease, RedissonCountDownLatch's countDown and
# trySetCount): KEYS the permits, {N}:timeout, redisson_sc:{N} (a latch:
# the key and its channel).  tryAcquire(permits) takes back at most as
# many expired permits as it asks for (LIMIT 0 permits, the lowest scored
# first): of a session's expired permits it may take some and leave the
# others, a gap among the session's ids; ARGV[4..] one id per permit.
our $J_SEM_ACQUIRE = <<'LUA';
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1])
if #expired > 0 then
  redis.call('zrem', KEYS[2], unpack(expired))
  local value = redis.call('incrby', KEYS[1], #expired)
  if tonumber(value) > 0 then redis.call('publish', KEYS[3], value) end
end
local value = redis.call('get', KEYS[1])
if value ~= false and tonumber(value) >= tonumber(ARGV[1]) then
  redis.call('decrby', KEYS[1], ARGV[1])
  for i = 4, #ARGV do redis.call('zadd', KEYS[2], ARGV[2], ARGV[i]) end
  return 1
end
return 0
LUA
# addPermits(n) and then tryAcquire(n) of those (n ids, ARGV[2..], scored
# ARGV[1]), as one script: Java-side permits out in bulk (hundreds), their
# ids among rlock's in {N}:timeout's order; the permits available stay.
our $J_SEM_BULK = <<'LUA';
for i = 2, #ARGV do redis.call('zadd', KEYS[2], ARGV[1], ARGV[i]) end
return #ARGV - 1
LUA
our $J_SEM_RELEASE = <<'LUA';
local removed = redis.call('zrem', KEYS[2], ARGV[1])
if tonumber(removed) == 0 then return 0 end
local value = redis.call('incrby', KEYS[1], 1)
redis.call('publish', KEYS[3], value)
return 1
LUA
our $J_LATCH_COUNT_DOWN = <<'LUA';
local v = redis.call('decr', KEYS[1])
if v <= 0 then redis.call('del', KEYS[1]) end
if v == 0 then redis.call('publish', KEYS[2], ARGV[1]) end
return v
LUA
our $J_LATCH_SET = <<'LUA';
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('set', KEYS[1], ARGV[2])
  redis.call('publish', KEYS[2], ARGV[1])
  return 1
end
return 0
LUA

sub _sem_keys { my $n = shift; return ($n, "{$n}:timeout", "redisson_sc:{$n}"); }
sub _latch_keys { my $n = shift; return ($n, "redisson_countdownlatch__channel__{$n}"); }
sub _ms { return int(time() * 1000); }

=pod

=item $m->run_sync_op(\%op)

Steps (s: a session index): sem_acq {s, name, permits, lease, xact};
sem_rel {s, name, permits}; sem_add {s, name, permits}; sem_set {s, name,
permits}; sem_avail {s, name}; sem_drop {s, name, how} (one of the
session's permit ids taken away in Redis: how 'jrel' (default), as a
Redisson tryRelease of it; 'zrem', a hostile ZREM that gives nothing back,
so the semaphore's total is one fewer); jsem_bulk {name, count, lease}
(count Java-side permits added and taken at once);
latch_set {s, name, count}; latch_down, latch_count, latch_await {s, name}
(await with wait '0'); jsem_acq {name, lease, permits (default 1)};
jsem_rel {name};
jlatch_down {name}; jlatch_set {name, count}; probe {s, fn, name}: a
call of another kind's function on the name (fn: lock, held, force,
release, sem, latch).

=cut

sub run_sync_op
{
	my ($self, $op) = @_;
	my $t = $op->{t};
	my $m = $self->can("_op_$t") or die "unknown op $t";
	return $m->($self, $op);
}

# A statement of session $i that failed: the transaction is aborted.  In
# a savepoint only the subtransaction is, and rlock gives its holds back in
# Redis at the next rlock call or the transaction's end, not at once
# (holds_xact.c): until then Redis may have more (pending, as
# RlockTest::Model's _failed says of a lock's call).
sub _sync_failed
{
	my ($self, $i, $st, $err, $what, $expected) = @_;
	my $s = $self->session($i);
	$self->{pending}{$i} = 1 if $s->{in_xact} && $s->{depth} > 0 && !$s->{aborted};
	$self->abort_xact($i);
	$self->violation('errors', "S$i: $what: $st $err") unless $expected || $st eq '25P02';
	return 0;
}

sub _op_sem_acq
{
	my ($self, $op) = @_;
	my ($i, $n, $p) = @$op{qw(s name permits)};
	my $s = $self->session($i);
	my $total = $self->sem_total($n) // 0;
	my $t0 = time();
	my @gone = _gone_ids($self->{sem}{$i}{$n}, $t0);
	my ($out, $st, $err) = $self->sql($i, sprintf(
		"SELECT rlock_semaphore%s_try_acquire('%s', %d, %s, '0')",
		$op->{xact} ? '_xact' : '', $n, $p, RlockTest::Model::_lease_sql($op->{lease})));
	my $t1 = time();
	my $lost = $err =~ /permits of semaphore "\Q$n\E" were lost/;
	if ($st ne '00000')
	{
		my $fewer = $st eq '22023' && $err =~ /has fewer permits than $p in all/;
		$self->violation('permits', "S$i: $n: $p permits are more than it has in all, "
			  . "but the model's total is $total") if $fewer && $p <= $total;
		return $self->_sync_failed($i, $st, $err, "sem_acq $n", $fewer);
	}
	$self->violation('permits', "S$i: $n: $p permits asked of a total of $total; "
		  . "no ERROR (22023) but '$out'") if $p > $total;
	my $e = $self->sem_entry($i, $n);
	if ($out ne 't')
	{
		my $avail_min = $total - $self->_sem_out_max($n, $t0);
		$self->violation('permits', "S$i: $n: $p permits refused, but at least $avail_min are available")
		  if $avail_min >= $p;
		$self->_tidy($i, $n);
		return 0;
	}
	my $others = $self->_sem_live_out($n, $t1, $i);
	my $own = grep { _id_promise($e, $_) > $t1 } @{ $e->{ids} };
	$own = 0 if $own < @{ $e->{ids} };    # a loss: rlock gives them all back
	$self->violation('exclusion', "$n: S$i got $p permits while $others of others and $own of its "
		  . "own were promised beyond it; the total is $total") if $others + $own + $p > $total;
	$self->violation('belief', "S$i: $n: permit " . _id_text($gone[0])
		  . " was gone, but the acquisition reported no loss") if @gone && !$lost;
	my $top = max(0, map { $_->{k} } @{ $e->{ids} });
	push @{ $e->{ids} }, map { { k => $top + $_, lease => $op->{lease}, t0 => $t0, t1 => $t1 } } 1 .. $p;
	if ($op->{xact})
	{
		my $x = $e->{xc}[-1];
		if ($x && $x->{depth} == $s->{depth}) { $x->{n} += $p; }
		else { push @{ $e->{xc} }, { depth => $s->{depth}, n => $p }; }
	}
	else { $e->{sc} += $p; }
	if (defined $op->{lease})
	{
		$e->{lo} = max($e->{lo} // 0, $t0 + $op->{lease} / 1000);
		$e->{hi} = max($e->{hi} // 0, $t1 + $op->{lease} / 1000);
		# rlock believes a fixed-lease permit for its lease less the clock
		# margin (holds_clock_margin_ms: 1 % + 100 ms, half the lease at
		# most), and reports it lost that much before Redis drops it
		$e->{blo} = max($e->{blo} // 0, $t0 + ($op->{lease}
			- List::Util::min($op->{lease} / 100 + 100, $op->{lease} / 2)) / 1000);
	}
	else
	{
		$e->{renew} = 1;
		$e->{null_t0} = $t0;
	}
	return 1;
}

sub _op_sem_rel
{
	my ($self, $op) = @_;
	my ($i, $n, $p) = @$op{qw(s name permits)};
	my $t0 = time();
	my $e0 = $self->{sem}{$i}{$n};
	my @gone = _gone_ids($e0, $t0);
	my ($sc, $xc) = $e0 ? ($e0->{sc}, _xcount($e0)) : (0, 0);
	my ($out, $st, $err) = $self->sql($i, "SELECT rlock_semaphore_release('$n', $p)");
	my $t1 = time();
	return $self->_sync_failed($i, $st, $err, "sem_rel $n") if $st ne '00000';
	return 0 if $err =~ /permits of semaphore "\Q$n\E" were lost/;    # (checked)
	my $what = "S$i: rlock_semaphore_release('$n', $p)";
	if ($out eq 't')
	{
		$self->violation('belief', "$what true, though permit " . _id_text($gone[0]) . ' was gone')
		  if @gone;
		$self->violation('belief', "$what true; the model holds $sc at session level") if $sc < $p;
		my $e = $self->sem_entry($i, $n);
		$e->{sc} = max(0, $e->{sc} - $p);
		_give_back($e, $p, $t1);
		$self->_tidy($i, $n);
		return 1;
	}
	my $ok = $err =~ /holds (\d+) at session level, not $p/ ? $1 == $sc && $sc < $p
	  : $err =~ /is held by this session only at transaction level/ ? $sc == 0 && $xc > 0
	  : $err =~ /is not held by this session/ ? $sc + $xc == 0 : 0;
	$self->violation('belief', "$what false ($err); the model holds $sc at session level, "
		  . "$xc at transaction level") unless $ok;
	return 0;
}

sub _op_sem_add
{
	my ($self, $op) = @_;
	my ($i, $n, $p) = @$op{qw(s name permits)};
	my ($out, $st, $err) = $self->sql($i, "SELECT rlock_semaphore_add_permits('$n', $p)");
	return $self->_sync_failed($i, $st, $err, "sem_add $n") if $st ne '00000';
	$self->{sem_total}{$n} = ($self->sem_total($n) // 0) + $p;
	return 1;
}

sub _op_sem_set
{
	my ($self, $op) = @_;
	my ($i, $n, $p) = @$op{qw(s name permits)};
	my ($out, $st, $err) = $self->sql($i, "SELECT rlock_semaphore_set_permits('$n', $p)");
	return $self->_sync_failed($i, $st, $err, "sem_set $n") if $st ne '00000';
	my $want = defined $self->sem_total($n) ? 'f' : 't';
	$self->violation('permits', "S$i: rlock_semaphore_set_permits('$n', $p) '$out'; the model's total is "
		  . ($self->sem_total($n) // 'unset')) if $out ne $want;
	$self->{sem_total}{$n} = $p if $out eq 't';
	return $out eq 't';
}

sub _op_sem_avail
{
	my ($self, $op) = @_;
	my ($i, $n) = @$op{qw(s name)};
	my $t0 = time();
	my ($out, $st, $err) = $self->sql($i, "SELECT rlock_semaphore_available('$n')");
	my $t1 = time();
	return $self->_sync_failed($i, $st, $err, "sem_avail $n") if $st ne '00000';
	my $total = $self->sem_total($n) // 0;
	my ($lo, $hi) = ($total - $self->_sem_out_max($n, $t0), $total - $self->_sem_live_out($n, $t1));
	$self->violation('permits', "S$i: $n: $out permits available; the model: $lo to $hi")
	  if $out < $lo || $out > $hi;
	return 1;
}

# One of session $i's permit ids on $n taken away in Redis (a Redisson
# client's tryRelease of it, by its id): the session's permits are lost.
sub _op_sem_drop
{
	my ($self, $op) = @_;
	my ($i, $n) = @$op{qw(s name)};
	my $holder = $self->session($i)->{holder};
	my ($ids) = $self->{r}->request('ZRANGE', "{$n}:timeout", 0, -1);
	my @mine = grep { /^\Q$holder\E:(\d+)$/ } @{ $ids // [] };
	if (!@mine)
	{
		$self->trail("drop a permit of S$i on $n: it has none in Redis");
		return 0;
	}
	my $id = $mine[ int(rand(@mine)) ];
	my $how = $op->{how} // 'jrel';
	my ($r) = $how eq 'zrem' ? $self->{r}->request('ZREM', "{$n}:timeout", $id)
	  : $self->{r}->request('EVAL', $J_SEM_RELEASE, 3, _sem_keys($n), $id);
	$self->trail("drop ($how) permit $id of $n (S$i) -> '" . ($r // '') . "'");
	# (a hostile ZREM gave nothing back: one permit fewer in all)
	$self->{sem_total}{$n}-- if $r && $how eq 'zrem';
	my ($k) = $id =~ /:(\d+)$/;
	my $e = $self->{sem}{$i}{$n};
	if ($r && $e)
	{
		$_->{dead} = 1 foreach grep { $_->{k} == $k && !$_->{dead} } @{ $e->{ids} };
		# every permit of the session on $n is lost with it, those of its
		# transaction too: its COMMIT may be refused, even once a later
		# call took new ones (rlock remembers the loss until the end)
		$self->{sem_xact_lost}{$i}{$n} = 1 if @{ $e->{xc} };
	}
	return $r // 0;
}

sub _op_latch_set
{
	my ($self, $op) = @_;
	my ($i, $n, $c) = @$op{qw(s name count)};
	my ($out, $st, $err) = $self->sql($i, "SELECT rlock_latch_set_count('$n', $c)");
	return $self->_sync_failed($i, $st, $err, "latch_set $n") if $st ne '00000';
	my $want = $self->latch_count($n) == 0 ? 't' : 'f';
	$self->violation('latch', "S$i: rlock_latch_set_count('$n', $c) '$out'; the model's count is "
		  . $self->latch_count($n)) if $out ne $want;
	$self->{latch}{$n} = $c if $out eq 't';
	return $out eq 't';
}

sub _op_latch_down
{
	my ($self, $op) = @_;
	my ($i, $n) = @$op{qw(s name)};
	my ($out, $st, $err) = $self->sql($i, "SELECT rlock_latch_count_down('$n')");
	return $self->_sync_failed($i, $st, $err, "latch_down $n") if $st ne '00000';
	my $want = max(0, $self->latch_count($n) - 1);
	$self->violation('latch', "S$i: rlock_latch_count_down('$n') $out; the model: $want") if $out ne $want;
	$self->{latch}{$n} = $want;
	return 1;
}

sub _op_latch_count
{
	my ($self, $op) = @_;
	my ($i, $n) = @$op{qw(s name)};
	my ($out, $st, $err) = $self->sql($i, "SELECT rlock_latch_count('$n')");
	return $self->_sync_failed($i, $st, $err, "latch_count $n") if $st ne '00000';
	$self->violation('latch', "S$i: rlock_latch_count('$n') $out; the model: " . $self->latch_count($n))
	  if $out ne $self->latch_count($n);
	return 1;
}

sub _op_latch_await
{
	my ($self, $op) = @_;
	my ($i, $n) = @$op{qw(s name)};
	my ($out, $st, $err) = $self->sql($i, "SELECT rlock_latch_await('$n', '0')");
	return $self->_sync_failed($i, $st, $err, "latch_await $n") if $st ne '00000';
	my $want = $self->latch_count($n) == 0 ? 't' : 'f';
	$self->violation('latch', "S$i: rlock_latch_await('$n', '0') $out; the model's count is "
		  . $self->latch_count($n)) if $out ne $want;
	return 1;
}

sub _op_jsem_acq
{
	my ($self, $op) = @_;
	my ($n, $lease) = @$op{qw(name lease)};
	my $p = $op->{permits} // 1;
	my @id = map { join('', map { sprintf('%x', int(rand(16))) } 1 .. 32) } 1 .. $p;
	my $t0 = time();
	my ($r, $rerr) = $self->{r}->request('EVAL', $J_SEM_ACQUIRE, 3, _sem_keys($n), $p,
		_ms() + $lease, _ms(), @id);
	my $t1 = time();
	$self->trail("J tryAcquire($n, $p, $lease) -> '" . ($r // $rerr // '') . "'");
	my $total = $self->sem_total($n) // 0;
	if (!$r)
	{
		# (its script takes back one expired permit at most: count them all)
		my $out = sum0(map { scalar grep { !$_->{dead} } @{ $_->{ids} } }
			  grep { defined } map { $self->{sem}{$_}{$n} } $self->whos);
		my $avail_min = $total - $out;
		$self->violation('permits', "J: $n: $p permits refused, but at least $avail_min are available")
		  if $avail_min >= $p;
		return 0;
	}
	my $live = $self->_sem_live_out($n, $t1);
	$self->violation('exclusion', "$n: J got $p permits while $live were promised beyond them; "
		  . "the total is $total") if $live + $p > $total;
	push @{ $self->sem_entry('J', $n)->{ids} },
	  map { { id => $_, lease => $lease, t0 => $t0, t1 => $t1 } } @id;
	return 1;
}

# Java-side permits in bulk: addPermits(count) and tryAcquire(count) of
# them at once (a semaphore that was set): count more in all, as many out.
sub _op_jsem_bulk
{
	my ($self, $op) = @_;
	my ($n, $c, $lease) = @$op{qw(name count lease)};
	return 0 unless defined $self->sem_total($n);
	my @id = map { join('', map { sprintf('%x', int(rand(16))) } 1 .. 32) } 1 .. $c;
	my $t0 = time();
	my ($r, $rerr) = $self->{r}->request('EVAL', $J_SEM_BULK, 3, _sem_keys($n),
		_ms() + $lease, @id);
	my $t1 = time();
	$self->trail("J addPermits + tryAcquire($n, $c, $lease) -> '" . ($r // $rerr // '') . "'");
	return 0 unless ($r // '') eq $c;
	$self->{sem_total}{$n} += $c;
	push @{ $self->sem_entry('J', $n)->{ids} },
	  map { { id => $_, lease => $lease, t0 => $t0, t1 => $t1 } } @id;
	return 1;
}

sub _op_jsem_rel
{
	my ($self, $op) = @_;
	my $n = $op->{name};
	my $e = $self->{sem}{J}{$n} or return 0;
	my $id = shift @{ $e->{ids} };
	my $t0 = time();
	my ($r, $rerr) = $self->{r}->request('EVAL', $J_SEM_RELEASE, 3, _sem_keys($n), $id->{id});
	$self->trail("J tryRelease($n, $id->{id}) -> '" . ($r // $rerr // '') . "'");
	$self->violation('truth', "J: $n: permit $id->{id} was promised "
		  . sprintf('%.3f s more', _id_promise($e, $id) - $t0) . ", but Redis no longer had it")
	  if !$r && _id_promise($e, $id) > $t0;
	$self->_tidy('J', $n);
	return $r;
}

sub _op_jlatch_down
{
	my ($self, $op) = @_;
	my $n = $op->{name};
	my ($r, $rerr) = $self->{r}->request('EVAL', $J_LATCH_COUNT_DOWN, 2, _latch_keys($n), '0');
	$self->trail("J countDown($n) -> '" . ($r // $rerr // '') . "'");
	$self->{latch}{$n} = max(0, $self->latch_count($n) - 1);
	return 1;
}

sub _op_jlatch_set
{
	my ($self, $op) = @_;
	my ($n, $c) = @$op{qw(name count)};
	my ($r, $rerr) = $self->{r}->request('EVAL', $J_LATCH_SET, 2, _latch_keys($n), '1', $c);
	$self->trail("J trySetCount($n, $c) -> '" . ($r // $rerr // '') . "'");
	my $want = $self->latch_count($n) == 0 ? 1 : 0;
	$self->violation('latch', "J: trySetCount($n, $c) " . ($r // $rerr // '')
		  . '; the model\'s count is ' . $self->latch_count($n)) if ($r // '') ne $want;
	$self->{latch}{$n} = $c if $r;
	return $r;
}

# A function of another kind on a name: a lock function on a semaphore's
# or a latch's (one with a count), a semaphore's or a latch's on a lock's.
# 42809, or (on a name nobody may hold as a lock) what an absent object
# gives; never a grant.  rlock_is_held answers for a semaphore (true only
# with permits of this session's own) and a latch (false).  Nothing changes (the checks after the step).
sub _op_probe
{
	my ($self, $op) = @_;
	my ($i, $fn, $n) = @$op{qw(s fn name)};
	my $sql = {
		lock => "SELECT rlock_try_acquire('$n', '30 s', '0')",
		held => "SELECT rlock_is_held('$n')",
		force => "SELECT rlock_force_release('$n')",
		release => "SELECT rlock_release('$n')",
		sem => "SELECT rlock_semaphore_try_acquire('$n', 1, '30 s', '0')",
		avail => "SELECT rlock_semaphore_available('$n')",
		latch => "SELECT rlock_latch_count('$n')",
	}->{$fn};
	my $t0 = time();
	my ($out, $st, $err) = $self->sql($i, $sql);
	my $t1 = time();
	$self->abort_xact($i) if $st ne '00000';
	my $ok;
	if ($fn eq 'release')
	{
		# a lock release of a name this session holds nothing of: a WARNING
		# (no round trip); of a semaphore it holds permits of: 42809
		$ok = sem_count($self->{sem}{$i}{$n}) ? $st eq '42809'
		  : $st eq '00000' && $out eq 'f' && $err =~ /is not held by this session/;
	}
	elsif ($fn eq 'held')
	{
		# introspection understands semaphores: held only with permits of
		# its own (a latch, or a semaphore it holds none of: false)
		$ok = $st eq '00000' && ($out eq 'f' || sem_count($self->{sem}{$i}{$n}));
	}
	elsif ($fn eq 'sem' || $fn eq 'avail' || $fn eq 'latch')
	{
		my $held = grep { $self->live($_, $n, $t1) } $self->whos;
		my $absent = $fn eq 'sem' ? $st eq '22023' : $st eq '00000' && $out eq '0';
		$ok = $st eq '42809' || (!$held && $absent);
	}
	else { $ok = $st eq '42809'; }
	$self->violation('errors', "S$i: $sql on a " . ($fn =~ /^(?:sem|avail|latch)$/ ? 'lock' : 'semaphore or latch')
		  . " name: " . ($st eq '00000' ? "'$out' $err" : "$st $err")) unless $ok;
	return $ok;
}


1;
