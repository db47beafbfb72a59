#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The perl plugin's memory stays flat: after a first batch of 20000
# requests (reads and writes) and 300 connections warms the interpreter
# up, a second batch as big must not grow the server's resident size
# by more than 1 MiB.
# It would catch the arguments of each call (mortal Perl values) made
# outside the call's scope, which no scope of an embedded interpreter
# ever frees: they grew the server by about 150 bytes per request,
# 3 MiB per batch here; or a handle not released at close.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh
requires test -f "$abs_top_builddir/plugins/perl/.libs/nbdkit-perl-plugin.so"
skip_under_sanitizers "RSS there is ASan's quarantine and shadow memory, not the plugin's"

cat > "$tmpdir/flat.pl" <<'PL'
my $disk = "\0" x 65536;
# A handle that costs 8 KiB, so that handles never released show.
sub open { return { pad => "x" x 8192 }; }
sub get_size { return length ($disk); }
sub can_write { return 1; }
sub pread { my ($h, $c, $o) = @_; return substr ($disk, $o, $c); }
sub pwrite { my ($h, $b, $o) = @_; substr ($disk, $o, length $b) = $b; }
PL
start_server perl "$tmpdir/flat.pl"
rss () { awk '$1 == "VmRSS:" { print $2 }' "/proc/$server_pid/status"; }
# Requests, and connections (each an open and a close, whose handle
# must be released).
batch='
for i in range(10000):
    h.pread(512, (i * 512) % 65024)
    h.pwrite(b"x" * 16, (i * 16) % 65520)
for i in range(300):
    c = nbd.NBD()
    c.connect_uri(h.get_uri())
    c.pread(512, 0)
    c.shutdown()
'
t nbdsh -u "$uri" -c "$batch" || fail "the first batch failed"
before=$(rss)
t nbdsh -u "$uri" -c "$batch" || fail "the second batch failed"
after=$(rss)
echo "VmRSS: $before KiB after the first batch, $after KiB after the second"
[ "$after" -le $(( before + 1024 )) ] ||
  fail "the server grew by $(( after - before )) KiB over a batch"
