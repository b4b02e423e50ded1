
# Copyright (c) 2026, rlock developers

#
# The documentation's code blocks, as the tests read them (SPEC.md 12: the
# docs cannot rot).  Every fenced block of README.md and doc/*.md is found
# with its file, line and language; a block may be described by a comment
# on the line just above its fence:
#
#   <!-- rlock-doc: name=recipe-no-overlap run-by=070_recipes -->
#   ```sql
#   ...
#   ```
#
# Keys (all optional): name (unique across the docs; a test fetches the
# block by it), run-by (the TAP file, without .pl, that runs the block
# because it needs a fault, pg_cron or a second server: the scratch-server
# test leaves it to that file, and test/run's docs check verifies that the
# file names the block), and whatever else a test reads (error=SQLSTATE, a
# block expected to fail with it).  A value has no spaces.
#
package RlockTest::Docs;

use strict;
use warnings;

use Carp;
use File::Basename qw(dirname);
use Cwd qw(abs_path);

# the checkout's root: test/perl/RlockTest/ is three levels down
our $ROOT = abs_path(dirname(__FILE__) . '/../../..');

# README.md first, then doc/*.md in name order (paths relative to the root)
sub files
{
	my @files = ('README.md');
	push @files, map { s{^\Q$ROOT\E/}{}r } sort glob("$ROOT/doc/*.md");
	return @files;
}

# every fenced block: hashrefs { file, line (of the fence), lang, text,
# attrs => { key => value } }
sub blocks
{
	my @blocks;
	for my $file (files())
	{
		open my $fh, '<', "$ROOT/$file" or croak "cannot read $ROOT/$file: $!";
		my @lines = <$fh>;
		close $fh;
		my $i = 0;
		while ($i < @lines)
		{
			if ($lines[$i] =~ /^(\s*)(```+|~~~+)\s*([\w+-]*)/)
			{
				my ($indent, $fence, $lang) = ($1, $2, $3);
				my %attrs;
				if ($i > 0 && $lines[ $i - 1 ] =~ /^\s*<!--\s*rlock-doc:(.*?)-->/)
				{
					for my $kv (split ' ', $1)
					{
						my ($k, $v) = split /=/, $kv, 2;
						$attrs{$k} = $v // 1;
					}
				}
				my $start = $i + 1;
				my $text = '';
				$i++;
				while ($i < @lines && $lines[$i] !~ /^\s*\Q$fence\E\s*$/)
				{
					my $l = $lines[$i];
					$l =~ s/^\Q$indent\E// if length $indent;
					$text .= $l;
					$i++;
				}
				push @blocks,
				  {
					file => $file,
					line => $start,
					lang => $lang,
					text => $text,
					attrs => \%attrs
				  };
			}
			$i++;
		}
	}
	return @blocks;
}

# the text of the block named $name (dies unless exactly one has it)
sub block
{
	my ($name) = @_;
	my @found = grep { ($_->{attrs}{name} // '') eq $name } blocks();
	croak "no documentation block is named \"$name\"" unless @found;
	croak "documentation blocks named \"$name\": "
	  . join(', ', map { "$_->{file}:$_->{line}" } @found)
	  if @found > 1;
	return $found[0]{text};
}

# the blocks of one language (default sql)
sub sql_blocks
{
	my ($lang) = @_;
	$lang //= 'sql';
	return grep { $_->{lang} eq $lang } blocks();
}

1;
