#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The ondemand plugin's export names, side by side with Debian's nbdkit
# 1.32 on the same directory: the list starts with "" and hides the
# file "default" (nbdkit-ondemand-plugin(1): "" is the file default),
# then follows directory order; a name is accepted or refused, and
# reported under its canonical name, as nbdkit does (a symbolic link
# is followed).  Where ours deliberately differs, as our page says:
# the list leaves out what cannot be opened (a directory, a FIFO), and
# a FIFO is refused where Debian's nbdkit serves it as an empty disk.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh truncate mkfifo
ref_nbdkit=/usr/bin/nbdkit
requires test -x "$ref_nbdkit"
requires test -f \
  /usr/lib/x86_64-linux-gnu/nbdkit/plugins/nbdkit-ondemand-plugin.so

d="$tmpdir/exports"
mkdir "$d" "$d/sub"
truncate -s 1M "$d/default" "$d/alpha" "$d/a.b" "$d/.hidden"
ln -s alpha "$d/lnk"
mkfifo "$d/pipe"
long=$(printf 'n%.0s' {1..256})
names=("" default alpha lnk new sub a.b .hidden x:y x/y "$long")

# The client: the list in the server's order, one line per name, then
# for each name "NAME ok CANONICAL SIZE" or "NAME refused ERRNO".
cat > "$tmpdir/client.py" <<'PY'
import sys
import nbd
uri = sys.argv[1]
with open(sys.argv[2]) as f:
    wanted = f.read().split("\n")[:-1]
h = nbd.NBD()
h.set_opt_mode(True)
h.connect_uri(uri)
names = []
h.opt_list(lambda n, desc: names.append(n))
h.opt_abort()
print("list %r" % names)
for n in wanted:
    h = nbd.NBD()
    h.set_opt_mode(True)
    h.set_full_info(True)
    h.connect_uri(uri)
    h.set_export_name(n)
    try:
        h.opt_go()
        print("%r ok %r %d" % (n, h.get_canonical_export_name(), h.get_size()))
        h.shutdown()
    except nbd.Error as e:
        print("%r refused %s" % (n, e.errno))
        h.opt_abort()
PY

# run SERVER [-r] NAMES...: the client's output through SERVER; the
# file made for "new" is removed after, so that both servers start
# equal.  wait=true: "" and default (alpha and lnk) are one file, and
# the server may not yet have seen the previous client go.
run ()
{
  local server="$1" ro=
  shift
  if [ "${1:-}" = -r ]; then ro=-r; shift; fi
  printf '%s\n' "$@" > "$tmpdir/names"
  [ $# -gt 0 ] || : > "$tmpdir/names"
  t "$server" $ro -U - ondemand dir="$d" 1M wait=true \
    command='truncate -s $size "$disk"' \
    --run "/usr/bin/python3 $tmpdir/client.py \"\$uri\" $tmpdir/names" \
    2>"$tmpdir/err" || { cat "$tmpdir/err"; fail "$server: the client failed"; }
  rm -f "$d/new"
}

run "$ref_nbdkit" "${names[@]}" > "$tmpdir/ref"
run "$NBDKIT" "${names[@]}" > "$tmpdir/ours"
cat "$tmpdir/ours"

# Debian's list: "" first, no "default", every valid name (sub and pipe
# too).  Ours: the same, in the same order, without sub and pipe.
ref_list=$(sed -n 's/^list //p' "$tmpdir/ref")
ours_list=$(sed -n 's/^list //p' "$tmpdir/ours")
/usr/bin/python3 - "$ref_list" "$ours_list" <<'PY' || fail "export lists differ"
import ast, sys
ref = ast.literal_eval(sys.argv[1])
ours = ast.literal_eval(sys.argv[2])
assert ref[0] == "" and "default" not in ref, "reference list %r" % ref
assert sorted(ref) == ["", "alpha", "lnk", "pipe", "sub"], ref
want = [n for n in ref if n not in ("pipe", "sub")]
assert ours == want, "ours %r, want %r (Debian's: %r)" % (ours, want, ref)
PY

# Each name: the same answer from both.
diff -u <(grep -v '^list ' "$tmpdir/ref") <(grep -v '^list ' "$tmpdir/ours") ||
  fail "the servers answer export names differently"
grep -qx "'' ok 'default' 1048576" "$tmpdir/ours" ||
  fail "the empty name is not the export 'default'"
grep -qx "'lnk' ok 'lnk' 1048576" "$tmpdir/ours" ||
  fail "a symbolic link in dir is not served"

# A FIFO: Debian's nbdkit serves an empty disk; ours refuses it, also
# read-only (where opening a FIFO would wait for a writer).
run "$NBDKIT" pipe | grep -qx "'pipe' refused ENOENT" ||
  fail "a FIFO in dir is not refused"
run "$NBDKIT" -r pipe | grep -qx "'pipe' refused ENOENT" ||
  fail "read-only: a FIFO in dir is not refused"

# The list does not depend on the file default existing.
rm "$d/default"
run "$NBDKIT" | grep -Eqx "list \['', '(alpha|lnk)', '(alpha|lnk)'\]" ||
  fail "without the file default, the list lacks ''"
