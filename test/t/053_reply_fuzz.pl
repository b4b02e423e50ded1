# Copyright (c) 2026, rlock developers
#
# Reply fuzzer (SPEC 7: a broken or hostile server costs an ERROR, never
# more).  PostgreSQL talks to a real Redis through RlockTest::FuzzProxy,
# which parses every reply.  Round 0 records a plain run of the workload
# (every function of the extension; no mutation).  Then a sweep, one
# session per error word rlock parses (grep src/ for them): each kind's
# script is refused with the word, bare and with text after it, as Redis
# refuses a command before running it.  Then rounds of the workload, each
# in a new session, where a seeded generator mutates replies: another
# type, an error word (with and without text, inside a script error too)
# in place of a reply to a command that ran, truncated (then closed, or
# not), an extra reply, a reply dropped, huge or negative lengths and
# counts, deep nesting, one element of an array changed.  After each
# session, with mutations stopped:
#   - no backend or worker crashed (postmaster log, postmaster pid);
#   - every statement ended in a result or an ERROR with a SQLSTATE other
#     than XX000, well before statement_timeout (log_min_duration_statement
#     lists the slow ones), and the workload ended;
#   - the backend's memory stayed bounded (VmHWM);
#   - belief equals truth once the next call has run: each name
#     rlock_locks says this session holds is held in Redis by its holder
#     id, and Redis holds nothing for it that rlock_locks does not list;
#   - after the session ends, Redis holds nothing for it
# (but for a Redlock hold left on a master rlock could not reach to give it
# back or release it, which goes with its lease: see RlockTest::FuzzTruth::truth).  The
# deterministic cases behind these exemptions are in 049.
# A mutation no client can tell from the truth (nil, 0, -1 where an answer
# may be that; an error saying the command did not run, after it ran: a
# script's own RLOCK* refusal, or Redis's MOVED, ASK, NOAUTH, OOM, ...,
# @RlockTest::FuzzMutate::NOT_RUN: "(lie)" in the log) comes only in one
# round in three, not checked for belief.
# The workload: the statements below, and a generated call of every
# function of the catalog they do not name (so a new function is fuzzed
# without editing this).  Every address a mutated reply names is
# 127.0.0.1: the proxy's port or a closed one.
#
# Knobs: RLOCK_FUZZ_SEED (default: the time; printed), RLOCK_FUZZ_RATE
# (mutations per reply, default 0.15; 0 runs the harness alone),
# RLOCK_FUZZ_EXCHANGES (stop after this many mutated-round replies,
# default 10000), RLOCK_FUZZ_SECONDS (or after this long in all, default
# 120), RLOCK_FUZZ_KINDS (a comma list of mutation kinds: type, error,
# truncate_close, truncate_keep, extra, drop, length, nest, element),
# RLOCK_FUZZ_WORDS (a regexp: the sweep's words), RLOCK_FUZZ_NO_SWEEP.
# A failure lists the mutations of its round; rerun with its seed to
# replay them (connections are numbered per round in the order they are
# made: a background worker reconnecting at another moment may shift them).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use RlockTest;
use RlockTest::FuzzProxy;
use RlockTest::FuzzTruth;

my $seed = $ENV{RLOCK_FUZZ_SEED} // (time() * 1000 % 1000000000);
$seed = int($seed);
my $rate = $ENV{RLOCK_FUZZ_RATE} // 0.15;
my $max_exchanges = $ENV{RLOCK_FUZZ_EXCHANGES} // 10000;
my $max_seconds = $ENV{RLOCK_FUZZ_SECONDS} // 120;
note "reply fuzzer: RLOCK_FUZZ_SEED=$seed RLOCK_FUZZ_RATE=$rate "
  . "RLOCK_FUZZ_EXCHANGES=$max_exchanges RLOCK_FUZZ_SECONDS=$max_seconds";

# A backend's bound (as in 030_hostile_peers.pl: replies are capped at 64 MB)
my $MEM_BOUND_KB = 160 * 1024;
# A statement taking this long counts as not ending within its bound: far
# above what its round trips (command_timeout each) and waits (lock_timeout)
# allow, far below statement_timeout.
my $SLOW_MS = 20000;

