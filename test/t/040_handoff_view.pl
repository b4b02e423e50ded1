# Copyright (c) 2026, rlock developers
#
# rlock_locks never shows two holders of one exclusive lock, not even for
# the moment of a hand-off: once a release to zero is sent, Redis may give
# the lock to a waiter (whose entry then shows it) before the releaser
# hears back, so the releaser's entry is no longer shown from the moment it
# sends (issue 21, item 15).  Four sessions hand one lock around while a
# probe reads the view continuously and records every moment it shows more
# than one holder.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use RlockTest;

my $redis = RlockTest::Redis->new;
my $node = RlockTest::new_node('handoff', $redis, watchdog_timeout => '10s');
$node->safe_psql('postgres', 'CREATE TABLE seen (n int, at timestamptz DEFAULT clock_timestamp())');

my $work = $node->basedir . '/handoff.sql';
open(my $fh, '>', $work) or die "$work: $!";
print $fh "SELECT rlock_acquire('handoff');\nSELECT rlock_release('handoff');\n";
close($fh);
my $probe = $node->basedir . '/probe.sql';
open($fh, '>', $probe) or die "$probe: $!";
print $fh "INSERT INTO seen (n) SELECT c FROM (SELECT count(*) AS c FROM rlock_locks WHERE name = 'handoff' AND state = 'held') x WHERE c > 1;\n";
close($fh);

my @pgbench = ('pgbench', '-n', '-h', $node->host, '-p', $node->port);
my ($o1, $e1, $o2, $e2) = ('', '', '', '');
my $h1 = IPC::Run::start([ @pgbench, '-c', '4', '-T', '6', '-f', $work, 'postgres' ],
	'>', \$o1, '2>', \$e1);
my $h2 = IPC::Run::start([ @pgbench, '-c', '1', '-T', '6', '-f', $probe, 'postgres' ],
	'>', \$o2, '2>', \$e2);
ok($h1->finish, 'four sessions hand the lock around for 6 s') or diag($e1);
ok($h2->finish, 'while a probe reads rlock_locks') or diag($e2);
my ($handoffs) = $o1 =~ /number of transactions actually processed: (\d+)/;
my ($probes) = $o2 =~ /number of transactions actually processed: (\d+)/;
note "hand-offs: " . ($handoffs // '?') . ", probes: " . ($probes // '?');
cmp_ok($handoffs // 0, '>', 100, 'many hand-offs');
cmp_ok($probes // 0, '>', 100, 'many probes');
is($node->safe_psql('postgres', 'SELECT count(*) FROM seen'), '0',
	'rlock_locks never showed two holders of the exclusive lock');
is($node->safe_psql('postgres', "SELECT count(*) FROM rlock_locks WHERE name = 'handoff'"),
	'0', 'and nothing is left held');
done_testing();
