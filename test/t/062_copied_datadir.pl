# Copyright (c) 2026, rlock developers
#
# The holds file (pg_stat_tmp/rlock_holds) releases only its own server's
# locks.  Server A holds locks (default lease, here 60 s) and stops without
# releasing them (immediate shutdown: its worker leaves the file).  A copy
# of its data directory started at another path does not release them;
# neither does a copy whose file says it was written on another host (for
# that copy's own path).  Server A itself, started again on its own data
# directory (a new postmaster), releases them at once: waiters on another
# server, each with a 20 s budget (less than the lease left), get them
# within seconds.  Without the clean-up they time out.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use RlockTest;

my $redis = RlockTest::Redis->new;
# a 60 s lease: the copies' starts and stops take a fraction of it
my $a = RlockTest::new_node('orig', $redis, watchdog_timeout => '60s');
my $b = RlockTest::new_node('other', $redis, watchdog_timeout => '60s');

sub q1
{
	my ($s, $sql) = @_;
	my ($out, $err) = RlockTest::query_err($s, $sql);
	note "$sql: $err" if $err ne '';
	return $out;
}

my $h = $a->background_psql('postgres', on_error_stop => 0);
my $a_holder = RlockTest::holder_of($h);
q1($h, "SELECT rlock_acquire('cp_excl')");
q1($h, "SELECT rlock_write_acquire('cp_write')");
is($redis->cli('HEXISTS', 'cp_excl', $a_holder), '1', 'server A holds cp_excl');
# and many more: the clean-up goes in round trips of 1000
my $NBULK = 2500;
q1($h, "DO \$\$ BEGIN FOR i IN 1..$NBULK LOOP PERFORM rlock_acquire('cp_bulk_' || i); END LOOP; END \$\$");
is($redis->cli('EVAL', "return #redis.call('keys', 'cp_bulk_*')", 0), $NBULK,
	"server A holds $NBULK more");

my $file = $a->data_dir . '/pg_stat_tmp/rlock_holds';
ok( RlockTest::wait_until(
		sub {
			my $t = -e $file ? slurp_file($file) : '';
			my $nbulk = () = $t =~ /cp_bulk_/g;
			return index($t, 'cp_excl') >= 0 && index($t, 'cp_write') >= 0
			  && $nbulk == $NBULK;
		},
		30),
	'server A\'s worker lists its holds');

# no clean shutdown: the sessions release nothing, the worker leaves its file
$a->stop('immediate');
ok(-e $file, 'an immediate shutdown leaves the holds file');

# A copy of the data directory, as a new node at another path.
sub copy_of
{
	my ($name, $edit) = @_;
	my $c = PostgreSQL::Test::Cluster->new($name);
	rmdir($c->data_dir);
	# (cp -a: PostgreSQL 13's test modules have no PostgreSQL::Test::RecursiveCopy)
	PostgreSQL::Test::Utils::system_or_bail('cp', '-a', $a->data_dir, $c->data_dir);
	chmod(0700, $c->data_dir);
	$c->append_conf('postgresql.conf',
		"port = " . $c->port . "\nunix_socket_directories = '" . $c->host . "'\n");
	$edit->($c) if $edit;
	$c->start;
	ok( RlockTest::wait_until(
			sub {
				slurp_file($c->logfile) =~
				  /not releasing the \d+ locks listed in "pg_stat_tmp\/rlock_holds": another server wrote it/;
			},
			30),
		"$name: its worker refuses the holds of the original's file");
	ok( RlockTest::wait_until(
			sub {
				$c->safe_psql('postgres',
					"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'rlock watchdog'") eq '1';
			},
			30),
		"$name: its worker runs");
	is($redis->cli('HEXISTS', 'cp_excl', $a_holder) . $redis->cli('HEXISTS', 'cp_write', "$a_holder:write")
		  . $redis->cli('HEXISTS', "cp_bulk_$NBULK", $a_holder),
		'111', "$name: the original's locks are untouched");
	$c->stop('fast');
	return;
}

# at another path, on this host
copy_of('copy_path');

# its own path, but written on another host
copy_of(
	'copy_host',
	sub {
		my ($c) = @_;
		my $f = $c->data_dir . '/pg_stat_tmp/rlock_holds';
		my $t = slurp_file($f);
		my $dir = $c->data_dir;
		$t =~ s/^host .*$/host another-host.example/m or die 'no host line';
		$t =~ s/^datadir .*$/datadir $dir/m or die 'no datadir line';
		open(my $fh, '>', $f) or die "cannot write $f: $!";
		print $fh $t;
		close $fh;
	});
ok($redis->cli('PTTL', 'cp_excl') > 25_000,
	'the original\'s locks still have more lease left than the waiters wait');

# waiters on server B, 20 s each (less than the lease)
my %w;
foreach my $sql ("SELECT rlock_acquire('cp_excl', '1 minute')",
	"SELECT rlock_write_acquire('cp_write', '1 minute')")
{
	$w{$sql} = $b->background_psql('postgres', on_error_stop => 0);
	RlockTest::start_bg($w{$sql}, "SET lock_timeout = '20s'; $sql");
}
RlockTest::wait_for_rlock_waiters($b, 'postgres', 2);

# server A again, on its own data directory: a new postmaster
my $t_start = time();
$a->start;
note sprintf('server A started in %.2f s', time() - $t_start);
foreach my $sql (sort keys %w)
{
	RlockTest::wait_until(sub { RlockTest::bg_done($w{$sql}) }, 30);
	my $took = time() - $t_start;
	my ($out, $err, $state) = RlockTest::bg_result($w{$sql});
	is($state, '00000', "server B's waiter got it: $sql") or diag($err);
	ok($took < 10,
		sprintf('within 10 s of server A\'s start command (%.2f s)', $took));
}
# (the clean-up may still be going when the waiters have theirs)
ok( RlockTest::wait_until(
		sub {
			slurp_file($a->logfile) =~
			  /crash clean-up released @{[ $NBULK + 2 ]} locks of instance/;
		},
		30),
	'server A releases its own holds from before the shutdown, and says so');
is($redis->cli('EVAL', "return #redis.call('keys', 'cp_bulk_*')", 0), 0,
	"all $NBULK others too");
note sprintf('%d locks released %.2f s after server A\'s start command',
	$NBULK + 2, time() - $t_start);

$_->quit foreach values %w;
done_testing();