my $redis = RlockTest::Redis->new;
my $dead_port = PostgreSQL::Test::Cluster::get_free_port();
my %kinds = map { ($_ => 1) } split /,/, ($ENV{RLOCK_FUZZ_KINDS} // '');
my $fz = RlockTest::FuzzProxy->new($redis, seed => $seed, rate => 0,
	dead_port => $dead_port, kinds => (%kinds ? \%kinds : undef));
note "fuzz proxy on port " . $fz->port . ", Redis on port " . $redis->port
  . ", redirections also name the closed port $dead_port";
# Redlock on the same Redis through the proxy, in database 1
my $redlock_url = $fz->url =~ s{/0$}{/1}r;
my $node = RlockTest::new_node('fuzz', $fz,
	watchdog_timeout => '9s',
	extra_conf => "rlock.replica_acks = 0\n"
	  . "rlock.redlock_urls = '$redlock_url'\n"
	  . "log_min_duration_statement = '${SLOW_MS}ms'\n");
my $pm_pid = RlockTest::postmaster_pid($node);


sub vm_hwm
{
	my ($pid) = @_;
	open(my $fh, '<', "/proc/$pid/status") or return undef;
	my ($hwm) = map { /^VmHWM:\s+(\d+)/ ? $1 : () } <$fh>;
	close $fh;
	return $hwm;
}

# ---- Redis's truth: RlockTest::FuzzTruth (truth(), clean_redis()) ----

$RlockTest::FuzzTruth::REDIS = $redis;
sub truth { return RlockTest::FuzzTruth::truth(@_); }
sub clean_redis { return RlockTest::FuzzTruth::clean_redis(); }

# ---- the workload ----

my @workload = (
	"SELECT rlock_ping() IS NOT NULL",
	"SELECT rlock_version() IS NOT NULL",
	"SELECT rlock_semaphore_set_permits('fz:sem', 5)",
	"SELECT rlock_semaphore_add_permits('fz:sem', 2)",
	"SELECT rlock_latch_set_count('fz:latch', 3)",
	# exclusive
	"SELECT rlock_acquire('fz:ex')",
	"SELECT rlock_acquire('fz:ex', '60s')",
	"SELECT rlock_try_acquire('fz:ex2', '60s')",
	"SELECT rlock_try_acquire('fz:ex3', NULL, '50ms')",
	"SELECT rlock_is_locked('fz:ex'), rlock_is_held('fz:ex'), "
	  . "rlock_hold_count('fz:ex'), rlock_remaining_lease('fz:ex') IS NOT NULL",
	"SELECT kind, hold_count FROM rlock_status('fz:ex')",
	"SELECT rlock_release('fz:ex')",
	"SELECT rlock_acquire('fz:own', '60s', 'fzowner')",
	"SELECT rlock_try_acquire('fz:own2', '60s', '0', 'fzowner')",
	"SELECT rlock_release('fz:own', 'fzowner')",
	"SELECT rlock_release('fz:own2', 'fzowner')",
	# transaction scope, every kind, and a subtransaction rolled back
	"BEGIN",
	"SELECT rlock_xact_acquire('fz:x')",
	"SELECT rlock_xact_try_acquire('fz:x2', '60s')",
	"SELECT rlock_fenced_xact_acquire('fz:fx') > 0",
	"SELECT rlock_fenced_xact_try_acquire('fz:fx2', '60s') > 0",
	"SELECT rlock_read_xact_acquire('fz:rwx')",
	"SELECT rlock_write_xact_try_acquire('fz:rwx2')",
	"SELECT rlock_fair_xact_acquire('fz:fairx')",
	"SELECT rlock_fair_xact_try_acquire('fz:fairx2', '60s')",
	"SELECT rlock_multi_xact_acquire('{fz:mx1,fz:mx2}')",
	"SELECT rlock_multi_xact_try_acquire('{fz:mx3,fz:mx4}', '60s')",
	"SELECT rlock_semaphore_xact_acquire('fz:sem')",
	"SELECT rlock_semaphore_xact_try_acquire('fz:sem', 1, '60s')",
	"SELECT rlock_redlock_xact_acquire('fz:rlx')",
	"SELECT rlock_redlock_xact_try_acquire('fz:rlx2', '60s')",
	"SAVEPOINT a",
	"SELECT rlock_xact_acquire('fz:x3')",
	"ROLLBACK TO a",
	"SELECT count(*) >= 0 FROM rlock_locks",
	"COMMIT",
	"BEGIN",
	"SELECT rlock_xact_acquire('fz:x4')",
	"ROLLBACK",
	# fenced
	"SELECT rlock_fenced_acquire('fz:fen') > 0",
	"SELECT rlock_fenced_try_acquire('fz:fen2', '60s') > 0",
	"SELECT rlock_fenced_acquire('fz:fen3', '60s', 'fzowner') > 0",
	"SELECT rlock_fenced_try_acquire('fz:fen4', '60s', '0', 'fzowner') > 0",
	"SELECT rlock_fenced_token('fz:fen') > 0",
	"SELECT rlock_release('fz:fen')",
	"SELECT rlock_release('fz:fen3', 'fzowner')",
	"SELECT rlock_release('fz:fen4', 'fzowner')",
	# read/write
	"SELECT rlock_read_acquire('fz:rw')",
	"SELECT rlock_read_try_acquire('fz:rw', '60s')",
	"SELECT rlock_write_try_acquire('fz:rw2')",
	"SELECT rlock_write_acquire('fz:rw3', '60s')",
	"SELECT rlock_read_acquire('fz:rw3')",
	"SELECT rlock_read_release('fz:rw')",
	"SELECT rlock_write_release('fz:rw3')",
	"SELECT rlock_read_acquire('fz:rwo', '60s', 'fzowner')",
	"SELECT rlock_read_try_acquire('fz:rwo', '60s', '0', 'fzowner')",
	"SELECT rlock_read_release('fz:rwo', 'fzowner')",
	"SELECT rlock_write_acquire('fz:rwo2', '60s', 'fzowner')",
	"SELECT rlock_write_try_acquire('fz:rwo3', '60s', '0', 'fzowner')",
	"SELECT rlock_write_release('fz:rwo2', 'fzowner')",
	"SELECT rlock_write_release('fz:rwo3', 'fzowner')",
	# fair
	"SELECT rlock_fair_acquire('fz:fair')",
	"SELECT rlock_fair_try_acquire('fz:fair2', '60s', '50ms')",
	"SELECT rlock_fair_release('fz:fair')",
	"SELECT rlock_fair_acquire('fz:fairo', '60s', 'fzowner')",
	"SELECT rlock_fair_try_acquire('fz:fairo2', '60s', '0', 'fzowner')",
	"SELECT rlock_fair_release('fz:fairo', 'fzowner')",
	"SELECT rlock_fair_release('fz:fairo2', 'fzowner')",
	# multi
	"SELECT rlock_multi_acquire('{fz:m1,fz:m2}')",
	"SELECT rlock_multi_try_acquire('{fz:m3,fz:m4}', '60s')",
	"SELECT rlock_multi_release('{fz:m1,fz:m2}')",
	# Redlock
	"SELECT rlock_redlock_acquire('fz:rl')",
	"SELECT rlock_redlock_try_acquire('fz:rl2', '60s', '50ms')",
	"SELECT rlock_redlock_release('fz:rl')",
	# semaphore
	"SELECT rlock_semaphore_available('fz:sem')",
	"SELECT rlock_semaphore_acquire('fz:sem')",
	"SELECT rlock_semaphore_try_acquire('fz:sem', 2, '60s')",
	"SELECT rlock_semaphore_try_acquire('fz:sem', 1, NULL, '50ms')",
	"SELECT rlock_semaphore_release('fz:sem')",
	"SELECT rlock_semaphore_available('fz:sem')",
	# latch
	"SELECT rlock_latch_count_down('fz:latch')",
	"SELECT rlock_latch_count('fz:latch')",
	"SELECT rlock_latch_await('fz:latch', '50ms')",
	"SELECT rlock_latch_set_count('fz:latch2', 1)",
	"SELECT rlock_latch_count_down('fz:latch2')",
	"SELECT rlock_latch_await('fz:latch2')",
	# introspection
	"SELECT count(*) >= 0 FROM rlock_locks",
	"SELECT count(*) >= 0 FROM rlock_nodes()",
	"SELECT acquisitions >= 0 FROM rlock_stats",
	"SELECT rlock_holder_id() IS NOT NULL",
	"SELECT rlock_force_release('fz:ex2')",
	"SELECT rlock_stats_reset()",);

# Every function of the extension the statements above do not call gets a
# generated call: its arguments without defaults, by type.
my %arg_for = (
	text => "'fz:auto'",
	'text[]' => "'{fz:auto1,fz:auto2}'",
	interval => "'60s'",
	integer => '1',
	bigint => '1',
	boolean => 'false',);
my $catalog = $node->safe_psql(
	'postgres', q{
	SELECT p.proname || '|' ||
	       coalesce(array_to_string((p.proargtypes::regtype[])
	                [0:p.pronargs - p.pronargdefaults - 1], ','), '')
	FROM pg_proc p
	JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
	JOIN pg_extension e ON e.oid = d.refobjid AND d.deptype = 'e'
	WHERE e.extname = 'rlock' ORDER BY 1});
my $text = join("\n", @workload);
my (@generated, %functions);
for my $line (split /\n/, $catalog)
{
	my ($f, $types) = split /\|/, $line, 2;
	$functions{$f} = 1;
	next if $text =~ /\b\Q$f\E\b/;
	my @args = map { $arg_for{$_} // "NULL::$_" } split /,/, $types;
	push @generated, "SELECT count(*) >= 0 FROM $f(" . join(', ', @args) . ')';
}
note scalar(keys %functions) . ' functions in the catalog; calls generated for '
  . (@generated ? join('; ', @generated) : 'none');
# and the session ends the workload holding a lock of every kind, for the
# check of belief against truth
push @workload, @generated, 'ROLLBACK',
  "SELECT rlock_acquire('fz:k1')",
  "SELECT rlock_try_acquire('fz:k2', '60s')",
  "SELECT rlock_fenced_acquire('fz:k3') > 0",
  "SELECT rlock_read_acquire('fz:k4')",
  "SELECT rlock_write_acquire('fz:k5', '60s')",
  "SELECT rlock_fair_acquire('fz:k6')",
  "SELECT rlock_multi_acquire('{fz:k7,fz:k8}')",
  "SELECT rlock_redlock_acquire('fz:k9')",
  "SELECT rlock_semaphore_acquire('fz:sem', 2)";

# ---- rounds ----

my (%failures, $rounds, %sqlstates);
my %sweep_lies;    # sweep rounds whose refusals lie (see the sweep)
my $lie_rounds = 0;    # rounds not checked for belief against truth
my $t_start = time;

sub fail_round
{
	my ($invariant, $r, $what) = @_;
	push @{ $failures{$invariant} }, "round $r: $what";
	return;
}

# Run one session's workload ($drive->($session, $pid): (ended, stderr)) in
# round $r with mutation rate $p, then check it as the header says.
sub round
{
	my ($r, $p, $drive) = @_;
	my $log_off = -s $node->logfile;
	my $ok = eval { round_checked($r, $p, $drive, $log_off) };
	return $ok if defined $ok;
	# the harness died with the session (lost, or its server gone)
	my $why = $@;
	# a backend killed by a signal: the postmaster says so (and stops)
	RlockTest::wait_until(
		sub { RlockTest::log_has($node, $log_off, qr/terminated by signal/) }, 5);
	my @log = grep { /ERROR|WARNING|FATAL|PANIC|TRAP|signal|terminat|STATEMENT|Failed process/ }
	  split /\n/, slurp_file($node->logfile, $log_off);
	my ($crash) = grep { /terminated by signal/ } @log;
	fail_round('crash', $r, "the round died: $why" . ($crash ? "; $crash" : ''));
	splice(@log, 0, @log - 40) if @log > 40;
	diag "round $r died: $why; server log:\n" . join("\n", @log);
	diag "round $r mutations (RLOCK_FUZZ_SEED=$seed):\n  "
	  . join("\n  ", $fz->mutations($r));
	return 0;
}

sub round_checked
{
	my ($r, $p, $drive, $log_off) = @_;
	clean_redis();
	$fz->round($r);
	$fz->rate(0);
	# one round in three may lie (and is not checked for belief)
	$fz->lies($r % 3 == 0 ? 1 : 0);

	my $s = $node->background_psql('postgres', on_error_stop => 0);
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	chomp $pid;
	my $holder = RlockTest::holder_of($s);
	$s->query_safe("SET $_")
	  for ("rlock.command_timeout = '300ms'", "rlock.connect_timeout = '300ms'",
		"lock_timeout = '1s'",
		# every wait of the workload checks for deadlocks at once: the
		# wait graph's replies (its scripts, the waits read) are fuzzed too
		"rlock.deadlock_timeout = '1ms'",
		"statement_timeout = '60s'");
	$s->query_until(qr/verbose\n/, "\\set VERBOSITY verbose\n\\echo verbose\n");

	$fz->rate($p);
	my $t0 = time;
	my ($done, $err) = $drive->($s, $pid);
	my $secs = time - $t0;
	my $hwm = vm_hwm($pid);
	$fz->rate(0);
	if (!$done)
	{
		fail_round('ended', $r, "the workload did not end in 300 s");
		$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
		$s->{run}->kill_kill;
		return 0;
	}
	my %st;
	$st{$2}++ while $err =~ /(?:^|: )(ERROR|FATAL|PANIC):\s+([0-9A-Z]{5}):/mg;
	$sqlstates{$_} += $st{$_} for keys %st;
	fail_round('sqlstate', $r, "an ERROR without a SQLSTATE of its own (XX000): "
		  . join(' | ', $err =~ /ERROR:\s+XX000: ([^\n]*)/mg))
	  if $st{XX000};
	fail_round('ended', $r, 'statement_timeout cancelled a call')
	  if $err =~ /canceling statement due to statement timeout/;
	fail_round('ended', $r, "the session was lost: $1")
	  if $err =~ /^(FATAL|PANIC|.*server closed the connection.*|.*connection to server was lost.*)$/m;
	fail_round('memory', $r, "backend VmHWM " . ($hwm // 'gone') . " kB")
	  unless defined $hwm && $hwm < $MEM_BOUND_KB;
	note sprintf("round %d (rate %s): %.1f s, backend VmHWM %s kB, SQLSTATEs %s",
		$r, $p, $secs, $hwm // 'gone',
		join(' ', map { "$_×$st{$_}" } sort keys %st) || 'none');

	# belief against truth, once the next call has run (unless a mutation
	# lied: answered as Redis could have, but not as it did)
	my @lies = grep { /\(lie\)/ } $fz->mutations($r);
	push @lies, 'sweep' if $sweep_lies{$r};
	$lie_rounds++ if @lies;
	my ($ping_out, $ping_err) = RlockTest::run_sql($s, 'SELECT rlock_ping() IS NOT NULL');
	note "round $r: the next call after the mutations stopped failed: $ping_err"
	  if $ping_err =~ /ERROR/;
	my (@problems, $believed, $redlock_left);
	my $agree = sub {
		my ($o, $e) = RlockTest::run_sql($s,
			"SELECT name || '|' || state FROM rlock_locks "
			  . "WHERE pid = pg_backend_pid() AND holder = rlock_holder_id()");
		my (%held, %known);
		for (split /\n/, $o)
		{
			my ($n, $state) = split /\|/;
			$known{$n} = 1;
			$held{$n} = 1 if $state eq 'held';
		}
		my $truth = truth($holder);
		@problems = (
			(map { "rlock believes it holds $_, Redis does not have it" }
				  grep { !$truth->{$_} } sort keys %held),
			(map { "Redis holds $_ for this session, rlock_locks does not list it" }
				  grep { !$known{$_} && $truth->{$_} ne 'lease' } sort keys %$truth));
		$redlock_left = join(', ',
			grep { !$known{$_} && $truth->{$_} eq 'lease' } sort keys %$truth);
		push @problems, "rlock_locks failed: $e" if $e =~ /ERROR/;
		$believed = join(',', sort keys %known);
		return !@problems;
	};
	fail_round('agree', $r, join('; ', @problems))
	  unless @lies || RlockTest::wait_until($agree, 5);
	note "round $r: rlock_locks lists " . ($believed || 'nothing') . ', as Redis does'
	  . ($redlock_left ? " (and a Redlock master keeps $redlock_left for its lease)" : '')
	  unless @problems;

	# and nothing left once the session ends
	$s->quit;
	my $left;
	fail_round('session_end', $r,
		"Redis still holds " . join(', ', sort keys %$left) . " after the session ended")
	  unless @lies || RlockTest::wait_until(
		sub {
			my $t = truth($holder);
			$left = { map { ($_ => 1) } grep { $t->{$_} ne 'lease' } keys %$t };
			!%$left;
		},
		5);

	my $log = slurp_file($node->logfile, $log_off);
	fail_round('crash', $r, $1)
	  if $log =~ /^(.*(?:terminated by signal|was terminated by|server process .* exited abnormally|reinitializing|PANIC:).*)$/m;
	fail_round('ended', $r, "a statement took over $SLOW_MS ms: $1")
	  if $log =~ /duration: (\d+\.\d+ ms\s+statement: [^\n]{0,200})/;
	fail_round('crash', $r, 'the postmaster restarted')
	  if RlockTest::postmaster_pid($node) ne $pm_pid;

	if (grep { /^round $r:/ } map { @$_ } values %failures)
	{
		diag "round $r failed: "
		  . join("\n  ", grep { /^round $r:/ } map { @$_ } values %failures)
		  . "\nits mutations (RLOCK_FUZZ_SEED=$seed):\n  "
		  . join("\n  ", $fz->mutations($r));
	}
	return !grep { /^round $r:/ } @{ $failures{crash} // [] };
}

# The workload in one go, in the background.
sub run_workload
{
	my ($s) = @_;
	RlockTest::start_bg($s, join(";\n", @workload));
	my $done = RlockTest::wait_until(sub { RlockTest::bg_done($s) }, 300);
	return (0, '') unless $done;
	my (undef, $err) = RlockTest::bg_result($s);
	return (1, $err);
}

# round 0 records the plain run; the harness must find nothing in it
round(0, 0, \&run_workload);
my %rec = $fz->stats;
note "round 0 recorded $rec{exchanges} replies of real Redis";
ok(!%failures, 'the plain run (no mutations) passes every check')
  or diag explain \%failures;

# The error-word sweep: every error word rlock parses, bare and with text
# after it, as the answer to each kind's script (after a plain call that
# sets the stage), one session a word: the command does not reach Redis,
# the proxy refuses it with the error, as Redis does (NOSCRIPT, MOVED,
# READONLY, OOM, ... come before a script runs; a script's own RLOCK*
# refusals before it writes).  Deterministic: no seed involved.
# RLOCKKIND is the one word that lies here: a release (or reconcile) script
# answers it only when the name has become a lock of another kind, which
# means this session's hold is gone, and rlock rightly reports the hold
# lost and forgets it; answered while Redis still has the hold, it cannot
# be told from the truth.  Its round is checked for everything but belief
# against truth (as a round with a lie is).
my @sweep = (
	[ undef, "SELECT rlock_try_acquire('fz:s1', '60s')" ],
	[ "SELECT rlock_acquire('fz:s2', '60s')", "SELECT rlock_release('fz:s2')" ],
	[ undef, "SELECT rlock_acquire('fz:s2b')" ],
	[ undef, "SELECT rlock_semaphore_try_acquire('fz:sem')" ],
	[ "SELECT rlock_semaphore_acquire('fz:sem')",
		"SELECT rlock_semaphore_release('fz:sem')" ],
	[ undef, "SELECT rlock_semaphore_available('fz:sem')" ],
	[ undef, "SELECT rlock_semaphore_add_permits('fz:sem', 1)" ],
	[ "SELECT rlock_acquire('fz:so', '60s', 'fzowner')",
		"SELECT rlock_release('fz:so', 'fzowner')" ],
	[ undef, "SELECT rlock_latch_count_down('fz:latch')" ],
	[ undef, "SELECT rlock_latch_await('fz:latch', '50ms')" ],
	[ undef, "SELECT rlock_read_try_acquire('fz:s3', '60s')" ],
	[ "SELECT rlock_write_acquire('fz:s4', '60s')",
		"SELECT rlock_write_release('fz:s4')" ],
	[ undef, "SELECT rlock_fair_try_acquire('fz:s5', '60s')" ],
	[ undef, "SELECT rlock_fenced_try_acquire('fz:s6', '60s')" ],
	[ undef, "SELECT rlock_multi_try_acquire('{fz:s7,fz:s8}', '60s')" ],
	[ undef, "SELECT rlock_redlock_try_acquire('fz:s9', '60s')" ],
	[ undef, "SELECT rlock_is_locked('fz:s1')" ],
	[ undef, "SELECT rlock_ping() IS NOT NULL" ],
	[ "BEGIN; SELECT rlock_xact_acquire('fz:s10')", "COMMIT" ],);
my @words = @RlockTest::FuzzMutate::WORDS;
@words = grep { $_ =~ $ENV{RLOCK_FUZZ_WORDS} } @words
  if defined $ENV{RLOCK_FUZZ_WORDS};
my $sweep_round = 0;
my %sweep_used;
my $go = $rate > 0 && !%failures;
if ($go && !$ENV{RLOCK_FUZZ_NO_SWEEP})
{
	for my $word (@words)
	{
		my @texts = ($word, "$word x");
		push @texts, "$word lock", "$word semaphore" if $word eq 'RLOCKKIND';
		push @texts, "$word 1 127.0.0.1:$dead_port" if $word =~ /^(MOVED|ASK)$/;
		my %seen;
		$sweep_lies{ $sweep_round + 1 } = 1 if $word eq 'RLOCKKIND';
		round(
			++$sweep_round, 0,
			sub {
				my ($s, $pid) = @_;
				my $err = '';
				RlockTest::run_sql($s, $_)
				  for ("SELECT rlock_semaphore_set_permits('fz:sem', 5)",
					"SELECT rlock_latch_set_count('fz:latch', 100)");
				for my $text (@texts)
				{
					for my $case (@sweep)
					{
						my ($prep, $sql) = @$case;
						RlockTest::run_sql($s, $prep) if defined $prep;
						$fz->once($pid, "-$text\r\n");
						my ($o, $e, $st) = RlockTest::run_sql($s, $sql);
						$sweep_used{ $fz->once_clear ? 'used' : 'unused' }++;
						RlockTest::run_sql($s, 'ROLLBACK') if $sql eq 'COMMIT';
						$err .= $e;
						my ($state) = $e =~ /ERROR:\s+([0-9A-Z]{5}):/;
						$seen{ $state // $st // '?' }++;
					}
				}
				note "sweep $word: " . join(' ', map { "$_×$seen{$_}" } sort keys %seen);
				return (1, $err);
			}) or ($go = 0, last);
	}
	note "sweep: $sweep_used{used} replaced replies, "
	  . ($sweep_used{unused} // 0) . " calls sent no command to replace";
}

$rounds = 0;
my %before = $fz->stats;
if ($go)
{
	while (1)
	{
		my %s = $fz->stats;
		last if $s{exchanges} - $before{exchanges} >= $max_exchanges;
		last if time - $t_start >= $max_seconds;
		$rounds++;
		round($sweep_round + $rounds, $rate, \&run_workload) or last;
	}
}

my %s = $fz->stats;
note sprintf(
	"RLOCK_FUZZ_SEED=%d: %d mutated rounds (%d with a lie, not checked for belief against truth), %d replies, %d mutated (%s), %.0f s; SQLSTATEs: %s",
	$seed, $rounds, $lie_rounds, $s{exchanges} - $before{exchanges}, $s{mutated},
	join(' ', map { /^kind\.(.*)/ ? "$1 $s{$_}" : () } sort keys %s),
	time - $t_start,
	join(' ', map { "$_×$sqlstates{$_}" } sort keys %sqlstates));

my %what = (
	crash => 'no backend or worker crashed, the server never restarted',
	ended => 'every call ended within its bound',
	sqlstate => 'every ERROR carried a SQLSTATE of its own',
	memory => 'the backend memory stayed bounded',
	agree => "rlock's belief equals Redis's truth after the next call",
	session_end => 'nothing is left in Redis after the session ends',);
for my $inv (qw(crash ended sqlstate memory agree session_end))
{
	ok(!$failures{$inv}, "mutated rounds: $what{$inv}")
	  or diag join("\n", @{ $failures{$inv} });
}
note "reproduce with RLOCK_FUZZ_SEED=$seed";

$fz->stop;
done_testing();
