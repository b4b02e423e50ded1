
# Copyright (c) 2026, rlock developers

=pod

=head1 NAME

RlockTest - helpers for rlock's TAP tests: a private Redis server and
PostgreSQL nodes that preload rlock and point at it

=head1 SYNOPSIS

  use RlockTest;

  my $redis = RlockTest::Redis->new;          # started, answers PING
  my $node  = RlockTest::new_node('main', $redis, dbs => ['postgres', 'db2']);

  $redis->cli('HGETALL', 'mylock');           # output of redis-cli, chomped
  $redis->stop;                               # SHUTDOWN NOSAVE, waits for exit
  $redis->start;                              # same port again

  # TLS (certificates made with openssl), a Unix socket
  my $tls = RlockTest::Redis->new(tls => 1);  # url: rediss://127.0.0.1:<port>/0
  $tls->ca_file; $tls->client_cert_file;      # ... and the other files
  $tls->restart(server_cert => 'expired');
  my $sock = RlockTest::Redis->new(unix => 1, password => 'pw');
  $sock->url;                                 # unix://:pw@/.../redis.sock

  # RLOCK_SERVER=valkey in the environment: valkey-server and valkey-cli

  # a link between PostgreSQL and Redis that can fail
  my $proxy = RlockTest::Proxy->new($redis);
  my $lnode = RlockTest::new_node('link', $proxy);   # rlock.redis_url = $proxy->url
  $proxy->stall;                              # a silent partition
  $proxy->resume;
  $proxy->cut;                                # every connection closed

  # a master, 2 replicas and 3 sentinels (see RlockTest::Sentinel)
  my $s = RlockTest::Sentinel->new(replicas => 2, sentinels => 3);
  $s->url;              # redis-sentinel://127.0.0.1:p1,...:p3/0#rlockmaster
  my $old = $s->master->port;
  $s->kill_master;
  my $secs = $s->wait_failover($old, 30);

Every Redis, every proxy and every sentinel started here is stopped at END.

=cut

package RlockTest;

use strict;
use warnings;

use Carp;
use File::Path qw(make_path);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);

our @ALL_REDIS;
our @ALL_PROXIES;
our @ALL_SENTINELS;

=pod

=head1 FUNCTIONS

=over

=item RlockTest::new_node($name, $redis, %opts)

Create (initdb) and start a PostgreSQL::Test::Cluster node with
shared_preload_libraries = 'rlock', rlock.redis_url = $opts{url}, or else
$redis->url ($redis may be any object with a url method: an
RlockTest::Redis, an RlockTest::Proxy in front of one), and
rlock.watchdog_timeout = $opts{watchdog_timeout} (default '2s').  Creates
each database of $opts{dbs} (default ['postgres']) that does not exist yet
and runs CREATE EXTENSION rlock in it.  $opts{extra_conf} is appended to
postgresql.conf.

=cut

sub new_node
{
	my ($name, $redis, %opts) = @_;
	my $dbs = $opts{dbs} // ['postgres'];
	my $watchdog = $opts{watchdog_timeout} // '2s';
	my $url = $opts{url} // $redis->url;

	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	my $conf = "shared_preload_libraries = 'rlock'\n"
	  . "rlock.redis_url = '$url'\n"
	  . "rlock.watchdog_timeout = '$watchdog'\n"
	  . "log_min_messages = 'debug1'\n"
	  . "log_line_prefix = '%m [%p] %q%a '\n";
	$conf .= $opts{extra_conf} . "\n" if defined $opts{extra_conf};
	$node->append_conf('postgresql.conf', $conf);
	$node->start;

	foreach my $db (@$dbs)
	{
		if ($db ne 'postgres')
		{
			$node->safe_psql('postgres', "CREATE DATABASE \"$db\"");
		}
		$node->safe_psql($db, 'CREATE EXTENSION rlock');
	}
	return $node;
}

=pod

=item RlockTest::holder_of($node, $psql_session)

Shorthand: rlock_holder_id() of a background psql session.

=cut

sub holder_of
{
	my ($session) = @_;
	my $h = $session->query_safe('SELECT rlock_holder_id()');
	chomp $h;
	return $h;
}

=pod

=item RlockTest::query_err($session, $sql)

Run $sql in a background psql session (created with on_error_stop => 0) and
return (stdout, stderr) of that query alone: the session's accumulated
stderr is cleared first, and the banner lines are removed.

=cut

sub query_err
{
	my ($session, $sql) = @_;
	$session->{stderr} = '';
	my ($out) = $session->query($sql);
	my $err = $session->{stderr};
	$session->{stderr} = '';
	return ($out, $err);
}

=pod

=item RlockTest::run_sql($session, $sql)

Run $sql in a background psql session (on_error_stop => 0); returns
(stdout, stderr, SQLSTATE of the last statement) of that query alone.

=cut

sub run_sql
{
	my ($sess, $sql) = @_;
	my ($out, $err) =
	  RlockTest::query_err($sess, "$sql\n;\n\\echo sqlstate=:SQLSTATE");
	my ($state) = $out =~ /sqlstate=(\w+)/;
	$out =~ s/\n?sqlstate=\w+//;
	return ($out, $err, $state);
}

=pod

=item RlockTest::wait_until(\&cond, $timeout_s, $what)

Poll cond() every 10 ms until it returns true or $timeout_s passes; returns
whether it became true.

=cut

sub wait_until
{
	my ($cond, $timeout_s) = @_;
	$timeout_s //= $PostgreSQL::Test::Utils::timeout_default;
	my $deadline = time() + $timeout_s;
	while (time() < $deadline)
	{
		return 1 if $cond->();
		usleep(10_000);
	}
	return $cond->() ? 1 : 0;
}

=pod

=item RlockTest::wait_for_rlock_waiters($node, $db, $n, $like)

Wait until $n backends are waiting in rlock (wait_event_type 'Extension'),
optionally only those whose query is LIKE $like.  Dies on timeout.

=cut

sub wait_for_rlock_waiters
{
	my ($node, $db, $n, $like) = @_;
	my $cond = "wait_event_type = 'Extension' AND backend_type = 'client backend'";
	if (defined $like)
	{
		$like =~ s/'/''/g;
		$cond .= " AND query LIKE '$like'";
	}
	$node->poll_query_until($db,
		"SELECT count(*) >= $n FROM pg_stat_activity WHERE $cond")
	  or croak "timed out waiting for $n rlock waiter(s) on " . $node->name;
	return;
}

=pod

=item RlockTest::set_gucs($node, name => value, ...)

ALTER SYSTEM SET each setting, reload, and wait until the postmaster has
read the files again (pg_conf_load_time of a new session is the
postmaster's): new sessions have the new values then.  (Not by comparing
the values: rlock.redis_url shows with its password masked.)

=cut

sub set_gucs
{
	my ($node, %g) = @_;
	my $before = $node->safe_psql('postgres', 'SELECT pg_conf_load_time()');
	foreach my $k (sort keys %g)
	{
		$node->safe_psql('postgres', "ALTER SYSTEM SET $k = '$g{$k}'");
	}
	$node->reload;
	$node->poll_query_until('postgres',
		"SELECT pg_conf_load_time() > '$before'::timestamptz")
	  or die 'the server did not reload its configuration';
	return;
}

=pod

=item RlockTest::stop_file($why)

End this test file here (done_testing), saying why: for files whose later
steps all need an earlier one to have worked, instead of meeting a timeout
at each of them.

=cut

sub stop_file
{
	my ($why) = @_;
	diag("$why: the rest of this file is not run");
	done_testing();
	exit;
}

=pod

=item RlockTest::redis_version()

The version of redis-server as a number, major * 10000 + minor * 100 +
patch: 60016 for 6.0.16.  Tests compare it with what a Redis version
added (ACL channel rules in 6.2, enable-debug-command in 7.0).

=cut

my $redis_version;

sub redis_version
{
	if (!defined $redis_version)
	{
		my $server = $RlockTest::Redis::SERVER // 'redis-server';
		my $v = `$server --version`;
		$v =~ /v=(\d+)\.(\d+)\.(\d+)/
		  or BAIL_OUT("cannot tell the version of redis-server from: $v");
		$redis_version = $1 * 10000 + $2 * 100 + $3;
	}
	return $redis_version;
}

=pod

