# Copyright (c) 2026, rlock developers
#
# unix:// URLs, the password file and idle connections (section 10 of the
# spec):
#   - unix://:password@/path/redis.sock[?db=N] works; a wrong password is
#     28P01; a socket nobody listens on is 08001; Redis restarted: the next
#     call reconnects;
#   - rlock.redis_password_file (mode 0600, owned by the server's OS user)
#     gives the password of a URL that has none; the password never shows
#     to a non-superuser (SHOW, pg_settings), in errors or in the log; a
#     file others may read (any S_IRWXO bit) is refused with an ERROR;
#   - rlock.connection_idle_timeout: each connection names itself
#     rlock:<server>:<backend pid> (CLIENT SETNAME); one unused for longer than the
#     timeout is closed at the next transaction end (or rlock call) and
#     reopened by the next rlock call, locks held all along.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use RlockTest;

my $secret = 'Un1xS0cketPw7';
my $redis = RlockTest::Redis->new(unix => 1, password => $secret);
my $sock = $redis->socket;
my $node = RlockTest::new_node('unix', $redis);    # rlock.redis_url = unix://:<secret>@<socket>

sub q1
{
	my ($s, $sql) = @_;
	my ($out, $err) = RlockTest::query_err($s, $sql);
	return $out;
}

sub session { return $node->background_psql('postgres', on_error_stop => 0); }

# Everything below needs the first rlock call to work: when it does not,
# stop this file (it has failed) instead of meeting a timeout at each step.
sub stop_here { return RlockTest::stop_file(@_); }

sub set_gucs { return RlockTest::set_gucs($node, @_); }

# Run $sql in a new session; returns (stdout, stderr, SQLSTATE).
sub in_new_session
{
	my ($sql) = @_;
	my $s = session();
	my @r = RlockTest::run_sql($s, $sql);
	$s->quit;
	return @r;
}

