# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A RAM disk in Perl for nbdkit's perl plugin host:
#
#   nbdkit perl ramdisk.pl [size=SIZE]
#
# The disk is one Perl string of SIZE bytes (default 1 MiB), zero at
# start, shared by every connection and lost when the server exits.
use strict;
use warnings;

my $size = 1024 * 1024;
my $disk;

sub config
{
    my ($key, $value) = @_;
    die "unknown parameter $key\n" unless $key eq "size";
    die "size=$value: not a number of bytes\n" unless $value =~ /^\d+$/;
    $size = $value;
}

sub config_complete
{
    $disk = "\0" x $size;
}

sub open
{
    my $readonly = shift;
    Nbdkit::debug ("ramdisk open, readonly=" . ($readonly ? 1 : 0));
    return { readonly => $readonly };
}

sub get_size
{
    return length ($disk);
}

sub can_write { return 1; }
sub can_flush { return 1; }
sub can_trim { return 1; }

sub pread
{
    my ($h, $count, $offset, $flags) = @_;
    return substr ($disk, $offset, $count);
}

sub pwrite
{
    my ($h, $buf, $offset, $flags) = @_;
    substr ($disk, $offset, length ($buf)) = $buf;
}

sub zero
{
    my ($h, $count, $offset, $flags) = @_;
    substr ($disk, $offset, $count) = "\0" x $count;
}

sub trim
{
    my ($h, $count, $offset, $flags) = @_;
    substr ($disk, $offset, $count) = "\0" x $count;
}

sub flush
{
    my ($h, $flags) = @_;
}