=back

=cut

# The pid in a server's pidfile, or undef (no file, or not a pid).
sub read_pidfile
{
	my ($f) = @_;
	open my $fh, '<', $f or return undef;
	my $pid = <$fh>;
	close $fh;
	return undef unless defined $pid;
	chomp $pid;
	return $pid =~ /^\d+$/ ? $pid : undef;
}

#
# A private redis-server (or valkey-server).
#
package RlockTest::Redis;

use strict;
use warnings;

use Carp;
use File::Path qw(make_path);
use File::Spec;
use IO::Socket::INET;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);

# The server the tests run: RLOCK_SERVER=redis (default) or valkey
# (test/run passes it on).  Valkey's valkey-cli is used with valkey-server
# when it is installed; redis-cli speaks to both.
our ($SERVER, $CLI);
{
	my $kind = $ENV{RLOCK_SERVER} // '';
	$kind = 'redis' if $kind eq '';
	if ($kind eq 'redis')
	{
		($SERVER, $CLI) = ('redis-server', 'redis-cli');
	}
	elsif ($kind eq 'valkey')
	{
		$SERVER = 'valkey-server';
		$CLI = _in_path('valkey-cli') ? 'valkey-cli' : 'redis-cli';
	}
	else
	{
		die "RLOCK_SERVER must be \"redis\" or \"valkey\", not \"$kind\"\n";
	}
}

sub _in_path
{
	my ($prog) = @_;
	foreach my $d (split /:/, $ENV{PATH} // '')
	{
		return 1 if $d ne '' && -x "$d/$prog";
	}
	return 0;
}

# Whether the cli has --insecure (redis-cli 6.2 and later, valkey-cli).
our $cli_has_insecure;    # (tests may set it to 0 to play an older cli)

sub _cli_has_insecure
{
	if (!defined $cli_has_insecure)
	{
		my ($out, $err) = ('', '');
		IPC::Run::run([ $CLI, '--help' ], '<', \undef, '>', \$out, '2>', \$err);
		$cli_has_insecure = ("$out$err" =~ /--insecure\b/) ? 1 : 0;
	}
	return $cli_has_insecure;
}

=pod

=head1 RlockTest::Redis

=over

=item RlockTest::Redis->new(%opts)

Pick a free loopback port, make a temporary directory and start redis-server
there, daemonized with a pidfile, no persistence.  Waits for PING.
With RLOCK_SERVER=valkey in the environment it is valkey-server (and
valkey-cli); C<RlockTest::Redis::server_program> and C<cli_program> name
them.

Options:

=over

=item args => [...]

more server arguments (e.g. ['--maxmemory', '1mb']).

=item password => 'x'

start with --requirepass; url and cli use it.

=item tls => 1

TLS only: certificates are made with openssl in the Redis dir (see
L</Certificates>), and the server listens with C<port 0> (no plain TCP)
and C<tls-port> on the picked port, with tls-cert-file, tls-key-file,
tls-ca-cert-file and tls-auth-clients.  url is rediss://, cli speaks TLS
(with the CA, the client certificate and key).

=item tls_auth_clients => 'yes' | 'no' | 'optional'

tls-auth-clients (default 'yes': a client without a certificate of the CA
is refused).

=item server_cert => 'server' | 'expired'

the certificate the server presents: the valid one (default) or the
expired one (same key, same CA, names).  Can be changed at start/restart.

=item url_host => 'localhost'

the host url puts in the URL (default 127.0.0.1; the server certificate is
valid for both).

=item unix => 1

a Unix socket only (C<port 0>): C<unixsocket> (see socket) with
C<unixsocketperm 777>.  url is unix://[:password@]<socket>, cli uses -s.

=back

=cut

sub new
{
	my ($class, %opts) = @_;
	croak 'RlockTest::Redis: tls and unix exclude each other'
	  if $opts{tls} && $opts{unix};
	my $self = bless {
		port => $opts{unix} ? undef : PostgreSQL::Test::Cluster::get_free_port(),
		# absolute: the server chdirs to it, the certificates' paths must
		# hold all the same
		dir => File::Spec->rel2abs(PostgreSQL::Test::Utils::tempdir('redis')),
		args => $opts{args} // [],
		password => $opts{password},
		tls => $opts{tls} ? 1 : 0,
		tls_auth_clients => $opts{tls_auth_clients} // 'yes',
		server_cert => $opts{server_cert} // 'server',
		url_host => $opts{url_host} // '127.0.0.1',
		unix => $opts{unix} ? 1 : 0,
		running => 0,
	}, $class;
	croak "RlockTest::Redis: tls_auth_clients must be yes, no or optional"
	  unless $self->{tls_auth_clients} =~ /^(yes|no|optional)$/;
	if ($self->{unix})
	{
		# sun_path holds 108 bytes: fall back to a short directory
		my $sock = "$self->{dir}/redis.sock";
		$sock = PostgreSQL::Test::Utils::tempdir_short() . '/redis.sock'
		  if length($sock) > 100;
		$self->{socket} = $sock;
	}
	$self->_make_certs if $self->{tls};
	push @RlockTest::ALL_REDIS, $self;
	$self->start;
	return $self;
}

sub port { return $_[0]->{port}; }
sub dir { return $_[0]->{dir}; }
sub password { return $_[0]->{password}; }
sub tls { return $_[0]->{tls}; }
sub unix { return $_[0]->{unix}; }

=pod

=item RlockTest::Redis::debug_command_args()

The redis-server arguments that allow DEBUG: none before Redis 7.0, where
it is always allowed.

=cut

sub debug_command_args
{
	return RlockTest::redis_version() >= 70000
	  ? ('--enable-debug-command', 'yes')
	  : ();
}

=pod

=item RlockTest::Redis::server_program, RlockTest::Redis::cli_program

The server and cli programs in use (redis-server/redis-cli, or
valkey-server/valkey-cli with RLOCK_SERVER=valkey).

=cut

sub server_program { return $SERVER; }
sub cli_program { return $CLI; }

=pod

=item $redis->port

The port the server listens on: its TLS port with tls (there is no plain
one then), undef with unix.

=item $redis->socket

The Unix socket's path (unix only).

=cut

sub socket { return $_[0]->{socket}; }

=pod

=item $redis->url(%opts)

redis://127.0.0.1:<port>/0 (with the password if one was given to new);
rediss://127.0.0.1:<port>/0 with tls; unix://<socket> with unix
(unix://:<password>@<socket> with a password).  Options: host => name
(TCP/TLS; default url_host of new, or 127.0.0.1), db => N (/N, or ?db=N
for unix, which otherwise has none), password => 'x' to put another one in
the URL, or password => undef for none.

=cut

sub url
{
	my ($self, %o) = @_;
	my $pw = exists $o{password} ? $o{password} : $self->{password};
	my $auth = defined $pw ? ":$pw@" : '';
	if ($self->{unix})
	{
		my $u = "unix://$auth$self->{socket}";
		$u .= "?db=$o{db}" if defined $o{db};
		return $u;
	}
	my $scheme = $self->{tls} ? 'rediss' : 'redis';
	my $host = $o{host} // $self->{url_host};
	my $db = $o{db} // 0;
	return "$scheme://$auth$host:$self->{port}/$db";
}

=pod

=item Certificates (tls)

Made once by new in $redis->tls_dir with openssl (OpenSSL 1.1.1 and 3.x):
a CA; a server certificate and key signed by it, CN localhost, SAN
DNS:localhost and IP:127.0.0.1, valid 10 years; a client certificate and
key signed by it; a second CA that signed nothing (wrong_ca_file); and an
expired server certificate for the same key and names, valid for one day
in January 2020 (made with openssl ca -startdate/-enddate).  Accessors
return absolute paths: tls_dir, ca_file, ca_key_file, server_cert_file,
server_key_file, expired_cert_file, client_cert_file, client_key_file,
wrong_ca_file.  The files are readable by the test's user only.

=cut

sub tls_dir { return "$_[0]->{dir}/tls"; }
sub ca_file { return $_[0]->tls_dir . '/ca.crt'; }
sub ca_key_file { return $_[0]->tls_dir . '/ca.key'; }
sub server_cert_file { return $_[0]->tls_dir . '/server.crt'; }
sub server_key_file { return $_[0]->tls_dir . '/server.key'; }
sub expired_cert_file { return $_[0]->tls_dir . '/expired.crt'; }
sub client_cert_file { return $_[0]->tls_dir . '/client.crt'; }
sub client_key_file { return $_[0]->tls_dir . '/client.key'; }
sub wrong_ca_file { return $_[0]->tls_dir . '/wrong_ca.crt'; }

sub _openssl
{
	my @args = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'openssl', @args ], '<', \undef, '>', \$out, '2>', \$err)
	  or BAIL_OUT("openssl @args failed: $err");
	return;
}

