# Copyright (c) 2026, rlock developers
#
# Plain roles (SPEC.md section 8, doc/privileges.md), with two login
# roles in two sessions and a Redis that has a password (sql/privileges.sql
# checks the single-session matrix): a plain role cannot release another
# role's session lock, nor force-release it; it sees the other session's
# holder identity (not a secret) but not an owner token, which superusers
# and pg_read_all_stats (pg_monitor) members see only as "<owner token>";
# no message or log line names a token; whoever knows the token releases
# the lock, also from another server (the token's field depends on the
# token alone); pg_monitor sees the URLs without their passwords,
# pg_read_all_stats and plain roles not at all.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use RlockTest;

my $secret = 'Pr1vS3cretPw';
my $token = 'alice-token-31337';
my $guess = 'alice-token-guess';
my $redis = RlockTest::Redis->new(password => $secret);
my $redlock_url = 'redis://:' . $secret . '@127.0.0.1:' . $redis->port . '/1';
my $node = RlockTest::new_node('priv', $redis,
	extra_conf => "rlock.redlock_urls = '$redlock_url'\n");
my $other_server = RlockTest::new_node('priv2', $redis);
$node->safe_psql('postgres', q{
	CREATE ROLE alice LOGIN;
	CREATE ROLE bob LOGIN;
	CREATE ROLE mon LOGIN IN ROLE pg_monitor;
	CREATE ROLE stat LOGIN IN ROLE pg_read_all_stats;
});
my %s;
for my $role (qw(alice bob mon stat))
{
	$s{$role} = $node->background_psql('postgres', on_error_stop => 0,
		extra_params => [ '-U', $role ]);
}
my $log_start = -s $node->logfile;

my ($out, $err, $state);

# ---- alice's locks: one of her session, one for an owner token ----

($out, $err) = RlockTest::run_sql($s{alice},
	"SELECT rlock_acquire('shared', '10 minutes'), rlock_acquire('handoff', '10 minutes', owner => '$token')");
is($err, '', 'alice takes a session lock and a lock for an owner token');
my $alice = RlockTest::holder_of($s{alice});
is($redis->cli('HGET', 'shared', $alice), '1', 'her session lock is in Redis');

# ---- bob, a plain role ----

($out, $err, $state) = RlockTest::run_sql($s{bob}, "SELECT rlock_release('shared')");
is("$out/$state", 'f/00000', "bob cannot release alice's session lock");
like($err, qr/WARNING:  lock "shared" is not held by this session/,
	'he is told he does not hold it');
($out, $err, $state) = RlockTest::run_sql($s{bob},
	"SELECT rlock_release('shared', owner => '$alice')");
is($state, '22023', "nor by naming her holder identity as an owner token");
($out, $err, $state) = RlockTest::run_sql($s{bob},
	"SELECT rlock_force_release('shared')");
is($state, '42501', 'nor by force (rlock_force_release is not granted to PUBLIC)');
($out, $err, $state) = RlockTest::run_sql($s{bob},
	"SELECT rlock_release('handoff', owner => '$guess')");
is("$out/$state", 'f/00000', 'a wrong owner token releases nothing');
unlike($err, qr/\Q$guess\E/, 'and the warning does not name the token given');
is($redis->cli('HGET', 'shared', $alice), '1', "alice's session lock is still hers in Redis");
is($redis->cli('EXISTS', 'handoff'), '1', 'and so is the lock of her token');

($out, $err) = RlockTest::run_sql($s{bob},
	"SELECT kind, holder, hold_count FROM rlock_status('shared')");
is("$out/$err", "exclusive|$alice|1/",
	"bob sees alice's holder identity in rlock_status (not a secret)");
($out, $err) = RlockTest::run_sql($s{bob},
	"SELECT holder FROM rlock_locks WHERE name = 'shared'");
is("$out/$err", "$alice/", 'and in rlock_locks');
($out, $err) = RlockTest::run_sql($s{bob},
	"SELECT kind, holder, hold_count FROM rlock_status('handoff')");
