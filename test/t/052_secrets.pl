# Copyright (c) 2026, rlock developers
#
# A secret goes only where it belongs (SPEC 8 and 10; issue 40, findings 7
# and 8):
#   - the password of rlock.redis_url, from rlock.redis_password_file or
#     from the URL, goes to that deployment only: a Redlock master
#     (rlock.redlock_urls) whose URL has no password is sent no AUTH at all
#     (seen on a fake master, which logs what arrives);
#   - a Redlock master's failures name rlock.redlock_urls and the master,
#     never rlock.redis_url: its own password rejected (WRONGPASS), or a
#     master that wants a password its URL does not give (NOAUTH, 28000);
#   - without shared_preload_libraries rlock cannot hide a password in a
#     URL (the postmaster logs the raw value on reload, SHOW shows the
#     placeholder setting to every role): a password in rlock.redis_url or
#     rlock.redlock_urls is refused there, never sent (28000, the HINT
#     naming rlock.redis_password_file and shared_preload_libraries), for
#     every role; rlock.redis_password_file works there.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use RlockTest;
use RlockTest::FakeRedis;

my $secret = 'S3cretOfRedisUrl';
my $main = RlockTest::Redis->new(password => $secret);

my $pwfile = PostgreSQL::Test::Utils::tempdir('pwfile') . '/redis.pw';
open my $fh, '>', $pwfile or die "$pwfile: $!";
print $fh "$secret\n";
close $fh;
chmod 0600, $pwfile or die "chmod $pwfile: $!";

# A fake Redlock master: a plain master that grants every lock (a script's
# answer: granted, 10 s) and tells a run_id of its own, so that it counts
# toward the majority; %answers override its answers.
sub fake_master
{
	my (%answers) = @_;
	my $info = "# Server\r\nredis_version:7.0.0\r\nrun_id:"
	  . ('5e' x 20) . "\r\n";
	return RlockTest::FakeRedis->new(
		INFO => '$' . length($info) . "\r\n$info\r\n",
		EVALSHA => "*2\r\n:1\r\n:10000\r\n",
		EVAL => "*2\r\n:1\r\n:10000\r\n",
		%answers);
}

# What arrived at a fake, as one string (command names and first words).
sub arrived { return join("\n", $_[0]->commands); }

# Run $sql in a new session of $node (as $role if given); returns (stdout,
# stderr, SQLSTATE).
sub in_new_session
{
	my ($node, $sql, $role) = @_;
	my $s = $node->background_psql('postgres', on_error_stop => 0,
		$role ? (extra_params => [ '-U', $role ]) : ());
	my @r = RlockTest::run_sql($s, $sql);
	$s->quit;
	return @r;
}

my ($out, $err, $state, $fake);

# ---- preloaded: rlock.redis_url's secret stays with its deployment ----

my $node = RlockTest::new_node('secrets', $main,
	url => $main->url(password => undef),
	extra_conf => "rlock.redis_password_file = '$pwfile'");
($out, $err) = in_new_session($node,
	"SELECT rlock_try_acquire('sec_main', '10s'), rlock_release('sec_main')");
is("$out/$err", 't|t/', 'rlock.redis_url works, its password from rlock.redis_password_file');

# the password file's secret is not sent to a Redlock master
$fake = fake_master();
RlockTest::set_gucs($node,
	'rlock.redlock_urls' => 'redis://127.0.0.1:' . $fake->port . '/0');
($out, $err, $state) = in_new_session($node,
	"SELECT rlock_redlock_try_acquire('sec_rl1', '10 seconds')");
is("$out/$state", 't/00000', 'a Redlock on a master without a password in its URL works');
like(arrived($fake), qr/^EVAL/m, '... the master was asked');
unlike(arrived($fake), qr/^AUTH/m,
	'... and sent no AUTH: rlock.redis_password_file is not its password');
unlike(arrived($fake), qr/\Q${\ uc $secret}\E/i, '... the secret did not arrive there');
$fake->stop;

# nor is the password of rlock.redis_url's URL
RlockTest::set_gucs($node, 'rlock.redis_url' => $main->url,
	'rlock.redis_password_file' => '');
$fake = fake_master();
RlockTest::set_gucs($node,
	'rlock.redlock_urls' => 'redis://127.0.0.1:' . $fake->port . '/0');
($out, $err, $state) = in_new_session($node,
	"SELECT rlock_try_acquire('sec_main', '10s'), rlock_release('sec_main'), rlock_redlock_try_acquire('sec_rl2', '10 seconds')");
is("$out/$state", 't|t|t/00000',
	'the password in rlock.redis_url: the lock and the Redlock work');
unlike(arrived($fake), qr/^AUTH/m, '... the Redlock master was sent no AUTH');
$fake->stop;
RlockTest::set_gucs($node, 'rlock.redis_url' => $main->url(password => undef),
	'rlock.redis_password_file' => $pwfile);