sub _make_certs
{
	my ($self) = @_;
	my $d = $self->tls_dir;
	make_path("$d/newcerts");
	my $cnf = "$d/openssl.cnf";
	PostgreSQL::Test::Utils::append_to_file($cnf, <<"CNF");
# written by RlockTest::Redis: test certificates only
[ req ]
distinguished_name = req_dn
prompt = no
[ req_dn ]
CN = unused
[ v3_ca ]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[ server_ext ]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth,clientAuth
subjectAltName = DNS:localhost,IP:127.0.0.1
[ client_ext ]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = clientAuth
[ ca ]
default_ca = test_ca
[ test_ca ]
database = $d/index.txt
new_certs_dir = $d/newcerts
serial = $d/serial
default_md = sha256
policy = test_policy
unique_subject = no
email_in_dn = no
copy_extensions = none
[ test_policy ]
commonName = supplied
CNF
	PostgreSQL::Test::Utils::append_to_file("$d/index.txt", '');
	PostgreSQL::Test::Utils::append_to_file("$d/serial", "1000\n");

	foreach my $ca ([ 'ca', 'rlock test CA' ], [ 'wrong_ca', 'rlock unrelated test CA' ])
	{
		_openssl('req', '-x509', '-new', '-nodes', '-newkey', 'rsa:2048',
			'-sha256', '-days', '3650', '-config', $cnf, '-extensions', 'v3_ca',
			'-subj', "/CN=$ca->[1]",
			'-keyout', "$d/$ca->[0].key", '-out', "$d/$ca->[0].crt");
	}
	foreach my $who ([ 'server', 'localhost' ], [ 'client', 'rlock test client' ])
	{
		_openssl('req', '-new', '-nodes', '-newkey', 'rsa:2048', '-sha256',
			'-config', $cnf, '-subj', "/CN=$who->[1]",
			'-keyout', "$d/$who->[0].key", '-out', "$d/$who->[0].csr");
	}
	my $serial = 1;
	foreach my $who ('server', 'client')
	{
		_openssl('x509', '-req', '-in', "$d/$who.csr",
			'-CA', "$d/ca.crt", '-CAkey', "$d/ca.key",
			'-set_serial', ++$serial, '-days', '3650', '-sha256',
			'-extfile', $cnf, '-extensions', "${who}_ext",
			'-out', "$d/$who.crt");
	}
	# A validity in the past: openssl x509 has no start date before
	# OpenSSL 3.4 (-not_before), openssl ca has had one for ever.
	_openssl('ca', '-batch', '-notext', '-config', $cnf,
		'-cert', "$d/ca.crt", '-keyfile', "$d/ca.key",
		'-startdate', '200101000000Z', '-enddate', '200102000000Z',
		'-extensions', 'server_ext', '-in', "$d/server.csr",
		'-out', "$d/expired.crt");
	chmod 0600, glob("$d/*.key");
	note "test certificates made in $d";
	return;
}

# The certificate file the server presents now.
sub _server_cert_path
{
	my ($self) = @_;
	my $c = $self->{server_cert};
	return $self->server_cert_file if $c eq 'server';
	return $self->expired_cert_file if $c eq 'expired';
	croak "RlockTest::Redis: server_cert must be server or expired, not \"$c\"";
}

# cli cannot verify the server's certificate (and must not try).
sub _unverifiable { return $_[0]->{tls} && $_[0]->{server_cert} ne 'server'; }

sub _cli_base
{
	my ($self) = @_;
	my @cmd = ($CLI);
	if ($self->{unix})
	{
		push @cmd, '-s', $self->{socket};
	}
	else
	{
		push @cmd, '-h', '127.0.0.1', '-p', $self->{port};
	}
	if ($self->{tls})
	{
		push @cmd, '--tls', '--cacert', $self->ca_file,
		  '--cert', $self->client_cert_file, '--key', $self->client_key_file;
		push @cmd, '--insecure'
		  if $self->_unverifiable && _cli_has_insecure();
	}
	push @cmd, '--no-auth-warning', '-a', $self->{password}
	  if defined $self->{password};
	return @cmd;
}

=pod

=item $redis->start(%opts)

Start the server on this object's port (again, after stop) and wait until
it answers PING.  With tls, $opts{server_cert} ('server' or 'expired') and
$opts{tls_auth_clients} change what it starts with from now on.  (With an
expired certificate the cli cannot check PING when it has no --insecure:
then start waits until the port accepts connections.)

=cut

sub start
{
	my ($self, %opts) = @_;
	foreach my $k ('server_cert', 'tls_auth_clients')
	{
		$self->{$k} = $opts{$k} if defined $opts{$k};
	}
	my $d = $self->{dir};
	unlink "$d/redis.pid";
	my @cmd = (
		$SERVER, '--bind', '127.0.0.1',
		'--save', '', '--appendonly', 'no',
		'--daemonize', 'yes',
		'--dir', $d,
		'--pidfile', "$d/redis.pid",
		'--logfile', "$d/redis.log");
	if ($self->{tls})
	{
		push @cmd, '--port', '0', '--tls-port', $self->{port},
		  '--tls-cert-file', $self->_server_cert_path,
		  '--tls-key-file', $self->server_key_file,
		  '--tls-ca-cert-file', $self->ca_file,
		  '--tls-auth-clients', $self->{tls_auth_clients};
	}
	elsif ($self->{unix})
	{
		push @cmd, '--port', '0', '--unixsocket', $self->{socket},
		  '--unixsocketperm', '777';
	}
	else
	{
		push @cmd, '--port', $self->{port};
	}
	push @cmd, @{ $self->{args} };
	push @cmd, '--requirepass', $self->{password}
	  if defined $self->{password};
	system_or_bail(@cmd);
	$self->{running} = 1;

	my $ok = RlockTest::wait_until(sub { $self->_ready }, 30);
	BAIL_OUT("$SERVER at " . $self->where . ' did not answer'
		  . (-f "$d/redis.log" ? ":\n" . slurp_file("$d/redis.log") : ''))
	  unless $ok;
	note "$SERVER started at " . $self->where
	  . ($self->{tls} ? " (TLS, certificate $self->{server_cert}, tls-auth-clients $self->{tls_auth_clients})" : '');
	return;
}

# Whether the server is up: PING, or (cli unable to verify an expired
# certificate) a TCP connection accepted.
sub _ready
{
	my ($self) = @_;
	if ($self->_unverifiable && !_cli_has_insecure())
	{
		my $s = IO::Socket::INET->new(
			PeerAddr => '127.0.0.1',
			PeerPort => $self->{port},
			Proto => 'tcp',
			Timeout => 1);
		return 0 unless $s;
		close $s;
		return 1;
	}
	my $out = $self->cli('PING');
	return defined $out && $out =~ /PONG/;
}

=pod

=item $redis->where

host:port, or the socket's path: for messages.

=cut

sub where
{
	my ($self) = @_;
	return $self->{unix} ? $self->{socket} : "127.0.0.1:$self->{port}";
}

=pod

=item $redis->stop

SHUTDOWN NOSAVE and wait until the process has exited and the port is
closed.

=cut

sub stop
{
	my ($self) = @_;
	$self->_shutdown('NOSAVE');
	note "$SERVER at " . $self->where . ' stopped';
	return;
}

=pod

=item $redis->restart(%opts)

stop, then start(%opts) on the same port (or socket) with the same
certificates, unless %opts say otherwise (e.g. server_cert => 'expired').

=cut

sub restart
{
	my ($self, %opts) = @_;
	$self->stop;
	$self->start(%opts);
	return;
}

