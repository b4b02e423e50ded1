# Copyright (c) 2026, rlock developers
#
# rediss-sentinel:// (SPEC 10): a master and a sentinel that both speak only
# TLS.  rlock asks the sentinel over TLS where the master is and reaches the
# master over TLS, verifying both certificates (rlock.tls_verify = full);
# the plain redis-sentinel:// form cannot reach that sentinel and says so.
use strict;
use warnings;

use File::Spec;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use RlockTest;

my $master = RlockTest::Redis->new(tls => 1, tls_auth_clients => 'no');
my $ca = $master->ca_file;

# One sentinel, TLS only, monitoring the master over TLS.
my $dir = File::Spec->rel2abs(PostgreSQL::Test::Utils::tempdir('sentinel'));
my $sport = PostgreSQL::Test::Cluster::get_free_port();
PostgreSQL::Test::Utils::append_to_file("$dir/sentinel.conf",
	"bind 127.0.0.1\nport 0\ntls-port $sport\n"
	  . 'tls-cert-file ' . $master->server_cert_file . "\n"
	  . 'tls-key-file ' . $master->server_key_file . "\n"
	  . "tls-ca-cert-file $ca\n"
	  . "tls-auth-clients no\ntls-replication yes\n"
	  . "daemonize yes\npidfile $dir/sentinel.pid\nlogfile $dir/sentinel.log\n"
	  . "dir $dir\n"
	  . 'sentinel monitor tlsmaster 127.0.0.1 ' . $master->port . " 1\n");
IPC::Run::run([ RlockTest::Redis::server_program(), "$dir/sentinel.conf",
		'--sentinel' ])
  or BAIL_OUT('the TLS sentinel did not start');

END
{
	my $pid = RlockTest::read_pidfile("$dir/sentinel.pid");
	kill 'KILL', $pid if defined $pid;
}

sub sentinel_cli
{
	my ($out, $err) = ('', '');
	IPC::Run::run([ RlockTest::Redis::cli_program(), '--tls', '--cacert', $ca,
			'-h', '127.0.0.1', '-p', $sport, @_ ], '>', \$out, '2>', \$err);
	chomp $out;
	return $out;
}

ok( RlockTest::wait_until(
		sub {
			sentinel_cli('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', 'tlsmaster') eq
			  "127.0.0.1\n" . $master->port;
		}),
	'the TLS sentinel monitors the TLS master');

my $node = RlockTest::new_node('stls', undef,
	url => "rediss-sentinel://127.0.0.1:$sport#tlsmaster",
	extra_conf => "rlock.tls_ca_file = '$ca'\nrlock.tls_verify = 'full'\n");

my $s = $node->background_psql('postgres', on_error_stop => 0);
my ($out, $err) = RlockTest::query_err($s,
	"SELECT rlock_try_acquire('over_tls', '1min')");
is("$out/$err", 't/', 'rediss-sentinel://: a lock through the master the sentinel names');
is($master->cli('EXISTS', 'over_tls'), '1', 'the lock is on the TLS master');
is( $node->safe_psql('postgres', 'SELECT node, role FROM rlock_nodes()'),
	'127.0.0.1:' . $master->port . '|master',
	'rlock_nodes: that master');
my $pid = $s->query_safe('SELECT pg_backend_pid()');
like(sentinel_cli('CLIENT', 'LIST'), qr/name=rlock:stls:$pid /,
	'the session asked the sentinel over TLS (its connection is in CLIENT LIST)');
$s->quit;

RlockTest::set_gucs($node,
	'rlock.redis_url' => "redis-sentinel://127.0.0.1:$sport#tlsmaster");
(undef, $out, $err) = $node->psql('postgres',
	"SELECT rlock_try_acquire('plain', '1min')");
like($err, qr/ERROR:  could not locate the Redis master "tlsmaster" for lock "plain"/,
	'redis-sentinel:// (no TLS) cannot ask a TLS sentinel, and says so');
like($err, qr/No sentinel answered: 127\.0\.0\.1:$sport/,
	'the detail names the sentinel');

$node->stop;
done_testing();