# a master's own password, rejected: the error names rlock.redlock_urls
$fake = fake_master(AUTH =>
	  "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
RlockTest::set_gucs($node,
	'rlock.redlock_urls' => 'redis://:masterPw9@127.0.0.1:' . $fake->port . '/0');
($out, $err, $state) = in_new_session($node,
	"SELECT rlock_redlock_try_acquire('sec_rl3', '10 seconds')");
is($state, '28P01', "a master's own password rejected: SQLSTATE 28P01");
like($err, qr/master 1 of rlock\.redlock_urls/, '... the error names the master of rlock.redlock_urls');
unlike($err, qr/rlock\.redis_url/, '... not rlock.redis_url');
unlike($err, qr/masterPw9|\Q$secret\E/, '... and shows no password');
like(arrived($fake), qr/^AUTH MASTERPW9$/m, '... its own password was what it was sent');
note $err;
$fake->stop;

# a master that wants a password its URL does not give: 28000, naming it
my $noauth = "-NOAUTH Authentication required.\r\n";
$fake = fake_master(map { $_ => $noauth }
	  qw(INFO CLIENT ROLE PING SELECT EVAL EVALSHA DEL WAIT));
RlockTest::set_gucs($node,
	'rlock.redlock_urls' => 'redis://127.0.0.1:' . $fake->port . '/0');
($out, $err, $state) = in_new_session($node,
	"SELECT rlock_redlock_try_acquire('sec_rl4', '10 seconds')");
is($state, '28000', 'a master that wants a password its URL lacks: SQLSTATE 28000');
like($err, qr/master 1 of rlock\.redlock_urls/, '... the error names the master of rlock.redlock_urls');
unlike($err, qr/rlock\.redis_url/, '... not rlock.redis_url');
unlike(arrived($fake), qr/^AUTH/m, '... and it was sent no AUTH (not the password file\'s)');
note $err;
$fake->stop;
RlockTest::set_gucs($node, 'rlock.redlock_urls' => '');
$node->stop;

# ---- not preloaded: a password in a URL is refused ----

my $plain = PostgreSQL::Test::Cluster->new('not_preloaded');
$plain->init;
# (each rlock setting named here, so that ALTER SYSTEM knows it before
# rlock is loaded)
$plain->append_conf('postgresql.conf',
	"rlock.redis_url = '" . $main->url . "'\n"
	  . "rlock.redis_password_file = ''\nrlock.redlock_urls = ''\n"
	  . "log_min_messages = 'debug1'\n");
$plain->start;
$plain->safe_psql('postgres', 'CREATE EXTENSION rlock; CREATE ROLE nobody LOGIN');

foreach my $role (undef, 'nobody')
{
	my $who = $role ? 'a plain role' : 'a superuser';
	my $s = $plain->background_psql('postgres', on_error_stop => 0,
		$role ? (extra_params => [ '-U', $role ]) : ());
	($out, $err, $state) = RlockTest::run_sql($s,
		"SELECT rlock_try_acquire('np_lock', '10 seconds')");
	is($state, '28000', "not preloaded, a password in rlock.redis_url: $who gets SQLSTATE 28000");
	like($err, qr/ERROR:  .*refuses the password in rlock\.redis_url.*not preloaded/,
		'... the error says why');
	like($err, qr/HINT:  .*rlock\.redis_password_file.*shared_preload_libraries/,
		'... the HINT names rlock.redis_password_file and shared_preload_libraries');
	unlike($err, qr/\Q$secret\E/, '... and shows no password');
	is($main->cli('EXISTS', 'np_lock'), '0', '... and no lock was taken');
	$s->quit;
}

# the password file instead: it works, and no role sees the secret
RlockTest::set_gucs($plain, 'rlock.redis_url' => $main->url(password => undef),
	'rlock.redis_password_file' => $pwfile);
($out, $err, $state) = in_new_session($plain,
	"SELECT rlock_try_acquire('np_lock', '10 seconds'), rlock_release('np_lock')",
	'nobody');
is("$out/$err", 't|t/', 'not preloaded, the password from rlock.redis_password_file works');
($out, $err) = in_new_session($plain, 'SHOW rlock.redis_url', 'nobody');
unlike("$out$err", qr/\Q$secret\E/, '... and SHOW shows a plain role no password');

# a password in rlock.redlock_urls is refused too, never sent
$fake = fake_master();
RlockTest::set_gucs($plain,
	'rlock.redlock_urls' => 'redis://:masterPw9@127.0.0.1:' . $fake->port . '/0');
($out, $err, $state) = in_new_session($plain,
	"SELECT rlock_redlock_try_acquire('np_rl', '10 seconds')");
is($state, '28000', 'not preloaded, a password in rlock.redlock_urls: SQLSTATE 28000');
like($err, qr/rlock\.redlock_urls/, '... the error names rlock.redlock_urls');
like($err, qr/HINT:  .*shared_preload_libraries/, '... the HINT says to preload rlock');
unlike($err, qr/masterPw9/, '... and shows no password');
unlike(arrived($fake), qr/^AUTH/m, '... the password was not sent');
$fake->stop;
$plain->stop;

done_testing();
