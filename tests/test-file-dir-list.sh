#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# file dir=: the export list is the directory's regular files and block
# devices (links to them too, dot files too) in the order readdir gives
# them, not sorted, exactly as Debian's nbdkit 1.32 lists the same
# directory (nbdkit-file-plugin(1), dir=).  Subdirectories, FIFOs and
# dangling links are left out by both.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh truncate mkfifo
ref_nbdkit=/usr/bin/nbdkit
requires test -x "$ref_nbdkit"

d="$tmpdir/exports"
mkdir "$d" "$d/subdir"
# Enough names that directory order and sorted order all but surely
# differ (checked below, so that the test can tell them apart).
for n in zeta alpha mid B b-2 .dot 07 x.img Y 3 m-m _u; do
  truncate -s 512 "$d/$n"
done
ln -s alpha "$d/lnk"
ln -s nowhere "$d/dangling"
mkfifo "$d/fifo"

cat > "$tmpdir/list.py" <<'PY'
import sys
import nbd
h = nbd.NBD()
h.set_opt_mode(True)
h.connect_uri(sys.argv[1])
names = []
h.opt_list(lambda n, desc: names.append(n))
h.opt_abort()
print(names)
PY
list ()
{
  t "$1" -U - file dir="$d" \
    --run "/usr/bin/python3 $tmpdir/list.py \"\$uri\""
}

# Directory order, servable entries only, as Python's listdir (readdir)
# sees it.
want=$(/usr/bin/python3 - "$d" <<'PY'
import os, stat, sys
d = sys.argv[1]
def servable(n):
    try:
        m = os.stat(os.path.join(d, n)).st_mode
    except OSError:
        return False
    return stat.S_ISREG(m) or stat.S_ISBLK(m)
names = [n for n in os.listdir(d) if servable(n)]
assert names != sorted(names), "directory order happens to be sorted"
print(names)
PY
) || fail "could not list $d in directory order"

ref=$(list "$ref_nbdkit") || fail "Debian's nbdkit failed"
ours=$(list "$NBDKIT") || fail "our server failed"
echo "directory order: $want"
echo "Debian's nbdkit: $ref"
echo "ours:            $ours"
[ "$ref" = "$want" ] || fail "Debian's nbdkit does not list in directory order"
[ "$ours" = "$ref" ] || fail "our export list differs from Debian's nbdkit's"
