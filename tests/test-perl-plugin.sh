#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Same script, same bytes: the perl plugin's RAM disk example, run by
# Debian's nbdkit 1.32 perl host and by ours, gives the client the same
# size, flags, write outcomes, map and bytes read back.  It would catch
# a callback called with the wrong arguments (offsets, counts, flags),
# a wrong default for can_write/can_flush/can_trim, a broken zero or
# trim, a script= magic key that does not work ("nbdkit perl FILE").
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/perl-lua-compare.sh"
requires test -f "$abs_top_builddir/plugins/perl/.libs/nbdkit-perl-plugin.so"

ex="$abs_top_srcdir/plugins/perl/examples/ramdisk.pl"
same_script ramdisk perl "$ex" size=3145728
same_script ramdisk-odd perl script="$ex" size=1049088

# A script with only the three required subs: read-only, no flush, no
# trim, and reads go through as pread returned them.
cat > "$tmpdir/minimal.pl" <<'PL'
sub open { return 1; }
sub get_size { return 2 * 1024 * 1024 + 512; }
sub pread {
    my ($h, $count, $offset) = @_;
    my $s = "";
    for (my $o = $offset; $o < $offset + $count; $o += 8) {
        $s .= pack ("Q>", $o);
    }
    return substr ($s, 0, $count);
}
PL
same_script minimal perl "$tmpdir/minimal.pl"

# Flags from the can_* subs, and a zero sub that declines with
# EOPNOTSUPP (the server writes zeroes instead): both hosts agree.
cat > "$tmpdir/flags.pl" <<'PL'
use POSIX ();
my $disk = "\x55" x (1024 * 1024);
sub open { return {}; }
sub get_size { return length ($disk); }
sub is_rotational { return 1; }
sub can_write { return 1; }
sub can_flush { return 1; }
sub can_trim { return 0; }
sub pread { my ($h, $c, $o) = @_; return substr ($disk, $o, $c); }
sub pwrite { my ($h, $b, $o) = @_; substr ($disk, $o, length $b) = $b; }
sub flush { }
sub trim { die "trim must not be called"; }
sub zero {
    Nbdkit::set_error (POSIX::EOPNOTSUPP);
    die "no native zero";
}
PL
same_script flags perl "$tmpdir/flags.pl"