# SHUTDOWN with the given mode and wait until the process has exited.
sub _shutdown
{
	my ($self, $mode) = @_;
	return unless $self->{running};
	my $pid = $self->pid;
	my (undef, undef, $rc) = $self->cli('SHUTDOWN', $mode);
	if ($pid)
	{
		# the cli could not talk to it (e.g. a certificate it cannot
		# verify): SIGTERM, which saves nothing with --save ''
		kill 'TERM', $pid if $rc != 0 && $mode eq 'NOSAVE' && kill(0, $pid);
		RlockTest::wait_until(sub { !kill(0, $pid) }, 30)
		  or do { kill 'KILL', $pid; };
	}
	$self->{running} = 0;
	return;
}

=pod

=item $redis->stop_save

SHUTDOWN SAVE: the keys (with their expiry times) survive in dump.rdb and
come back at the next start, as with a persistent Redis.

=cut

sub stop_save
{
	my ($self) = @_;
	$self->_shutdown('SAVE');
	return;
}

=pod

=item $redis->pid

Pid of the running server (from its pidfile), or undef.

=cut

sub pid
{
	my ($self) = @_;
	return RlockTest::read_pidfile("$self->{dir}/redis.pid");
}

=pod

=item $redis->cli(@args)

Run one redis-cli command (arguments passed as a list, no shell) and return
its standard output, chomped.  In list context returns (stdout, stderr,
exit status).  With tls it speaks TLS with the CA, client certificate and
key (and --insecure while the server presents the expired certificate);
with unix it uses the socket.

=cut

sub cli
{
	my ($self, @args) = @_;
	my ($stdout, $stderr);
	my @cmd = ($self->_cli_base, @args);
	IPC::Run::run(\@cmd, '<', \undef, '>', \$stdout, '2>', \$stderr);
	my $rc = $? >> 8;
	chomp $stdout if defined $stdout;
	return wantarray ? ($stdout, $stderr, $rc) : $stdout;
}

=pod

=item $redis->cli_bg(@args)

Start redis-cli with @args in the background (e.g. SUBSCRIBE); returns an
IPC::Run harness and a reference to its stdout buffer.  Finish it with
$h->kill_kill.

=cut

sub cli_bg
{
	my ($self, @args) = @_;
	my $out = '';
	my $err = '';
	my @cmd = ($self->_cli_base, @args);
	my $h = IPC::Run::start(\@cmd, '<', \undef, '>', \$out, '2>', \$err);
	return ($h, \$out);
}

=pod

=item $redis->eval($script, \@keys, @args)

EVAL a Lua script; returns redis-cli's output (chomped).  Integer replies
come back as plain digits, nil as the empty string (redis-cli without a tty
prints raw replies).

=cut

sub eval
{
	my ($self, $script, $keys, @args) = @_;
	return scalar $self->cli('EVAL', $script, scalar(@$keys), @$keys, @args);
}

=pod

=item $redis->clients

The connections CLIENT LIST shows, as a list of hashes of its fields
(id, addr, name, age, idle, cmd, ...), the cli's own one included.

=cut

