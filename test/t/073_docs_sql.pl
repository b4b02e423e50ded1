
# Copyright (c) 2026, rlock developers
#
# The documentation's SQL runs (SPEC.md section 12: the docs cannot rot).
# Every ```sql block of README.md and doc/*.md (RlockTest::Docs) that no
# other test runs is executed here, as printed, against a scratch
# PostgreSQL with rlock and a Redis: each file's blocks in order, in a
# database of the file's own (README's in postgres), each block in one psql
# run with ON_ERROR_STOP, one check per block named by file:line.  A block
# marked error=SQLSTATE must fail with that SQLSTATE; a block marked
# setup=NAME gets this file's %setup{NAME} first, in the same psql run (the
# objects its prose assumes: a procedure, tables).  A block marked
# run-by=NNN_x is left to test/t/NNN_x.pl, which must exist and name the
# block; run-by=073_docs_sql blocks are run below, one by one:
#   - quick-start (README): two sessions in databases billing and
#     reporting, each statement's result checked against its comment
#     ("-- false: ...", "-- true");
#   - latch-report (doc/functions.md): the report awaits the latch with one
#     load left, the test counts that one down, and the report is built.
# and after every file has run, the quick start again in those databases
# shows what doc/configuration.md's key-prefix-per-database block says:
# with billing's prefix set, the two no longer exclude each other.
# Blocks that call pg_cron (cron.) run only where pg_cron is installed
# (skipped otherwise, as 060 is); the scratch server then preloads it.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use RlockTest;
use RlockTest::Docs;

my $pgconfig = $ENV{PG_CONFIG} // 'pg_config';
my $pkglibdir = `$pgconfig --pkglibdir`;
chomp $pkglibdir;
my $have_cron = -f "$pkglibdir/pg_cron.so";

# What the prose of a block assumes, by the block's setup= value: stand-ins
# for the application's own objects, nothing of rlock's.
my %setup = (
	run_import =>
	  'CREATE PROCEDURE run_import() LANGUAGE sql AS $$ SELECT 1 $$;',
	balances => 'CREATE TABLE ledger (account bigint, amount numeric);
		CREATE TABLE balances (account bigint PRIMARY KEY, total numeric);
		INSERT INTO ledger VALUES (42, 10), (42, 5);
		INSERT INTO balances VALUES (42, 0);',
	# ten more of the twelve loads counted down (one is left), and the
	# report's procedure
	latch_loaded => q{SELECT rlock_latch_count_down('loads-2026-11-26')
		  FROM generate_series(1, 10);
		CREATE TABLE report_built (at timestamptz);
		CREATE PROCEDURE build_report() LANGUAGE sql
		  AS $$ INSERT INTO report_built VALUES (now()) $$;},);

my $redis = RlockTest::Redis->new;
my $node = RlockTest::new_node('docs', $redis,
	dbs => [ 'postgres', 'billing', 'reporting' ]);
if ($have_cron)
{
	$node->append_conf('postgresql.conf',
		"shared_preload_libraries = 'rlock,pg_cron'\n"
		  . "cron.database_name = 'postgres'\n"
		  . "cron.host = '" . $node->host . "'\n");
	$node->restart;
	$node->safe_psql('postgres', 'CREATE EXTENSION pg_cron');
}

my @blocks = RlockTest::Docs::sql_blocks();
ok(scalar(grep { $_->{file} eq 'README.md' } @blocks) >= 1
	  && scalar(grep { $_->{file} ne 'README.md' } @blocks) >= 10,
	'the docs have SQL blocks in README.md and doc/ ('
	  . scalar(@blocks)
	  . ' in all)');

# names are unique (a test fetches a block by its name)
my %named;
push @{ $named{ $_->{attrs}{name} } }, "$_->{file}:$_->{line}"
  for grep { defined $_->{attrs}{name} } RlockTest::Docs::blocks();
is_deeply([ map { "$_ at " . join(', ', @{ $named{$_} }) }
		grep { @{ $named{$_} } > 1 } sort keys %named ],
	[], 'no two documentation blocks have one name');

# a database per file, rlock created in it
sub db_of
{
	my ($file) = @_;
	return 'postgres' if $file eq 'README.md';
	my $db = 'docs_' . ($file =~ s{^doc/}{}r =~ s{\.md$}{}r =~ s{\W}{_}gr);
	if (!$node->safe_psql('postgres',
			"SELECT count(*) FROM pg_database WHERE datname = '$db'"))
	{
		$node->safe_psql('postgres', "CREATE DATABASE $db");
		$node->safe_psql($db, 'CREATE EXTENSION rlock');
	}
	return $db;
}

