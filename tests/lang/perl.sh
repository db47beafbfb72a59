# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tests/lang/perl.sh: the perl host's part of lang/host-test.sh (libperl).
probe_message="no room]"

# memory: it would catch the arguments of each call (mortal Perl
# values) made outside the call's scope, which no scope of an embedded
# interpreter ever frees: they grew the server by about 150 bytes per
# request, 3 MiB per batch; or a handle not released at close.
# lang_script NAME: the script NAME (probe, flat) on stdout.
lang_script ()
{
  case "$1" in
    probe) cat <<'PL'
use POSIX ();
sub config {
    my ($key, $value) = @_;
    Nbdkit::probe ("perlconf", 7, -3, "$key=$value");
}
sub open { return {}; }
sub get_size { return 1048576; }
sub pread {
    my ($h, $count, $offset) = @_;
    if ($offset == 8192) {
        Nbdkit::set_error (POSIX::ENOSPC);
        die "no room\n";
    }
    select (undef, undef, undef, 0.2);
    Nbdkit::probe ("perlread", $count, -$offset, "read $count at $offset");
    return "\0" x $count;
}
PL
      ;;
    flat) cat <<'PL'
my $disk = "\0" x 65536;
# A handle that costs 8 KiB, so that handles never released show.
sub open { return { pad => "x" x 8192 }; }
sub get_size { return length ($disk); }
sub can_write { return 1; }
sub pread { my ($h, $c, $o) = @_; return substr ($disk, $o, $c); }
sub pwrite { my ($h, $b, $o) = @_; substr ($disk, $o, length $b) = $b; }
PL
      ;;
    # The server calls of nbdkit 1.34..1.40 (tests/lang/server-calls.sh).
    calls) cat <<'PL'
my ($p, @delay) = (0, 0, 0);
sub config {
    my ($key, $value) = @_;
    if ($key eq "prob") { $p = Nbdkit::parse_probability ("prob", $value); }
    elsif ($key eq "delay") { @delay = Nbdkit::parse_delay ("delay", $value); }
    else { die "unknown parameter $key\n"; }
}
sub open { return 1; }
sub get_size { return 65536; }
sub pread {
    my ($h, $count, $offset) = @_;
    Nbdkit::disconnect (1) if $offset == 4096;
    Nbdkit::disconnect (0) if $offset == 8192;
    my $line = "";
    $line = sprintf ("%d %d %d", int ($p * 1000000 + 0.5), @delay)
        if $offset == 12288;
    return substr ($line . (" " x $count), 0, $count);
}
PL
      ;;
    *) fail "no perl script $1" ;;
  esac
}

# Same script, same bytes (after host-test.sh's same_example).  The
# example would catch a callback called with the wrong arguments
# (offsets, counts, flags), a wrong default for
# can_write/can_flush/can_trim, a broken zero or trim, a script= magic
# key that does not work ("nbdkit perl FILE").
lang_plugin ()
{
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
# Debian's host (the server's own lines, and the release each names,
# aside), and the script's
# dump_plugin sub runs after perl_version.
printf 'sub dump_plugin { print "ramdisk_extra=1\\n"; }\n' > "$tmpdir/dump.pl"
cat "$ex" >> "$tmpdir/dump.pl"
filter='^(path|struct_size|magic_config_key|ramdisk_extra|version)='
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
serial_copy "$tmpdir/serial.pl"

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
# FUA here is emulated by a flush after the write, so pwrite sees 0.
flag_bits "$tmpdir/flagbits.pl" 'w0:0,w4096:0,f:0,z8192:1,z8704:0,f:0' \
  'debug: flagbits flush, constants 1 2 4 8 0 1 2 0 1 2 1 2$'

# A script run as a program: "#!.../nbdkit perl" in its first line
# makes the kernel run "nbdkit perl SCRIPT ARGS", the magic key at work.
shebang_serves 'sub open { 1 } sub get_size { 12345 }
sub pread { "\0" x $_[1] }'

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
}