is("$out/$err", 'exclusive|<insufficient privilege>|1/',
	'but not even that an owner token holds the other lock');
($out, $err) = RlockTest::run_sql($s{bob},
	"SELECT count(*) FROM rlock_locks WHERE name = 'handoff'");
is("$out/$err", '0/', 'which rlock_locks does not list (it belongs to no session)');

# ---- pg_read_all_stats and pg_monitor members ----

for my $role (qw(stat mon))
{
	($out, $err) = RlockTest::run_sql($s{$role},
		"SELECT kind, holder, hold_count FROM rlock_status('handoff')");
	is("$out/$err", 'exclusive|<owner token>|1/',
		"$role (pg_read_all_stats) sees that an owner token holds it, not which");
	($out, $err) = RlockTest::run_sql($s{$role},
		"SELECT holder FROM rlock_status('shared')");
	is("$out/$err", "$alice/", "$role sees alice's holder identity");
	($out, $err, $state) = RlockTest::run_sql($s{$role},
		"SELECT rlock_force_release('shared')");
	is($state, '42501', "$role cannot force-release it");
}

($out, $err, $state) = RlockTest::run_sql($s{stat}, 'SHOW rlock.redis_url');
is($state, '42501', 'pg_read_all_stats does not see rlock.redis_url');
($out, $err, $state) = RlockTest::run_sql($s{bob}, 'SHOW rlock.redlock_urls');
is($state, '42501', 'a plain role does not see rlock.redlock_urls');
($out, $err) = RlockTest::run_sql($s{mon},
	"SELECT setting || ' ' || reset_val || ' ' || boot_val FROM pg_settings WHERE name = 'rlock.redis_url'");
like($out, qr/^redis:\/\/:\*+\@127\.0\.0\.1:\d+/, 'pg_monitor sees rlock.redis_url in pg_settings, masked');
unlike($out, qr/\Q$secret\E/, 'without its password');
($out, $err) = RlockTest::run_sql($s{mon}, 'SHOW rlock.redis_url');
unlike("$out/$err", qr/\Q$secret\E/, 'nor in SHOW');
($out, $err) = RlockTest::run_sql($s{mon},
	"SELECT setting || ' ' || reset_val || ' ' || boot_val FROM pg_settings WHERE name = 'rlock.redlock_urls'");
unlike("$out/$err", qr/\Q$secret\E/,
	'pg_monitor sees rlock.redlock_urls without its password (pg_settings)');
($out, $err) = RlockTest::run_sql($s{mon}, 'SHOW rlock.redlock_urls');
unlike("$out/$err", qr/\Q$secret\E/, 'nor in SHOW');

# ---- the hand-off: the token releases the lock, from another server ----

is($other_server->safe_psql('postgres',
		"SELECT rlock_release('handoff', owner => '$token')"),
	't', 'another server (another instance identity) releases it with the token');
is($redis->cli('EXISTS', 'handoff'), '0', 'and it is gone from Redis');

($out, $err) = RlockTest::run_sql($s{alice}, "SELECT rlock_release('shared')");
is("$out/$err", 't/', 'alice releases her session lock herself');

$_->quit for values %s;
# (the test node logs every statement, and PostgreSQL logs a failing one:
# the SQL text is the caller's, so only rlock's own entries are looked at)
my @entries = split /\n(?=\d{4}-\d\d-\d\d )/,
  slurp_file($node->logfile, $log_start);
my $messages = join "\n",
  grep { !/ LOG:  statement: | STATEMENT:  / } @entries;
like($messages, qr/WARNING:  lock "handoff" is not held by this owner token/,
	"the log has rlock's messages about owner tokens");
unlike($messages, qr/\Q$guess\E|\Q$token\E/, 'none of them names an owner token');
unlike($messages, qr/\Q$secret\E/, 'nor the password');

$node->stop;
$other_server->stop;
$redis->stop;
done_testing();
