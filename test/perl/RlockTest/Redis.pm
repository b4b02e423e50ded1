
# Copyright (c) 2026, rlock developers

#
# A private redis-server (or valkey-server).
#
package RlockTest::Redis;

use strict;
use warnings;

use RlockTest ();    # wait_until, read_pidfile, @ALL_*: at run time

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

=item port => N

listen on this port (default: PostgreSQL::Test::Cluster::get_free_port).

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
		port => $opts{unix} ? undef
		: ($opts{port} // PostgreSQL::Test::Cluster::get_free_port()),
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
then start waits until the port accepts connections.)  $opts{args}: more
redis-server arguments, for this start only; $opts{wait} => 0: return
without waiting for PING (a server still loading its data answers
LOADING).

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
	push @cmd, @{ $opts{args} } if $opts{args};
	push @cmd, '--requirepass', $self->{password}
	  if defined $self->{password};
	without_sanitizers(sub { system_or_bail(@cmd) });
	$self->{running} = 1;
	return if defined $opts{wait} && !$opts{wait};

	my $ok = RlockTest::wait_until(sub { $self->_ready }, 30);
	BAIL_OUT("$SERVER at " . $self->where . ' did not answer'
		  . (-f "$d/redis.log" ? ":\n" . slurp_file("$d/redis.log") : ''))
	  unless $ok;
	note "$SERVER started at " . $self->where
	  . ($self->{tls} ? " (TLS, certificate $self->{server_cert}, tls-auth-clients $self->{tls_auth_clients})" : '');
	return;
}

# Run $code with the sanitizers' runtime (test/run --sanitize preloads it
# for PostgreSQL, whose rlock.so needs it) taken out of the environment: a
# redis-server started with libasan preloaded runs its Lua under ASan's
# allocator, and on trixie's Redis 8 it once died at start (lua_gc on a
# NULL state in scriptingInit).  Redis is not what the sanitizers test.
sub without_sanitizers
{
	my ($code) = @_;
	local %ENV = %ENV;
	delete @ENV{qw(LD_PRELOAD ASAN_OPTIONS UBSAN_OPTIONS)};
	return $code->();
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
		# (a zombie counts as gone: its port is closed, and nobody may reap
		# it soon, e.g. a container's init)
		RlockTest::wait_until(sub { RlockTest::pid_gone($pid) }, 30)
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

=item $redis->monitor_start, $redis->monitor_stop($m)

MONITOR this Redis from now on: monitor_start returns a handle once MONITOR
answered; monitor_stop sends an ECHO of a fresh marker, waits until MONITOR
showed it (so every command sent before it was seen), stops MONITOR and
returns what it printed.  Inside a script's EVALSHA line, the commands the
script ran follow it ("[db lua]").

=cut

my $monitor_marks = 0;

sub monitor_start
{
	my ($self) = @_;
	my ($mon, $buf) = $self->cli_bg('MONITOR');
	RlockTest::wait_until(sub { $mon->pump_nb; $$buf =~ /OK/ }, 60)
	  or die "MONITOR did not start\n";
	return [ $mon, $buf ];
}

sub monitor_stop
{
	my ($self, $m) = @_;
	my ($mon, $buf) = @$m;
	my $marker = 'monitor-mark-' . ++$monitor_marks;
	$self->cli('ECHO', $marker);
	RlockTest::wait_until(sub { $mon->pump_nb; index($$buf, $marker) >= 0 }, 60)
	  or die "MONITOR did not show the marker\n";
	$mon->kill_kill;
	return $$buf;
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

1;