# The perl plugin's bad input: a sub that dies gives the client EIO, or
# the errno the script chose with Nbdkit::set_error (a number or $!),
# the same as Debian's nbdkit 1.32 host gives; a pread that returns
# undef, a reference or too few bytes, and a get_size that returns no
# integer are EIO too, and each is one log line naming the script and
# the sub; the server stays up and serves the next request.  A script
# that does not parse, lacks a required sub, dies at start-up or in
# config, or is given a parameter it cannot take: one line naming it,
# exit 1.
lang_errors ()
{
script="$tmpdir/err.pl"
cat > "$script" <<'PL'
use POSIX ();
sub open { return { n => 0 }; }
sub get_size { return 1048576; }
sub can_write { return 1; }
sub pread {
    my ($h, $count, $offset) = @_;
    die "the disk is on fire\n" if $offset == 512;
    if ($offset == 1024) { Nbdkit::set_error (POSIX::ENOSPC); die "full"; }
    if ($offset == 1536) { $! = POSIX::EPERM; Nbdkit::set_error ($!); die; }
    return undef if $offset == 2048;
    return [1, 2] if $offset == 2560;
    return "short" if $offset == 3072;
    return "\x01" x ($count * 2) if $offset == 3584;
    return "\0" x $count;
}
sub pwrite {
    my ($h, $buf, $offset) = @_;
    Nbdkit::set_error (POSIX::EROFS);
    die "read-only today";
}
PL

cat > "$tmpdir/client.py" <<'PY'
def err(fn):
    try:
        fn()
    except nbd.Error as e:
        return e.errno
    return "ok"
for off in (0, 512, 1024, 1536, 2048, 2560, 3072, 3584, 0):
    print("pread", off, err(lambda: h.pread(512, off)))
print("pread-long", h.pread(512, 3584) == b"\x01" * 512)
print("pwrite", err(lambda: h.pwrite(b"x" * 512, 0)))
PY
run_errors ()
{
  local name="$1" srv="$2"
  t "$srv" -U - perl "$script" --run "nbdsh -u \"\$uri\" -c - < $tmpdir/client.py" \
    > "$tmpdir/out.$name" 2> "$tmpdir/err.$name" || {
    cat "$tmpdir/out.$name" "$tmpdir/err.$name"
    fail "$name: the error script's run failed"
  }
}
run_errors ours "$NBDKIT"
run_errors ref "$ref_nbdkit"
cat "$tmpdir/out.ours" "$tmpdir/err.ours"
diff -u "$tmpdir/out.ref" "$tmpdir/out.ours" ||
  fail "the client saw other errors than with Debian's nbdkit (- Debian's, + ours)"
grep -qx 'pread 512 EIO' "$tmpdir/out.ours" || fail "a die is not EIO"
grep -qx 'pread 1024 ENOSPC' "$tmpdir/out.ours" || fail "set_error is lost"
grep -qx 'pread 1536 EPERM' "$tmpdir/out.ours" || fail 'set_error ($!) is lost'
grep -qx 'pwrite EPERM' "$tmpdir/out.ours" || fail "EROFS is not EPERM"
for want in 'pread: the disk is on fire$' 'pread: full at .* line 8\.$' \
            'pread: Died at .* line 9\.$' \
            'pread: returned a value that is not a string' \
            'pread: returned 5 bytes, expected 512' \
            'pwrite: read-only today at'; do
  n=$(grep -c "^nbdkit: perl\[[0-9]*\]: error: $script: $want" \
        "$tmpdir/err.ours") || true
  [ "$n" -ge 1 ] || fail "no log line '$script: $want'"
done
[ "$(grep -c 'pread: returned a value that is not a string' \
     "$tmpdir/err.ours")" -eq 2 ] || fail "undef and [1, 2] are not both refused"

# A get_size that returns no integer: the client cannot connect (Debian's
# host reads "lots" as 0, a disk of no bytes); the next one can.
cat > "$tmpdir/size.pl" <<'PL'
my $sizes = 0;
sub open { return 1; }
sub get_size { return $sizes++ == 0 ? "lots" : 1048576; }
sub pread { return "\0" x $_[1]; }
PL
t "$NBDKIT" -U - perl "$tmpdir/size.pl" --run '
  ! nbdinfo --size "$uri" || exit 9
  [ "$(nbdinfo --size "$uri")" = 1048576 ]' 2> "$tmpdir/err" ||
  fail "a bad get_size: the first client connected, or the second did not"
cat "$tmpdir/err"
grep -q "error: $tmpdir/size.pl: get_size: returned a value that is not an integer" \
  "$tmpdir/err" || fail "no get_size line"

# Start-up errors: exit 1, and a line that names the script.
printf 'sub open {\n' > "$tmpdir/syntax.pl"
start_fails "a syntax error" "error: $tmpdir/syntax.pl: the script does not parse" \
  "$tmpdir/syntax.pl"
printf 'sub open { 1 }\nsub get_size { 1 }\n' > "$tmpdir/nopread.pl"
start_fails "no pread" "$tmpdir/nopread.pl: the script does not define the required sub pread" \
  "$tmpdir/nopread.pl"
printf 'die "cannot start\\n";\n' > "$tmpdir/dies.pl"
start_fails "a script dying at start-up" "$tmpdir/dies.pl: the script failed" \
  "$tmpdir/dies.pl"
start_fails "a parameter without sub config" \
  "$script: the script takes no parameters (no sub config), but was given a=b" \
  "$script" a=b
cat > "$tmpdir/config.pl" <<'PL'
sub config { my ($k, $v) = @_; die "bad key $k\n" if $k ne "size"; }
sub open { 1 } sub get_size { 1 } sub pread { "\0" }
PL
start_fails "config dying" "$tmpdir/config.pl: config: bad key colour$" \
  "$tmpdir/config.pl" colour=blue
start_fails "no script" "the first parameter must be script=" foo=bar
start_fails "a missing script" "perl: error: $tmpdir/nosuch.pl: No such file or directory" \
  "$tmpdir/nosuch.pl"
}
