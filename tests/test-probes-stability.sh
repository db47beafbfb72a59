#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The probes' contract: tools/probes.stability gives every probe of the
# server and of every module a stability, and records the argument
# types of each Stable one.  The declarations must match it; then, in
# a copy of the declarations, a Stable probe whose argument type
# changed, one whose argument was dropped, one renamed away, and a new
# probe with no stability must each be refused.  nbdkit-probes(1)
# states every probe's stability from the same file.
source "$(dirname "$0")/functions.sh"
requires_cmd python3
gen="$abs_top_srcdir/tools/probes-gen.py"
contract="$abs_top_srcdir/tools/probes.stability"

python3 "$gen" --top "$abs_top_srcdir" check-sig "$contract" ||
  fail "the probes and tools/probes.stability differ"

# The core connection and request probes are Stable.
for p in connection_accept connection_close handshake_done request_start \
         request_done; do
  grep -Eq "^Stable +$p \(" "$contract" || fail "$p is not Stable"
done

# nbdkit-probes(1) says each probe's stability as the file does.
pod="$abs_top_builddir/docs/nbdkit-probes.pod"
python3 - "$contract" "$pod" <<'PY' || fail "nbdkit-probes(1) and the contract differ"
import re, sys
contract = {}
for l in open (sys.argv[1]):
    l = l.split ("#", 1)[0].split ()
    if l:
        contract[l[1]] = l[0]
pod = open (sys.argv[2]).read ()
bad = 0
# Server probes: a =head2 section each, with a `Stability: X' line.
for m in re.finditer (r"^=head2 (\w+)\n(.*?)(?=^=head)", pod, re.S | re.M):
    name, body = m.groups ()
    if name not in contract:
        continue
    st = re.findall (r"^Stability: (\w+)", body, re.M)
    if st != [contract[name]]:
        print ("%s: the page says %s, the contract %s" % (name, st, contract[name]))
        bad = 1
# Module probes: an =item each, whose text says `Stability: X.'
for m in re.finditer (r"^=item B<(\w+)>.*?\n(.*?)(?=^=item|^=back)", pod, re.S | re.M):
    name, body = m.groups ()
    if name not in contract:
        continue
    st = re.findall (r"Stability: (\w+)", body)
    if st != [contract[name]]:
        print ("%s: the page says %s, the contract %s" % (name, st, contract[name]))
        bad = 1
sys.exit (bad)
PY

# A copy of the declarations to break.
copy_decls ()
{
  rm -rf "$top"
  (cd "$abs_top_srcdir" &&
   find server common plugins filters -maxdepth 2 -name probes.d) |
    while read -r f; do
      mkdir -p "$top/$(dirname "$f")"
      cp "$abs_top_srcdir/$f" "$top/$f"
    done
}
top="$tmpdir/top"
# Edit the declaration of probe $1 in server/probes.d with the python
# expression $2 over its argument list `a' (a list of strings).
edit_probe ()
{
  python3 - "$top/server/probes.d" "$1" "$2" <<'PY'
import re, sys
path, name, expr = sys.argv[1:]
text = open (path).read ()
m = re.search (r"\bprobe\s+%s\s*\(([^)]*)\)" % name, text)
if not m:
    sys.exit ("no probe %s" % name)
a = [x.strip () for x in m.group (1).split (",")]
a = eval (expr)
text = text[:m.start (1)] + ", ".join (a) + text[m.end (1):]
open (path, "w").write (text)
PY
}
refused ()
{
  local what="$1" want="$2"
  python3 "$gen" --top "$top" check-sig "$contract" > "$tmpdir/out" &&
    fail "the check passed a copy with $what"
  grep -q "$want" "$tmpdir/out" ||
    { cat "$tmpdir/out"; fail "no \`$want' for $what"; }
}

copy_decls
edit_probe request_start '[a[0].replace ("uint64_t", "int64_t")] + a[1:]'
refused "request_start's id made signed" "Stable probe request_start changed"

copy_decls
edit_probe request_done 'a[:-1]'
refused "request_done's last argument dropped" "Stable probe request_done changed"

copy_decls
sed -i 's/probe connection_close (/probe connection_closed (/' \
  "$top/server/probes.d"
refused "connection_close renamed" "Stable probe connection_close is in"

copy_decls
sed -i 's/^};$/  \/* Never documented. *\/\n  probe delay_new_one (uint64_t x);\n};/' \
  "$top/filters/delay/probes.d"
refused "a new probe with no stability" "delay_new_one .* has no stability"

# An Evolving probe may change.
copy_decls
edit_probe busy_poll 'a + ["uint64_t more"]'
python3 "$gen" --top "$top" check-sig "$contract" > "$tmpdir/out" ||
  { cat "$tmpdir/out"; fail "an Evolving probe's change was refused"; }