# run one block as printed (after its setup) in one psql run
sub run_block
{
	my ($b) = @_;
	my $where = "$b->{file}:$b->{line}";
	my $attrs = $b->{attrs};
	my $sql = '';
	if (defined $attrs->{setup})
	{
		my $s = $setup{ $attrs->{setup} };
		if (!defined $s)
		{
			fail("$where: setup=$attrs->{setup} is known to this test");
			return;
		}
		$sql .= "$s\n";
	}
	# a block that waits forever (an await nobody ends) fails, not hangs
	$sql = "SET statement_timeout = '2min';\n$sql"
	  . "\\set VERBOSITY verbose\n" . $b->{text};
	my ($ret, $out, $err) = $node->psql(db_of($b->{file}), $sql,
		on_error_stop => 1);
	if (defined $attrs->{error})
	{
		my ($state) = $err =~ /ERROR:\s+([0-9A-Z]{5}):/;
		is($state // "none (exit $ret)", $attrs->{error},
			"$where fails with SQLSTATE $attrs->{error}")
		  or diag($err);
	}
	else
	{
		ok($ret == 0 && $err !~ /ERROR:/, "$where runs as printed")
		  or diag("psql exit $ret\n$err");
	}
	return;
}

# the quick start's sessions, and the results its comments promise
sub quick_start
{
	my ($text, $label, $override) = @_;
	my %sess;
	my $db;
	for my $line (split /\n/, $text)
	{
		if ($line =~ /^--\s*in (\w+):/)
		{
			$db = $1;
			$sess{$db} //= $node->background_psql($db, on_error_stop => 0);
			next;
		}
		next unless $line =~ /^(SELECT .*?;)\s*(?:--\s*(\S+))?/;
		my ($stmt, $said) = ($1, $2 // '');
		$said =~ s/[:,]$//;
		my $want =
		    $said eq 'true' ? 't'
		  : $said eq 'false' ? 'f'
		  : '';
		$want = $override->($db, $stmt, $want) if $override;
		my ($out, $err) = RlockTest::query_err($sess{$db}, $stmt);
		is($out . ($err =~ /ERROR/ ? " $err" : ''),
			$want, "$label: in $db, $stmt" . ($want eq '' ? '' : " is $want"));
	}
	$_->quit for values %sess;
	return;
}

# the report block awaits the latch while the last load is still to come
sub latch_report
{
	my ($b, $where) = @_;
	my $db = db_of($b->{file});
	$node->safe_psql($db, $setup{ $b->{attrs}{setup} });
	is($node->safe_psql($db, "SELECT rlock_latch_count('loads-2026-11-26')"),
		'1', "$where: one load left before the report starts");
	my $bg = $node->background_psql($db, on_error_stop => 0);
	$bg->query_until(qr/awaiting\n/,
		"\\echo awaiting\n$b->{text}\n\\echo report over\n");
	ok( RlockTest::wait_until(
			sub {
				$node->safe_psql($db,
					"SELECT count(*) FROM pg_stat_activity WHERE state = 'active'"
					  . " AND query LIKE 'SELECT rlock_latch_await(%'") eq '1';
			}),
		"$where: the report awaits the latch");
	is( $node->safe_psql(
			$db, "SELECT rlock_latch_count_down('loads-2026-11-26')"),
		'0', "$where: the last load counts the latch down to 0");
	$bg->query_until(qr/report over\n/, '');
	my $err = $bg->{stderr};
	$bg->quit;
	is($node->safe_psql($db, 'SELECT count(*) FROM report_built')
		  . ($err =~ /ERROR/ ? " $err" : ''),
		'1', "$where: the report was built once every load was done");
	return;
}

for my $b (@blocks)
{
	my $where = "$b->{file}:$b->{line}";
	my $by = $b->{attrs}{'run-by'};
	if (defined $by && $by ne '073_docs_sql')
	{
		my $name = $b->{attrs}{name} // '';
		my $t = "$RlockTest::Docs::ROOT/test/t/$by.pl";
		ok(-f $t && $name ne '' && slurp_file($t) =~ /\Q$name\E/,
			"$where (\"$name\") is run by test/t/$by.pl, which names it");
		next;
	}
	if (defined $by)
	{
		if (($b->{attrs}{name} // '') eq 'quick-start')
		{
			quick_start($b->{text}, $where);
		}
		elsif (($b->{attrs}{name} // '') eq 'latch-report')
		{
			latch_report($b, $where);
		}
		else
		{
			fail("$where: run-by=073_docs_sql, but this test knows no block "
				  . ($b->{attrs}{name} // '(unnamed)'));
		}
		next;
	}
	if ($b->{text} =~ /\bcron\.\w+\(/ && !$have_cron)
	{
	  SKIP:
		{
			skip "$where calls pg_cron, not installed in $pkglibdir", 1;
		}
		next;
	}
	run_block($b);
}

# jobs a recipe scheduled do not run on
$node->safe_psql('postgres', 'SELECT cron.unschedule(jobid) FROM cron.job')
  if $have_cron;

# doc/configuration.md's key-prefix-per-database block ran (billing has a
# prefix now): the quick start no longer excludes, reporting's first try
# succeeds while billing holds the lock
like(
	$node->safe_psql('billing', 'SHOW rlock.key_prefix'),
	qr/^billing:$/,
	'the key_prefix block set a prefix for billing');
quick_start(
	RlockTest::Docs::block('quick-start'),
	'with billing prefixed',
	sub {
		my ($db, $stmt, $want) = @_;
		# reporting's first try: no exclusion across the prefix
		return $want eq 'f' ? 't' : $want;
	});

done_testing();
