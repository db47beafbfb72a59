#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The perl plugin's bad input: a sub that dies gives the client EIO, or
# the errno the script chose with Nbdkit::set_error (a number or $!),
# the same as Debian's nbdkit 1.32 host gives; a pread that returns
# undef, a reference or too few bytes, and a get_size that returns no
# integer are EIO too, and each is one log line naming the script and
# the sub; the server stays up and serves the next request.  A script
# that does not parse, lacks a required sub, dies at start-up or in
# config, or is given a parameter it cannot take: one line naming it,
# exit 1.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/perl-lua-compare.sh"
requires test -f "$abs_top_builddir/plugins/perl/.libs/nbdkit-perl-plugin.so"

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
start_fails ()
{
  local what="$1" want="$2"
  shift 2
  if t "$NBDKIT" -U - perl "$@" --run true > "$tmpdir/out" 2> "$tmpdir/err"
  then
    fail "$what: the server started"
  fi
  cat "$tmpdir/err"
  grep -q -- "$want" "$tmpdir/err" || fail "$what: no line '$want'"
}
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