# Ids of the connections CLIENT LIST shows under a name.
sub conn_ids
{
	my ($name) = @_;
	my @ids = sort { $a <=> $b }
	  map { $_->{id} } grep { ($_->{name} // '') eq $name } $redis->clients;
	return @ids;
}

my ($out, $err, $state);

# ---- unix:// with the password in the URL ----

like($node->safe_psql('postgres', 'SHOW rlock.redis_url'), qr{^unix://},
	'rlock.redis_url is a unix:// URL');
my $s = session();
my $holder = q1($s, 'SELECT rlock_holder_id()');
($out, $err) = RlockTest::run_sql($s, 'SELECT rlock_ping() IS NOT NULL');
is("$out/$err", 't/', 'rlock_ping answers over the Unix socket')
  or stop_here('rlock does not reach Redis over unix://');
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_acquire('ux_basic', '1 minute')");
is("$out/$err", '/', 'rlock_acquire over unix://');
is($redis->cli('HGET', 'ux_basic', $holder), '1', 'the lock is in Redis');
is(q1($s, "SELECT rlock_release('ux_basic')"), 't', 'rlock_release');
is($redis->cli('EXISTS', 'ux_basic'), '0', 'and it is gone');
$s->quit;

# a non-superuser who may read all settings sees the URL masked
$node->safe_psql('postgres',
	'CREATE ROLE reader LOGIN; GRANT pg_read_all_settings TO reader; CREATE ROLE nobody LOGIN');
my $settings = $node->safe_psql('postgres',
	"SELECT setting || ' ' || reset_val || ' ' || boot_val FROM pg_settings WHERE name = 'rlock.redis_url'",
	extra_params => [ '-U', 'reader' ]);
unlike($settings, qr/$secret/, 'pg_settings does not show the password of a unix:// URL');
unlike($node->safe_psql('postgres', 'SHOW rlock.redis_url', extra_params => [ '-U', 'reader' ]),
	qr/$secret/, 'nor does SHOW');

# ?db=N
set_gucs('rlock.redis_url' => $redis->url(db => 2));
$s = session();
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_try_acquire('ux_db', '1 minute')");
is("$out/$err", 't/', 'unix://...?db=2 takes a lock');
is($redis->cli('-n', '2', 'EXISTS', 'ux_db'), '1', 'in Redis database 2');
is($redis->cli('-n', '0', 'EXISTS', 'ux_db'), '0', 'not in database 0');
$s->quit;

# wrong password
set_gucs('rlock.redis_url' => $redis->url(password => 'wr0ngUnixPw'));
($out, $err, $state) = in_new_session("SELECT rlock_try_acquire('ux_auth', '10s')");
is($state, '28P01', 'a wrong password over the socket: SQLSTATE 28P01');
like($err, qr/rejected the credentials of rlock\.redis_url for lock "ux_auth"/,
	'the error says the credentials were rejected');
unlike($err, qr/wr0ngUnixPw/, 'without showing the password');

# nobody listening on the socket's path
set_gucs('rlock.redis_url' => "unix://:$secret\@$sock.none");
($out, $err, $state) = in_new_session("SELECT rlock_try_acquire('ux_none', '10s')");
is($state, '08001', 'a socket nobody listens on: SQLSTATE 08001');
like($err, qr/ERROR:  could not connect to Redis at \Q$sock.none\E for lock "ux_none"/,
	'the error names the socket\'s path and the lock');
unlike($err, qr/$secret/, 'without showing the password');

# Redis restarted: the next call reconnects
set_gucs('rlock.redis_url' => $redis->url);
$s = session();
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_try_acquire('ux_r', '10s'), rlock_release('ux_r')");
is("$out/$err", 't|t/', 'the URL with the right password works again');
$redis->stop;
($out, $err, $state) = RlockTest::run_sql($s, "SELECT rlock_try_acquire('ux_down', '10s')");
like($state, qr/^080(01|06)$/, "Redis stopped: SQLSTATE $state");
like($err, qr/Redis at \Q$sock\E for lock "ux_down"/, 'the error names the socket and the lock');
$redis->start;
($out, $err) = RlockTest::run_sql($s, "SELECT rlock_try_acquire('ux_down', '10s'), rlock_release('ux_down')");
is("$out/$err", 't|t/', 'Redis back: the next call reconnects by itself');
$s->quit;

# ---- the password file ----

my $pwfile = PostgreSQL::Test::Utils::tempdir('pwfile') . '/redis.pw';
sub write_pwfile
{
	my ($content, $mode) = @_;
	open my $fh, '>', $pwfile or die "$pwfile: $!";
	print $fh $content;
	close $fh;
	chmod $mode, $pwfile or die "chmod $pwfile: $!";
	return;
}

# the first line is the password; the file is the server's OS user's (this
# test runs as that user), mode 0600
write_pwfile("$secret\nnot the password\n", 0600);
is((stat $pwfile)[4], $>, 'the password file is owned by the OS user running the server');
set_gucs('rlock.redis_url' => $redis->url(password => undef),
	'rlock.redis_password_file' => $pwfile);
unlike($node->safe_psql('postgres', 'SHOW rlock.redis_url'), qr/@/,
	'the URL has no password now');
($out, $err) = in_new_session("SELECT rlock_try_acquire('ux_file', '10s'), rlock_release('ux_file')");
is("$out/$err", 't|t/', 'the password comes from rlock.redis_password_file (mode 0600)');

foreach my $role ('reader', 'nobody')
{
	my ($rc, $o, $e) = $node->psql('postgres',
		"SELECT name, setting, reset_val, boot_val FROM pg_settings WHERE name LIKE 'rlock.%'",
		extra_params => [ '-U', $role ]);
	unlike("$o$e", qr/$secret/, "pg_settings shows $role no password");
	($rc, $o, $e) = $node->psql('postgres', 'SHOW rlock.redis_url',
		extra_params => [ '-U', $role ]);
	unlike("$o$e", qr/$secret/, "SHOW rlock.redis_url shows $role no password");
	($rc, $o, $e) = $node->psql('postgres', 'SHOW rlock.redis_password_file',
		extra_params => [ '-U', $role ]);
	unlike("$o$e", qr/$secret/, "SHOW rlock.redis_password_file shows $role no password");
}

# a password in the URL wins over the file
write_pwfile("wr0ngFilePw\n", 0600);
set_gucs('rlock.redis_url' => $redis->url);
($out, $err) = in_new_session("SELECT rlock_try_acquire('ux_file', '10s'), rlock_release('ux_file')");
is("$out/$err", 't|t/', 'the URL\'s own password is used, not the file\'s');
set_gucs('rlock.redis_url' => $redis->url(password => undef));
($out, $err, $state) = in_new_session("SELECT rlock_try_acquire('ux_file', '10s')");
is($state, '28P01', 'a wrong password in the file: SQLSTATE 28P01');
unlike($err, qr/wr0ngFilePw/, 'without showing it');

# others may read, write or search it: refused
foreach my $mode (0604, 0602, 0601)
{
	write_pwfile("$secret\n", $mode);
	($out, $err, $state) = in_new_session("SELECT rlock_try_acquire('ux_perm', '10s')");
	my $m = sprintf('%04o', $mode);
	isnt($state, '00000', "a password file with mode $m is refused");
	like($err, qr/ERROR:  .*the file of rlock\.redis_password_file is accessible to other users/,
		"mode $m: an ERROR about the password file");
	unlike($err, qr/$secret/, "mode $m: without showing the password");
	# (the setting is hidden from plain roles, whose calls connect too)
	my ($rc, $o, $e) = $node->psql('postgres',
		"SELECT rlock_try_acquire('ux_perm', '10s')",
		extra_params => [ '-U', 'nobody' ]);
	like($e, qr/ERROR:  .*rlock\.redis_password_file/,
		"mode $m: a plain role's call fails too, naming the setting");
	unlike($e, qr/\Q$pwfile\E|\Q$secret\E/,
		"mode $m: but not the file's path (nor the password)");
	note "mode $m: $err";
}
is($redis->cli('EXISTS', 'ux_perm'), '0', 'no lock was taken meanwhile');
write_pwfile("$secret\n", 0600);
($out, $err) = in_new_session("SELECT rlock_try_acquire('ux_perm', '10s'), rlock_release('ux_perm')");
is("$out/$err", 't|t/', 'mode 0600 again: accepted');

# ---- idle connections ----

$s = session();
is(q1($s, 'SHOW rlock.connection_idle_timeout'), '1min',
	'rlock.connection_idle_timeout is 60 s by default');
my $pid = q1($s, 'SELECT pg_backend_pid()');
$holder = q1($s, 'SELECT rlock_holder_id()');
($out, $err) = RlockTest::run_sql($s, "SET rlock.connection_idle_timeout = '1s'");
is($err, '', 'a user sets rlock.connection_idle_timeout');
is(q1($s, "SELECT rlock_acquire('ux_idle', '10 minutes')"), '', 'the session takes a lock');
my @ids = conn_ids("rlock:unix:$pid");
cmp_ok(scalar(@ids), '>=', 1, "its connection shows in CLIENT LIST as rlock:unix:$pid");

# Each SELECT 1 ends a transaction; the first one after more than 1 s of
# not using the connection closes it.
my $gone = RlockTest::wait_until(sub {
		q1($s, 'SELECT 1');
		my @open = conn_ids("rlock:unix:$pid");
		return @open == 0;
	}, 60);
ok($gone, 'after more than 1 s unused, the connection is closed at a transaction end');
is($redis->cli('HGET', 'ux_idle', $holder), '1', 'the lock is still held in Redis');
is(q1($s, "SELECT rlock_try_acquire('ux_idle2', '10 minutes')"), 't',
	'the next rlock call opens a connection again and works');
my @ids2 = conn_ids("rlock:unix:$pid");
cmp_ok(scalar(@ids2), '>=', 1, "a connection named rlock:unix:$pid is back");
ok(!(grep { my $i = $_; grep { $_ eq $i } @ids } @ids2), 'a new one (not the closed one)');
is(q1($s, "SELECT rlock_release('ux_idle'), rlock_release('ux_idle2')"), 't|t',
	'the lock taken before the close is released fine');
is($redis->cli('EXISTS', 'ux_idle'), '0', 'and is gone from Redis');

# Inside a transaction (no transaction end), the next rlock call after more
# than the timeout closes the idle connection and uses a new one.
q1($s, 'BEGIN');
is(q1($s, "SELECT rlock_xact_acquire('ux_idle_x', '10 minutes')"), '',
	'a transaction takes a lock');
@ids = conn_ids("rlock:unix:$pid");
sleep(2);    # (at least 2 s: more than the timeout, however slow)
is(q1($s, "SELECT rlock_is_locked('ux_idle_x')"), 't',
	'an rlock call after 2 s unused works');
@ids2 = conn_ids("rlock:unix:$pid");
cmp_ok(scalar(@ids2), '>=', 1, "over a connection named rlock:unix:$pid");
ok(!(grep { my $i = $_; grep { $_ eq $i } @ids } @ids2),
	'a new one: the idle one was closed at the call');
($out, $err) = RlockTest::query_err($s, 'COMMIT');
is($err, '', 'the transaction commits (its lock verified)');
is($redis->cli('EXISTS', 'ux_idle_x'), '0', 'and its lock is released');

# rlock.connection_idle_timeout = 0: never closed
q1($s, "SET rlock.connection_idle_timeout = 0");
q1($s, "SELECT rlock_ping()");
@ids = conn_ids("rlock:unix:$pid");
sleep(2);
q1($s, 'SELECT 1');
q1($s, 'SELECT 1');
is_deeply([ conn_ids("rlock:unix:$pid") ], \@ids,
	'with connection_idle_timeout = 0 the connection stays open');
$s->quit;

# (log_statement = all logs the test's own ALTER SYSTEM statements: not
# rlock's doing, so those lines are left out)
my @logged = grep { !/LOG:  statement: / } split /\n/, slurp_file($node->logfile);
ok(!(grep { /$secret|wr0ngUnixPw|wr0ngFilePw/ } @logged),
	'the server log never shows a password (outside the test\'s own statements)');

done_testing();