# Where Debian's 1.32 host is wrong: a script with pwrite but no
# can_write is served read-only by it, although its page says the
# callbacks work as in C, where a plugin with pwrite is writable.
# Ours serves it writable.
cat > "$tmpdir/pwrite-only.pl" <<'PL'
my $disk = "\0" x 65536;
sub open { return {}; }
sub get_size { return length ($disk); }
sub pread { my ($h, $c, $o) = @_; return substr ($disk, $o, $c); }
sub pwrite { my ($h, $b, $o) = @_; substr ($disk, $o, length $b) = $b; }
PL
t "$NBDKIT" -U - perl "$tmpdir/pwrite-only.pl" --run 'nbdsh -u "$uri" -c "
assert not h.is_read_only()
h.pwrite(b\"abc\", 100)
assert h.pread(3, 100) == b\"abc\"
"' || fail "a script with pwrite and no can_write is not writable"

# --dump-plugin: the same callbacks, thread model and perl_version as
# Debian's host (the server's own lines aside), and the script's
# dump_plugin sub runs after perl_version.
printf 'sub dump_plugin { print "ramdisk_extra=1\\n"; }\n' > "$tmpdir/dump.pl"
cat "$ex" >> "$tmpdir/dump.pl"
filter='^(path|struct_size|magic_config_key|ramdisk_extra)='
diff -u <("$ref_nbdkit" perl "$tmpdir/dump.pl" --dump-plugin | grep -Ev "$filter") \
        <(t "$NBDKIT" perl "$tmpdir/dump.pl" --dump-plugin | grep -Ev "$filter") ||
  fail "--dump-plugin differs from Debian's (- Debian's, + ours)"
t "$NBDKIT" perl "$tmpdir/dump.pl" --dump-plugin | tail -2 | tr '\n' ' ' |
  grep -Eqx 'perl_version=5\.[0-9.]+ ramdisk_extra=1 ' ||
  fail "--dump-plugin does not end with perl_version and the script's lines"

# One interpreter, serialize_all_requests: two clients with 16 requests
# in flight each never have two subs running at once (the script
# counts), and copy the same bytes as from Debian's host.
cat > "$tmpdir/serial.pl" <<'PL'
use Time::HiRes ();
my $inflight = 0;
sub open { return 1; }
sub get_size { return 4 * 1024 * 1024; }
sub pread {
    my ($h, $count, $offset) = @_;
    die "two subs at once\n" if $inflight++;
    Time::HiRes::usleep (1000);
    my $s = pack ("Q>", $offset) x ($count / 8);
    $inflight--;
    return $s;
}
PL
copy2='for i in 1 2; do
  nbdcopy --requests=16 "$uri" - | sha256sum > '"$tmpdir"'/copy.$i &
done; wait; cat '"$tmpdir"'/copy.1 '"$tmpdir"'/copy.2'
t "$NBDKIT" -U - perl "$tmpdir/serial.pl" --run "$copy2" > "$tmpdir/serial.ours" ||
  fail "parallel clients failed"
t "$ref_nbdkit" -U - perl "$tmpdir/serial.pl" --run "$copy2" > "$tmpdir/serial.ref" ||
  fail "parallel clients failed with Debian's nbdkit"
cat "$tmpdir/serial.ours"
[ "$(sort -u "$tmpdir/serial.ours" | wc -l)" -eq 1 ] &&
  cmp "$tmpdir/serial.ours" "$tmpdir/serial.ref" ||
  fail "parallel clients copied other bytes than with Debian's nbdkit"

# The flags and the Nbdkit:: helpers: pwrite sees $Nbdkit::FLAG_FUA only
# on a FUA write, zero sees $Nbdkit::FLAG_MAY_TRIM unless the client
# asked for no hole, flush gets 0; the constants have nbdkit's values;
# Nbdkit::debug reaches the log under -v.  Both hosts agree.
cat > "$tmpdir/flagbits.pl" <<'PL'
my @seen;
sub open { return 1; }
sub get_size { return 65536; }
sub can_write { return 1; }
sub can_flush { return 1; }
sub pread { return join (",", @seen) . (" " x $_[1]); }
sub pwrite { my ($h, $b, $o, $f) = @_; push @seen, "w$o:$f"; }
sub zero { my ($h, $c, $o, $f) = @_; push @seen, "z$o:$f"; }
sub flush { my ($h, $f) = @_; push @seen, "f:$f";
  Nbdkit::debug ("flagbits flush, constants " . join (" ",
    $Nbdkit::FLAG_MAY_TRIM, $Nbdkit::FLAG_FUA, $Nbdkit::FLAG_REQ_ONE,
    $Nbdkit::FLAG_FAST_ZERO, $Nbdkit::FUA_NONE, $Nbdkit::FUA_EMULATE,
    $Nbdkit::FUA_NATIVE, $Nbdkit::CACHE_NONE, $Nbdkit::CACHE_EMULATE,
    $Nbdkit::CACHE_NATIVE, $Nbdkit::EXTENT_HOLE, $Nbdkit::EXTENT_ZERO)); }
PL
flagclient='nbdsh -u "$uri" -c "
h.pwrite(b\"a\", 0)
h.pwrite(b\"b\", 4096, nbd.CMD_FLAG_FUA)
h.zero(512, 8192)
h.zero(512, 8704, nbd.CMD_FLAG_NO_HOLE)
h.flush()
print(h.pread(64, 0).decode().strip())
"'
t "$NBDKIT" -v -U - perl "$tmpdir/flagbits.pl" --run "$flagclient" \
  > "$tmpdir/flagbits.ours" 2> "$tmpdir/flagbits.err" ||
  fail "the flags script failed"
t "$ref_nbdkit" -U - perl "$tmpdir/flagbits.pl" --run "$flagclient" \
  > "$tmpdir/flagbits.ref" || fail "the flags script failed with Debian's nbdkit"
cat "$tmpdir/flagbits.ours"
cmp "$tmpdir/flagbits.ours" "$tmpdir/flagbits.ref" ||
  fail "the subs saw other flags than with Debian's host: $(cat "$tmpdir/flagbits.ref")"
# FUA here is emulated by a flush after the write, so pwrite sees 0.
grep -qx 'w0:0,w4096:0,f:0,z8192:1,z8704:0,f:0' "$tmpdir/flagbits.ours" ||
  fail "unexpected flags"
grep -q 'debug: flagbits flush, constants 1 2 4 8 0 1 2 0 1 2 1 2$' \
  "$tmpdir/flagbits.err" || fail "no Nbdkit::debug line with the constants"

# A script run as a program: "#!.../nbdkit perl" in its first line
# makes the kernel run "nbdkit perl SCRIPT ARGS", the magic key at work.
printf '#!%s perl\nsub open { 1 } sub get_size { 12345 }\nsub pread { "\\0" x $_[1] }\n' \
  "$NBDKIT" > "$tmpdir/shebang.pl"
chmod +x "$tmpdir/shebang.pl"
[ "$(t "$tmpdir/shebang.pl" -U - --run 'nbdinfo --size "$uri"')" = 12345 ] ||
  fail "a shebang script does not serve"

# BEGIN runs when the script is loaded, END when the server exits, as in
# a perl program (and in Debian's host).
cat > "$tmpdir/end.pl" <<PL
BEGIN { \$started = 1; }
END { open (my \$f, ">", "$tmpdir/end.mark") or die; print \$f "end \$started\\n"; }
sub open { 1 } sub get_size { 1 } sub pread { "\\0" x \$_[1] }
PL
t "$NBDKIT" -U - perl "$tmpdir/end.pl" --run 'nbdinfo --size "$uri" >/dev/null' ||
  fail "the END script did not serve"
[ "$(cat "$tmpdir/end.mark" 2>/dev/null)" = "end 1" ] ||
  fail "END did not run at exit (or BEGIN at load)"
