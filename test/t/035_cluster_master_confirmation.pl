
# Copyright (c) 2026, rlock developers
#
# In a Redis Cluster, the check before COMMIT confirms with the other
# masters that the node that answered still owns the lock's slot (SPEC 6,
# "failover between servers"; issue 21, item 12): a master paused while its
# replica was promoted believes, once resumed, that it still owns its
# slots, so its own word is not enough.
#
#   - a COMMIT asks every other master about the lock's slot (EXISTS of
#     its key: each answers MOVED to the owner it knows), not the owner;
#   - with the other masters paused (SIGSTOP), nobody can confirm: COMMIT
#     fails closed with the lost-lock ERROR; once they are back it commits.
#
# (The shape itself, a resumed old master still taking writes, lasts only
# until the cluster's gossip reaches it: this file tests the check without
# timing; 033 runs the Sentinel shape, where it lasts.)

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use RlockTest;

# processes this file stops (SIGSTOP): let them go on whatever happens, or
# the clean-up at exit would wait for them
my @paused;
END { kill 'CONT', @paused if @paused; }

my $c = RlockTest::Cluster->new(masters => 3, replicas => 0);
my $node = RlockTest::new_node('cl', undef,
	url => $c->url,
	watchdog_timeout => '30s');
my $s = $node->background_psql('postgres', on_error_stop => 0);
my ($out, $err, $state);

my $owner = $c->master_of('conf1');
my @others = grep { $_->port != $owner->port } $c->masters;
is(scalar(@others), 2, 'two other masters');

# The last command the session's connection to node $n ran (CLIENT LIST
# "cmd=": set for a command a redirection refused too).
my ($pid) = RlockTest::query_err($s, 'SELECT pg_backend_pid()');
sub last_cmd
{
	my ($n) = @_;
	my $list = $n->cli('CLIENT', 'LIST') // '';
	my ($line) = grep { /\bname=rlock:cl:$pid\b/ } split /\n/, $list;
	return defined $line && $line =~ /\bcmd=(\S+)/ ? $1 : '(none)';
}

($out, $err, $state) = RlockTest::run_sql($s,
	"BEGIN; SELECT rlock_xact_try_acquire('conf1', '30 seconds'); COMMIT");
is("$out/$state", 't/00000', 'a transaction lock on its owner commits');
foreach my $o (@others)
{
	is(last_cmd($o), 'exists',
		'the master at ' . $o->where . ' was asked about its slot');
}
isnt(last_cmd($owner), 'exists', 'the owner itself was not asked');

# fail closed: the other masters cannot answer
($out, $err, $state) = RlockTest::run_sql($s,
	"BEGIN; SELECT rlock_xact_try_acquire('conf1', '30 seconds')");
is("$out/$err", 't/', 'acquired again');
my @pids = map { $_->pid } @others;
push @paused, @pids;
kill 'STOP', @pids;
($out, $err, $state) = RlockTest::run_sql($s, 'COMMIT');
kill 'CONT', @pids;
is($state, '40000', 'with the other masters paused, COMMIT fails (40000)');
like($err, qr/cannot commit: lock "conf1" held by this transaction was lost/,
	'... with the lost-lock ERROR');
like($err, qr/No other master of the cluster confirmed that 127\.0\.0\.1:/,
	'... saying that nobody confirmed the owner');
is($owner->cli('EXISTS', 'conf1'), '0', 'nothing is left in Redis');

my $committed = RlockTest::wait_until(
	sub {
		my ($o, undef, $st) = RlockTest::run_sql($s,
			"BEGIN; SELECT rlock_xact_try_acquire('conf1', '30 seconds'); COMMIT");
		return ($o // '') eq 't' && ($st // '') eq '00000';
	},
	60);
ok($committed, 'once they are back, it commits again');

$s->quit;
$node->stop;
done_testing();
