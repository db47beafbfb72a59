#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# dynamic-export=true: the client's export name goes upstream, and the
# client's export list is the upstream's.  The upstream is our file
# plugin serving a directory (one export per file); without
# dynamic-export every name reaches the one configured export.  Also
# in front of qemu-nbd with a named export (-x).
# Catches: the client's export name dropped (every name showing the
# same disk), a list made up instead of the upstream's, export= not
# used.
source "$(dirname "$0")/functions.sh"
source "$srcdir/nbd-plugin-functions.sh"
requires_cmd nbdinfo nbdcopy qemu-nbd

mkdir "$tmpdir/dir"
printf 'A%.0s' $(seq 65536) > "$tmpdir/dir/alpha"
printf 'B%.0s' $(seq 131072) > "$tmpdir/dir/beta"
start_upstream file dir="$tmpdir/dir"
start_server nbd socket="$up_sock" dynamic-export=true

t nbdinfo --list --json "$uri" | /usr/bin/python3 -c '
import json, sys
names = sorted(e["export-name"] for e in json.load(sys.stdin)["exports"])
assert names == ["alpha", "beta"], names' || fail "wrong export list"

base="nbd+unix:///%s?socket=$sock"
for e in alpha beta; do
  cmp <(t nbdcopy "$(printf "$base" "$e")" -) "$tmpdir/dir/$e" ||
    fail "export $e: wrong bytes"
done
expect_fail t nbdinfo --size "$(printf "$base" gamma)" 2>/dev/null ||
  fail "a missing upstream export was served"
stop_server

# A fixed export: every client name gets it.
start_server nbd socket="$up_sock" export=beta
[ "$(t nbdinfo --size "$(printf "$base" alpha)")" = 131072 ] ||
  fail "export=beta: a client asking for alpha did not get beta"
stop_server
expect_fail t "$NBDKIT" -U - nbd socket="$up_sock" export=beta \
  dynamic-export=true --run true 2>/dev/null ||
  fail "export= with dynamic-export=true was accepted"

# qemu-nbd with a named export.
cp "$tmpdir/dir/alpha" "$tmpdir/q.img"
start_qemu_nbd "$tmpdir/q.img" -x qexp
start_server nbd socket="$qemu_sock" dynamic-export=true
[ "$(t nbdinfo --list --json "$uri" | grep -c '"export-name": "qexp"')" = 1 ] ||
  fail "qemu-nbd's export list not passed on"
cmp <(t nbdcopy "$(printf "$base" qexp)" -) "$tmpdir/q.img" ||
  fail "qemu-nbd's export qexp: wrong bytes"