sub clients
{
	my ($self) = @_;
	my @out;
	foreach my $line (split /\n/, $self->cli('CLIENT', 'LIST') // '')
	{
		my %c = map { /^([^=]+)=(.*)$/ ? ($1, $2) : () } split / /, $line;
		push @out, \%c if %c;
	}
	return @out;
}

=pod

=back

=cut

#
# A TCP proxy between PostgreSQL and Redis whose link can fail on command.
#
package RlockTest::Proxy;

use strict;
use warnings;

use Carp;
use File::Basename qw(dirname);
use File::Spec;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# tcp_proxy.pl lives beside this file.
my $PROXY_SCRIPT =
  File::Spec->catfile(dirname(File::Spec->rel2abs(__FILE__)), 'tcp_proxy.pl');

=pod

=head1 RlockTest::Proxy

A loopback TCP proxy in front of a Redis, run as a separate process
(test/perl/tcp_proxy.pl, core Perl only), through which a node can be
pointed to cut, stall and restore its link to Redis.  Every control method
returns only once the proxy has acknowledged that the change took effect:
after $p->stall returns, not one more byte passes.

Held data is held, not dropped: the proxy stops reading it (it waits in the
kernel's socket buffers, like segments retransmitted across a partition)
and passes it on when forwarding resumes.  So a command sent during a stall
reaches Redis after $p->resume, even if its client has given up and closed
the connection meanwhile.

=over

=item RlockTest::Proxy->new($redis)

Start a proxy listening on a free loopback port
(PostgreSQL::Test::Cluster::get_free_port) that forwards every accepted
connection to 127.0.0.1:$redis->port.  $redis is an RlockTest::Redis (or
anything with port and password methods).  Waits until it listens.

=cut

sub new
{
	my ($class, $redis) = @_;
	my $self = bless {
		redis => $redis,
		port => PostgreSQL::Test::Cluster::get_free_port(),
		in => '',
		out => '',
		seq => 0,
		timer => IPC::Run::timer($PostgreSQL::Test::Utils::timeout_default),
	}, $class;
	# stderr is inherited: the proxy's diagnostics go to the test's log
	$self->{h} = IPC::Run::start(
		[ $^X, $PROXY_SCRIPT, $self->{port}, $redis->port ],
		'<', \$self->{in}, '>', \$self->{out}, $self->{timer});
	push @RlockTest::ALL_PROXIES, $self;
	$self->{timer}->start($PostgreSQL::Test::Utils::timeout_default);
	pump_until($self->{h}, $self->{timer}, \$self->{out}, qr/^ready\n/m)
	  or BAIL_OUT("tcp_proxy.pl on port $self->{port} did not start");
	$self->{out} =~ s/^ready\n//m;
	$self->{running} = 1;
	note "proxy on port $self->{port} forwards to Redis on port " . $redis->port;
	return $self;
}

=pod

=item $p->port

The port the proxy listens on.

=item $p->url

redis://127.0.0.1:<proxy port>/0, with the password of the Redis behind it
as RlockTest::Redis->url gives it: what rlock.redis_url is set to
(rediss:// in front of a TLS Redis: the proxy passes TLS through).

=cut

sub port { return $_[0]->{port}; }

sub url
{
	my ($self) = @_;
	my $pw = $self->{redis}->can('password') ? $self->{redis}->password : undef;
	my $auth = defined $pw ? ":$pw@" : '';
	# TLS passes through unchanged (the certificate names 127.0.0.1 too)
	my $scheme =
	  ($self->{redis}->can('tls') && $self->{redis}->tls) ? 'rediss' : 'redis';
	return "$scheme://${auth}127.0.0.1:$self->{port}/0";
}

# Send one command and wait for its acknowledgement; returns the text after
# "ok" (e.g. a count).  Dies if the proxy reports an error or does not
# answer within timeout_default.
sub _command
{
	my ($self, $cmd) = @_;
	croak "proxy on port $self->{port} is not running" unless $self->{running};
	my $seq = ++$self->{seq};
	$self->{in} .= "$seq $cmd\n";
	$self->{timer}->start($PostgreSQL::Test::Utils::timeout_default);
	pump_until($self->{h}, $self->{timer}, \$self->{out},
		qr/^$seq (?:ok|error)\b[^\n]*\n/m)
	  or croak "proxy on port $self->{port} did not acknowledge \"$cmd\"";
	$self->{out} =~ s/^$seq (ok|error)\b ?([^\n]*)\n//m;
	my ($status, $info) = ($1, $2);
	croak "proxy on port $self->{port}: \"$cmd\" failed: $info"
	  if $status eq 'error';
	return $info;
}

=pod

=item $p->stall

Stop forwarding in both directions, as a network partition that silently
drops traffic would: every connection stays open, new connections are
still accepted (a client's connect succeeds) but nothing they send reaches
Redis, and nothing Redis sends reaches a client, until resume.

=item $p->stall_replies

Forward client -> server but hold server -> client: commands reach Redis
and run; their replies are held until resume.

=item $p->resume

Forward everything again, passing on what was held.

=cut

sub stall { $_[0]->_command('stall'); return; }
sub stall_replies { $_[0]->_command('stall_replies'); return; }
sub resume { $_[0]->_command('forward'); return; }

=pod

=item $p->cut(%opts)

Close every proxied connection at once, both its client and its Redis
side (with a FIN; with reset => 1 with a RST, as a peer that lost the
connection's state would send).  New connections are accepted and
forwarded normally afterwards (in the current mode: cut does not resume a
stalled proxy).  Returns the number of connections closed.

=cut

sub cut
{
	my ($self, %opts) = @_;
	return $self->_command($opts{reset} ? 'cut_reset' : 'cut');
}

=pod

=item $p->refuse

Close the listening socket: connecting to $p->port is refused
(ECONNREFUSED) until accept.  Connections already established go on.

=item $p->accept

Listen on the same port again.

=item $p->connections

The number of connections the proxy has open (accepted from clients and
not yet closed).

=cut

sub refuse { $_[0]->_command('refuse'); return; }
sub accept { $_[0]->_command('accept'); return; }
sub connections { return 0 + $_[0]->_command('connections'); }

=pod

=item $p->stop

Stop the proxy process: every connection through it closes, its port is
refused.  Also done at END.

=cut

sub stop
{
	my ($self) = @_;
	return unless $self->{running};
	$self->{running} = 0;
	# "quit", or the end of its stdin, makes the proxy exit; kill it if not
	$self->{in} .= "0 quit\n";
	$self->{timer}->start(10);
	eval {
		pump_until($self->{h}, $self->{timer}, \$self->{out}, qr/^0 ok\n/m);
		$self->{h}->finish;
		1;
	} or $self->{h}->kill_kill;
	note "proxy on port $self->{port} stopped";
	return;
}

=pod

=back

=cut

#
# A master, its replicas and the sentinels that watch them.
#
package RlockTest::Sentinel;

use strict;
use warnings;

use Carp;
use File::Basename ();
use File::Copy ();
use File::Spec;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

=pod

=head1 RlockTest::Sentinel

A Sentinel deployment on loopback: one master and its replicas (each an
RlockTest::Redis) and the sentinels that watch them, for tests that follow
a failover.  Every node and sentinel is stopped at END.

  my $s = RlockTest::Sentinel->new(replicas => 2, sentinels => 3);
  my $node = RlockTest::new_node('main', undef, url => $s->url);
  my $old = $s->master;                        # an RlockTest::Redis
  my $killed_at = $s->kill_master;             # SIGKILL
  my $secs = $s->wait_failover($old->port, 30) # undef on timeout
    // die 'no failover';
  $s->master;                                  # the promoted replica
  $s->stop_sentinel(0); $s->start_sentinel(0);

=over

=item RlockTest::Sentinel->new(%opts)

Start the master (an RlockTest::Redis), then the replicas (RlockTest::Redis
with C<replicaof 127.0.0.1 E<lt>master portE<gt>>, each waited for until
INFO replication shows master_link_status:up), then the sentinels
(C<server_program E<lt>confE<gt> --sentinel>, daemonized, each with its own
writable sentinel.conf in its own directory, since a sentinel rewrites its
configuration), monitoring the master with a quorum of a majority of the
sentinels.  Returns once every sentinel reports the master, sees every
replica (flags exactly "slave": connected, not down) and every other
sentinel: polled, no fixed sleep.  Dies (BAIL_OUT) when that does not
happen within timeout_default.

Every data node gets C<repl-diskless-sync-delay 0> (a full resync does not
wait 5 s for more replicas) and, with a password, C<masterauth> (any of
them may be a replica after a failover).

Options (defaults in brackets):

=over

=item replicas => N [2]

=item sentinels => N [3]

=item master_name => 'name' ['rlockmaster']

=item down_after_ms => ms [2000]

C<sentinel down-after-milliseconds>.  A sentinel pings every
min(down-after, 1 s): with 1000 ms a single late reply makes a node look
down, and on a loaded machine a master just promoted was often failed over
again at once, about 1 s after the switch, with nobody having touched it.
2000 ms allows for one late reply; a failover takes about 3 s then.

=item failover_timeout_ms => ms [5000]

C<sentinel failover-timeout>; C<sentinel parallel-syncs> is 1.

=item password => 'x' [undef]

C<requirepass> and C<masterauth> on the data nodes, C<sentinel auth-pass>
on the sentinels; url carries it.

=item sentinel_password => 'x' [undef]

C<requirepass> on the sentinels themselves (Redis 5.0.1 and later use it
to talk to each other as well); sentinel_cli uses it.  Not in url (rlock
has a setting of its own for it).

=item replica_proxies => 1 [0]

Each replica replicates from the master through its own RlockTest::Proxy
(C<replicaof 127.0.0.1 E<lt>proxy portE<gt>>), so that a test can stall
replication deterministically: C<$_-E<gt>stall for $s-E<gt>replica_links>
stops every byte between the master and its replicas (the replicas do not
notice: their link stays "up" until repl-timeout, 60 s), C<resume> passes
on what was held.  The replicas announce their own listening port
(REPLCONF listening-port) and the proxy connects from 127.0.0.1, so the
master's INFO, and hence the sentinels, show each replica at its real
address; new checks that.

A sentinel re-points a replica that replicates from another address than
the master's (C<+fix-slave-config>) once it has seen it so for
failover-timeout: the sentinels therefore start with a failover-timeout of
10 minutes, and kill_master sets failover_timeout_ms again as soon as
every running sentinel sees the master down (a master that is down is
never a target of that fix), so the failover and the ones after it run
as without proxies.  After the first failover the sentinels reconfigure
the remaining replicas with REPLICAOF directly to the new master: the
proxies carry nothing from then on.

=back

=cut

sub new
{
	my ($class, %opts) = @_;
	my $self = bless {
		n_replicas => $opts{replicas} // 2,
		n_sentinels => $opts{sentinels} // 3,
		master_name => $opts{master_name} // 'rlockmaster',
		down_after_ms => $opts{down_after_ms} // 2000,
		failover_timeout_ms => $opts{failover_timeout_ms} // 5000,
		password => $opts{password},
		sentinel_password => $opts{sentinel_password},
		replica_proxies => $opts{replica_proxies} ? 1 : 0,
		nodes => [],
		links => [],
		sentinels => [],
	}, $class;
	# what the sentinels start with (see replica_proxies)
	$self->{failover_timeout_now} =
	  $self->{replica_proxies} ? 600_000 : $self->{failover_timeout_ms};
	croak 'RlockTest::Sentinel: at least one sentinel'
	  if $self->{n_sentinels} < 1;
	push @RlockTest::ALL_SENTINELS, $self;

	my @common = ('--repl-diskless-sync-delay', '0');
	push @common, '--masterauth', $self->{password}
	  if defined $self->{password};
	my $master = RlockTest::Redis->new(
		args => [@common],
		password => $self->{password});
	push @{ $self->{nodes} }, $master;
	foreach my $i (1 .. $self->{n_replicas})
	{
		my $upstream = $master->port;
		if ($self->{replica_proxies})
		{
			my $link = RlockTest::Proxy->new($master);
			push @{ $self->{links} }, $link;
			$upstream = $link->port;
		}
		my $r = RlockTest::Redis->new(
			args => [ @common, '--replicaof', '127.0.0.1', $upstream ],
			password => $self->{password});
		push @{ $self->{nodes} }, $r;
		RlockTest::wait_until(
			sub {
				($r->cli('INFO', 'replication') // '') =~
				  /^master_link_status:up\r?$/m;
			})
		  or BAIL_OUT('replica at ' . $r->where
			  . ' did not sync with the master at ' . $master->where
			  . ($self->{replica_proxies} ? " through port $upstream" : ''));
	}
	if ($self->{replica_proxies})
	{
		# the master lists each replica at its own port, whatever the
		# connection came through
		my $info = $master->cli('INFO', 'replication') // '';
		foreach my $r (@{ $self->{nodes} }[ 1 .. $#{ $self->{nodes} } ])
		{
			my $p = $r->port;
			$info =~ /^slave\d+:ip=127\.0\.0\.1,port=$p,/m
			  or BAIL_OUT("the master does not list the replica at port $p "
				  . "(through a proxy) at its own address:\n$info");
		}
	}

	my $quorum = int($self->{n_sentinels} / 2) + 1;
	foreach my $i (0 .. $self->{n_sentinels} - 1)
	{
		my $dir = File::Spec->rel2abs(
			PostgreSQL::Test::Utils::tempdir("sentinel$i"));
		my $st = {
			port => PostgreSQL::Test::Cluster::get_free_port(),
			dir => $dir,
			conf => "$dir/sentinel.conf",
			running => 0,
		};
		my $name = $self->{master_name};
		my $conf = "# written by RlockTest::Sentinel; the sentinel rewrites it\n"
		  . "bind 127.0.0.1\n"
		  . "port $st->{port}\n"
		  . "daemonize yes\n"
		  . "pidfile $dir/sentinel.pid\n"
		  . "logfile $dir/sentinel.log\n"
		  . "dir $dir\n"
		  . "sentinel monitor $name 127.0.0.1 " . $master->port . " $quorum\n"
		  . "sentinel down-after-milliseconds $name $self->{down_after_ms}\n"
		  . "sentinel failover-timeout $name $self->{failover_timeout_now}\n"
		  . "sentinel parallel-syncs $name 1\n";
		$conf .= "sentinel auth-pass $name $self->{password}\n"
		  if defined $self->{password};
		$conf .= "requirepass $self->{sentinel_password}\n"
		  if defined $self->{sentinel_password};
		PostgreSQL::Test::Utils::append_to_file($st->{conf}, $conf);
		push @{ $self->{sentinels} }, $st;
		$self->start_sentinel($i);
	}

	my @ports = map { $_->port } @{ $self->{nodes} };
	my $mport = $master->port;
	my $ok = RlockTest::wait_until(sub { $self->_settled($mport) });
	BAIL_OUT("sentinels did not all see master $mport, replicas "
		  . join(',', @ports[ 1 .. $#ports ]) . ' and each other: '
		  . $self->_describe)
	  unless $ok;
	note "sentinel deployment ready: master $mport, replicas "
	  . join(',', @ports[ 1 .. $#ports ])
	  . ($self->{replica_proxies}
		? ' (through proxies ' . join(',', map { $_->port } @{ $self->{links} }) . ')'
		: '')
	  . ', sentinels ' . join(',', $self->sentinel_ports);
	return $self;
}

# The parsed reply of SENTINEL REPLICAS/SLAVES/SENTINELS (flattened by the
# cli into lines: field, value, field, value... each record starting with
# "name"): a list of hashes.
sub _records
{
	my ($out) = @_;
	return () unless defined $out && $out ne '';
	my @l = split /\n/, $out, -1;
	my @recs;
	for (my $i = 0; $i + 1 < @l; $i += 2)
	{
		push @recs, {} if $l[$i] eq 'name' || !@recs;
		$recs[-1]{ $l[$i] } = $l[ $i + 1 ];
	}
	return @recs;
}

# The replicas sentinel $i knows of (SENTINEL REPLICAS, or SLAVES on a
# server that lacks it), as hashes of their fields.
sub _sentinel_replicas
{
	my ($self, $i) = @_;
	my ($out, $err, $rc) =
	  $self->sentinel_cli($i, 'SENTINEL', 'REPLICAS', $self->{master_name});
	($out, $err, $rc) =
	  $self->sentinel_cli($i, 'SENTINEL', 'SLAVES', $self->{master_name})
	  if $rc != 0 || ($out // '') =~ /^ERR/;
	return () if $rc != 0 || ($out // '') =~ /^ERR/;
	return _records($out);
}

# Whether every running sentinel reports master $mport, sees every other
# data node as a healthy replica (flags "slave") and knows every other
# sentinel configured (a stopped one included: it is remembered).
sub _settled
{
	my ($self, $mport) = @_;
	my %want_replicas =
	  map { $_->port => 1 } grep { $_->port != $mport } @{ $self->{nodes} };
	my $n_s = @{ $self->{sentinels} };
	foreach my $i (0 .. $n_s - 1)
	{
		next unless $self->{sentinels}[$i]{running};
		my ($host, $port) = $self->_master_addr($i);
		return 0 unless defined $port && $port == $mport;
		my %seen = map { ($_->{flags} // '') eq 'slave' ? ($_->{port} => 1) : () }
		  $self->_sentinel_replicas($i);
		return 0 if grep { !$seen{$_} } keys %want_replicas;
		my @others = _records(scalar $self->sentinel_cli($i, 'SENTINEL',
			'SENTINELS', $self->{master_name}));
		return 0 if @others < $n_s - 1;
	}
	return 1;
}

# For messages: what each sentinel reports.
sub _describe
{
	my ($self) = @_;
	my @d;
	foreach my $i (0 .. $#{ $self->{sentinels} })
	{
		my $st = $self->{sentinels}[$i];
		if (!$st->{running})
		{
			push @d, "sentinel $st->{port}: stopped";
			next;
		}
		my (undef, $p) = $self->_master_addr($i);
		my @r = map { "$_->{port}($_->{flags})" } $self->_sentinel_replicas($i);
		my @o = _records(scalar $self->sentinel_cli($i, 'SENTINEL',
			'SENTINELS', $self->{master_name}));
		push @d, "sentinel $st->{port}: master " . ($p // '?')
		  . ', replicas ' . join(' ', @r)
		  . ', ' . scalar(@o) . ' other sentinel(s)';
	}
	return join('; ', @d);
}

# (host, port) of the master according to sentinel $i, or () if it does
# not answer.
sub _master_addr
{
	my ($self, $i) = @_;
	my ($out, undef, $rc) = $self->sentinel_cli($i, 'SENTINEL',
		'GET-MASTER-ADDR-BY-NAME', $self->{master_name});
	return () if $rc != 0 || !defined $out;
	my ($h, $p) = split /\n/, $out;
	return () unless defined $p && $p =~ /^\d+$/;
	return ($h, $p);
}

# The data node listening on $port, or undef.
sub _node_at
{
	my ($self, $port) = @_;
	my ($n) = grep { $_->port == $port } @{ $self->{nodes} };
	return $n;
}

# Whether data node $n is up and says ROLE master.
sub _is_master
{
	my ($n) = @_;
	return 0 unless $n && $n->{running};
	my $role = $n->cli('ROLE') // '';
	return $role =~ /^master\n/ || $role eq 'master';
}

=pod

=item $s->master

The current master's RlockTest::Redis: the data node at the port a
sentinel gives for SENTINEL GET-MASTER-ADDR-BY-NAME.  The running
sentinels are asked in turn and the first answer whose node is up and
says ROLE master wins (during a failover the sentinels may disagree for a
moment); failing that, the first answer at all.  undef if no sentinel
answers.

=cut

sub master
{
	my ($self) = @_;
	my $first;
	foreach my $i (0 .. $#{ $self->{sentinels} })
	{
		next unless $self->{sentinels}[$i]{running};
		my (undef, $p) = $self->_master_addr($i);
		next unless defined $p;
		my $n = $self->_node_at($p);
		next unless $n;
		return $n if _is_master($n);
		$first //= $n;
	}
	return $first;
}

=pod

=item $s->replicas

The data nodes other than the current master (running or not), as
RlockTest::Redis objects.

=item $s->nodes

All data nodes, the first master first.

=cut

sub replicas
{
	my ($self) = @_;
	my $m = $self->master;
	my $mport = $m ? $m->port : -1;
	return grep { $_->port != $mport } @{ $self->{nodes} };
}

sub nodes { return @{ $_[0]->{nodes} }; }

=pod

=item $s->sentinel_ports

The sentinels' ports, in order (index $i of sentinel_cli, stop_sentinel,
start_sentinel).

=item $s->master_name, $s->password, $s->sentinel_password

What new was given (or its defaults).

=cut

sub sentinel_ports { return map { $_->{port} } @{ $_[0]->{sentinels} }; }

=pod

=item $s->replica_links

With replica_proxies: the RlockTest::Proxy of each first replica, in the
order of nodes (without the first master), through which it replicates
from the first master.  Empty otherwise.

=cut

sub replica_links { return @{ $_[0]->{links} }; }

=pod

=item $s->sentinel_set($param, $value)

C<SENTINEL SET E<lt>master nameE<gt> $param $value> on every running
sentinel (dies if one refuses), and again on a sentinel that start_sentinel
starts later.  E.g. sentinel_set('failover-timeout', 3000).

=cut

sub sentinel_set
{
	my ($self, $param, $value) = @_;
	$self->{settings}{$param} = $value;
	$self->{failover_timeout_now} = $value if $param eq 'failover-timeout';
	foreach my $i (0 .. $#{ $self->{sentinels} })
	{
		next unless $self->{sentinels}[$i]{running};
		$self->_sentinel_set_one($i, $param, $value);
	}
	return;
}

sub _sentinel_set_one
{
	my ($self, $i, $param, $value) = @_;
	my ($out, $err) = $self->sentinel_cli($i, 'SENTINEL', 'SET',
		$self->{master_name}, $param, $value);
	croak "sentinel $self->{sentinels}[$i]{port}: SENTINEL SET $param $value: "
	  . ($out // '') . ($err // '')
	  unless ($out // '') eq 'OK';
	return;
}
sub master_name { return $_[0]->{master_name}; }
sub password { return $_[0]->{password}; }
sub sentinel_password { return $_[0]->{sentinel_password}; }

=pod

=item $s->url(%opts)

redis-sentinel://127.0.0.1:<p1>,127.0.0.1:<p2>,.../0#<master_name> with
every sentinel, with :<password>@ when the data nodes have one.  Options:
db => N, master_name => 'x' (e.g. a wrong one), password => 'x' or
password => undef (none), sentinels => [indexes] (only those sentinels).

=cut

sub url
{
	my ($self, %o) = @_;
	my $pw = exists $o{password} ? $o{password} : $self->{password};
	my $auth = defined $pw ? ":$pw@" : '';
	my @idx = @{ $o{sentinels} // [ 0 .. $#{ $self->{sentinels} } ] };
	my $hosts = join(',',
		map { "127.0.0.1:" . $self->{sentinels}[$_]{port} } @idx);
	my $db = $o{db} // 0;
	my $name = $o{master_name} // $self->{master_name};
	return "redis-sentinel://$auth$hosts/$db#$name";
}

=pod

=item $s->sentinel_cli($i, @args)

Run one cli command against sentinel $i (0-based), arguments as a list;
returns its standard output, chomped, or in list context (stdout, stderr,
exit status), like RlockTest::Redis::cli.

=cut

sub sentinel_cli
{
	my ($self, $i, @args) = @_;
	my $st = $self->{sentinels}[$i]
	  or croak "RlockTest::Sentinel: no sentinel $i";
	my @cmd = ($RlockTest::Redis::CLI, '-h', '127.0.0.1', '-p', $st->{port});
	push @cmd, '--no-auth-warning', '-a', $self->{sentinel_password}
	  if defined $self->{sentinel_password};
	my ($stdout, $stderr);
	IPC::Run::run([ @cmd, @args ], '<', \undef, '>', \$stdout,
		'2>', \$stderr);
	my $rc = $? >> 8;
	chomp $stdout if defined $stdout;
	return wantarray ? ($stdout, $stderr, $rc) : $stdout;
}

# Whether process $pid is gone (or a zombie nobody reaped yet: a daemonized
# server's parent is init, which may be slow to reap, or not do it at all in
# a container).
sub _gone
{
	my ($pid) = @_;
	return 1 unless kill(0, $pid);
	if (open my $fh, '<', "/proc/$pid/stat")
	{
		my $stat = <$fh> // '';
		close $fh;
		return 1 if $stat =~ /^\d+ \(.*\) Z /s;
	}
	return 0;
}

=pod

=item $s->kill_master

SIGKILL the current master's process (no SHUTDOWN: it saves nothing, says
nothing to its replicas) and wait until it is gone.  Returns the time of
the kill (Time::HiRes::time).  The node's object stays in nodes (not
running); $node->start brings it back on its port, and the sentinels then
turn it into a replica of the new master.

=cut

sub kill_master
{
	my ($self) = @_;
	my $m = $self->master or croak 'RlockTest::Sentinel: no master to kill';
	my $pid = $m->pid or croak 'RlockTest::Sentinel: master has no pid';
	my $t = time();
	kill 'KILL', $pid;
	$m->{running} = 0;
	RlockTest::wait_until(sub { _gone($pid) }, 30)
	  or croak "master at " . $m->where . " (pid $pid) survived SIGKILL";
	note 'master at ' . $m->where . " killed (pid $pid)";
	if ($self->{failover_timeout_now} != $self->{failover_timeout_ms})
	{
		# (replica_proxies) no sentinel re-points a replica once it sees
		# the master down: failover-timeout can be what was asked for
		RlockTest::wait_until(sub { $self->_all_see_down }, 30)
		  or diag('the sentinels do not all see the master down: '
			  . $self->_describe);
		$self->sentinel_set('failover-timeout', $self->{failover_timeout_ms});
	}
	return $t;
}

# Whether every running sentinel flags the master s_down (or o_down).
sub _all_see_down
{
	my ($self) = @_;
	foreach my $i (0 .. $#{ $self->{sentinels} })
	{
		next unless $self->{sentinels}[$i]{running};
		my ($rec) = _records(scalar $self->sentinel_cli($i, 'SENTINEL',
			'MASTER', $self->{master_name}));
		return 0 unless $rec && ($rec->{flags} // '') =~ /\b[so]_down\b/;
	}
	return 1;
}

=pod

=item $s->revive($node)

Start data node $node (one that kill_master stopped) again on its port as
a replica of the current master (C<replicaof>, directly, not through a
proxy), wait until its link is up and until every running sentinel lists
it as a healthy replica (flags "slave").  It comes back empty (no
persistence) and takes a full copy from the master.

=cut

sub revive
{
	my ($self, $n) = @_;
	croak 'RlockTest::Sentinel: revive a stopped data node'
	  if $n->{running};
	my $m = $self->master or croak 'RlockTest::Sentinel: no master';
	my @args = @{ $n->{args} };
	my @keep;
	while (@args)
	{
		my $a = shift @args;
		if ($a eq '--replicaof')
		{
			splice @args, 0, 2;
			next;
		}
		push @keep, $a;
	}
	$n->{args} = [ @keep, '--replicaof', '127.0.0.1', $m->port ];
	$n->start;
	RlockTest::wait_until(
		sub {
			($n->cli('INFO', 'replication') // '') =~
			  /^master_link_status:up\r?$/m;
		})
	  or croak 'revived node ' . $n->where
	  . ' did not sync with the master at ' . $m->where;
	my $port = $n->port;
	RlockTest::wait_until(
		sub {
			foreach my $i (0 .. $#{ $self->{sentinels} })
			{
				next unless $self->{sentinels}[$i]{running};
				return 0
				  unless grep {
					$_->{port} == $port && ($_->{flags} // '') eq 'slave'
				  } $self->_sentinel_replicas($i);
			}
			return 1;
		})
	  or croak "the sentinels do not see the revived node $port as a replica: "
	  . $self->_describe;
	note 'node ' . $n->where . ' revived as a replica of ' . $m->where;
	return;
}

=pod

=item $s->wait_failover($old_port, $timeout_s)

Wait until a sentinel reports a master other than $old_port and that node
answers ROLE master.  Returns the seconds (Time::HiRes, fractional) from
this call until then, or undef if it does not happen within $timeout_s
(default timeout_default).  Called right after kill_master, that is the
failover time; (time() - kill time) is there for the exact figure.

Before returning it also waits (within what remains of $timeout_s, not
counted in the figure) until every running sentinel reports the new
master, so what follows sees one master; a diag says so if they do not.

=cut

sub wait_failover
{
	my ($self, $old_port, $timeout_s) = @_;
	$timeout_s //= $PostgreSQL::Test::Utils::timeout_default;
	my $start = time();
	my $new;
	RlockTest::wait_until(
		sub {
			foreach my $i (0 .. $#{ $self->{sentinels} })
			{
				next unless $self->{sentinels}[$i]{running};
				my (undef, $p) = $self->_master_addr($i);
				next unless defined $p && $p != $old_port;
				my $n = $self->_node_at($p);
				if (_is_master($n))
				{
					$new = $n;
					return 1;
				}
			}
			return 0;
		},
		$timeout_s);
	if (!$new)
	{
		diag("no failover from $old_port within ${timeout_s}s: "
			  . $self->_describe);
		return undef;
	}
	my $elapsed = time() - $start;
	note sprintf('failover from %d to %d seen after %.3fs',
		$old_port, $new->port, $elapsed);
	my $left = $timeout_s - $elapsed;
	$left = 1 if $left < 1;
	RlockTest::wait_until(
		sub {
			foreach my $i (0 .. $#{ $self->{sentinels} })
			{
				next unless $self->{sentinels}[$i]{running};
				my (undef, $p) = $self->_master_addr($i);
				return 0 unless defined $p && $p == $new->port;
			}
			return 1;
		},
		$left)
	  or diag('the sentinels do not agree on the new master: '
		  . $self->_describe);
	return $elapsed;
}

=pod

=item $s->stop_sentinel($i)

SIGKILL sentinel $i (0-based) and wait until it is gone.

=item $s->start_sentinel($i)

Start sentinel $i on its port with its configuration file (as it last
rewrote it: same id, known replicas and sentinels) and wait until it
answers and reports a master.

=cut

sub stop_sentinel
{
	my ($self, $i) = @_;
	my $st = $self->{sentinels}[$i]
	  or croak "RlockTest::Sentinel: no sentinel $i";
	return unless $st->{running};
	my $pid = _sentinel_pid($st);
	$st->{running} = 0;
	if ($pid)
	{
		kill 'KILL', $pid;
		RlockTest::wait_until(sub { _gone($pid) }, 30)
		  or croak "sentinel $st->{port} (pid $pid) survived SIGKILL";
	}
	note "sentinel $st->{port} killed";
	return;
}

sub start_sentinel
{
	my ($self, $i) = @_;
	my $st = $self->{sentinels}[$i]
	  or croak "RlockTest::Sentinel: no sentinel $i";
	croak "sentinel $st->{port} is running" if $st->{running};
	unlink "$st->{dir}/sentinel.pid";
	system_or_bail($RlockTest::Redis::SERVER, $st->{conf}, '--sentinel');
	$st->{running} = 1;
	RlockTest::wait_until(sub { defined(($self->_master_addr($i))[1]) }, 30)
	  or BAIL_OUT("sentinel $st->{port} did not answer"
		  . (-f "$st->{dir}/sentinel.log"
			  ? ":\n" . slurp_file("$st->{dir}/sentinel.log") : ''));
	# what sentinel_set changed on the others (a sentinel stopped then
	# still has its old configuration)
	foreach my $k (sort keys %{ $self->{settings} // {} })
	{
		$self->_sentinel_set_one($i, $k, $self->{settings}{$k});
	}
	note "sentinel started on port $st->{port}";
	return;
}

sub _sentinel_pid
{
	my ($st) = @_;
	return RlockTest::read_pidfile("$st->{dir}/sentinel.pid");
}

=pod

=item $s->stop

Stop every sentinel (SIGTERM, SIGKILL if it lingers) and then every data
node still running.  Done at END (sentinels before data nodes, so no
failover starts while the nodes go down).  The logs of the sentinels and
of the data nodes are then copied beside the test's own log
(tmp_check/log/<test>_sentinel_<port>.log, <test>_redis_<port>.log): their
directories are temporary.

=cut

sub stop
{
	my ($self) = @_;
	foreach my $st (@{ $self->{sentinels} })
	{
		next unless $st->{running};
		$st->{running} = 0;
		my $pid = _sentinel_pid($st) or next;
		kill 'TERM', $pid;
		RlockTest::wait_until(sub { _gone($pid) }, 10)
		  or kill 'KILL', $pid;
	}
	foreach my $n (@{ $self->{nodes} })
	{
		$n->stop if $n->{running};
	}
	my $logdir = $PostgreSQL::Test::Utils::log_path;
	if (defined $logdir && -d $logdir)
	{
		my $test = File::Basename::basename($0, '.pl');
		foreach my $st (@{ $self->{sentinels} })
		{
			File::Copy::copy("$st->{dir}/sentinel.log",
				"$logdir/${test}_sentinel_$st->{port}.log");
		}
		foreach my $n (@{ $self->{nodes} })
		{
			File::Copy::copy($n->dir . '/redis.log',
				"$logdir/${test}_redis_" . $n->port . '.log');
		}
	}
	return;
}

=pod

=back

=cut

#
# Redisson's own scripts, for tests that play a Java client.
#
package RlockTest::Redisson;

=pod

=head1 RlockTest::Redisson

Redisson's fair-lock scripts (PROTOCOL.md), to drive a Redisson client
from redis-cli: $RlockTest::Redisson::fair_acquire (KEYS: lock, queue,
deadlines; ARGV: lease ms, holder, wait ms, now ms) and
$RlockTest::Redisson::fair_release (KEYS: lock, queue, deadlines, channel
prefix; ARGV: message, holder).

Its exclusive lock (RLock) too: $RlockTest::Redisson::acquire (KEYS: lock;
ARGV: lease ms, holder) and $RlockTest::Redisson::release (KEYS: lock,
channel, unlock latch; ARGV: message, lease ms, holder, publish command,
latch ms), and two functions that run them on an RlockTest::Redis (over
whatever it speaks: TCP, TLS, a Unix socket):

  RlockTest::Redisson::try_lock($redis, $name, $lease_ms, $holder)
      # '' (nil) when acquired, else the holder's PTTL
  RlockTest::Redisson::unlock($redis, $name, $holder)
      # 1 released (published "0"), 0 one level less, '' not held

for names without "{" (channel redisson_lock__channel:{name}).

=cut

our $acquire = <<'LUA';
if (redis.call('exists', KEYS[1]) == 0) or
   (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])
LUA

our $release = <<'LUA';
local val = redis.call('get', KEYS[3])
if val ~= false then return tonumber(val) end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if counter > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  redis.call('set', KEYS[3], 0, 'px', ARGV[5])
  return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[4], KEYS[2], ARGV[1])
redis.call('set', KEYS[3], 1, 'px', ARGV[5])
return 1
LUA

my $unlock_request = 0;

sub try_lock
{
	my ($redis, $name, $lease_ms, $holder) = @_;
	return $redis->eval($acquire, [$name], $lease_ms, $holder);
}

sub unlock
{
	my ($redis, $name, $holder) = @_;
	my $latch = sprintf('redisson_unlock_latch:{%s}:%032x', $name,
		++$unlock_request + int(rand(1 << 30)) * 65536);
	return $redis->eval($release,
		[ $name, "redisson_lock__channel:{$name}", $latch ],
		'0', 30000, $holder, 'publish', 13500);
}

our $fair_acquire = <<'LUA';
while true do
  local first = redis.call('lindex', KEYS[2], 0)
  if first == false then break end
  local timeout = tonumber(redis.call('zscore', KEYS[3], first))
  if timeout <= tonumber(ARGV[4]) then
    redis.call('zrem', KEYS[3], first)
    redis.call('lpop', KEYS[2])
  else break end
end
if (redis.call('exists', KEYS[1]) == 0) and ((redis.call('exists', KEYS[2]) == 0)
    or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], ARGV[2])
  local keys = redis.call('zrange', KEYS[3], 0, -1)
  for i = 1, #keys, 1 do
    redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), keys[i])
  end
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
local timeout = redis.call('zscore', KEYS[3], ARGV[2])
if timeout ~= false then
  return timeout - tonumber(ARGV[3]) - tonumber(ARGV[4])
end
local lastThreadId = redis.call('lindex', KEYS[2], -1)
local ttl
if lastThreadId ~= false and lastThreadId ~= ARGV[2] then
  ttl = tonumber(redis.call('zscore', KEYS[3], lastThreadId)) - tonumber(ARGV[4])
else
  ttl = redis.call('pttl', KEYS[1])
end
local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4])
if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then
  redis.call('rpush', KEYS[2], ARGV[2])
end
return ttl
LUA

our $fair_release = <<'LUA';
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then return nil end
if redis.call('hincrby', KEYS[1], ARGV[2], -1) > 0 then return 0 end
redis.call('del', KEYS[1])
local next = redis.call('lindex', KEYS[2], 0)
if next ~= false then
  redis.call('publish', KEYS[4] .. ':' .. next, ARGV[1])
end
return 1
LUA

package RlockTest;

END
{
	# keep the test script's exit status
	local $?;
	foreach my $p (@ALL_PROXIES)
	{
		eval { $p->stop; };
	}
	# sentinels before the data nodes: no failover while they go down
	foreach my $s (@ALL_SENTINELS)
	{
		eval { $s->stop; };
	}
	foreach my $r (@ALL_REDIS)
	{
		eval { $r->stop if $r->{running}; };
	}
}

1;
