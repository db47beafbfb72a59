#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The file plugin with dir=DIR serves each file as a named export;
# NBD_OPT_LIST (nbdinfo --list) lists them and each has its own content.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo nbdsh

mkdir "$tmpdir/dir"
printf 'AAAA%.0s' {1..1024} > "$tmpdir/dir/alpha"
truncate -s 1M "$tmpdir/dir/beta"
printf 'gamma' | dd of="$tmpdir/dir/beta" conv=notrunc status=none

start_server file dir="$tmpdir/dir"
t nbdinfo --list --json "$uri" > "$tmpdir/list.json"
cat "$tmpdir/list.json"
/usr/bin/python3 - "$tmpdir/list.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
names = sorted(e["export-name"] for e in d["exports"])
assert names == ["alpha", "beta"], names
sizes = {e["export-name"]: e["export-size"] for e in d["exports"]}
assert sizes == {"alpha": 4096, "beta": 1048576}, sizes
PY

t nbdsh -u "nbd+unix:///beta?socket=$sock" -c 'assert h.pread(5, 0) == b"gamma"'
t nbdsh -u "nbd+unix:///alpha?socket=$sock" -c 'assert h.pread(8, 0) == b"AAAAAAAA"'
# A name that is not in the directory is refused.
if t nbdsh -u "nbd+unix:///nosuch?socket=$sock" -c 'pass' 2>"$tmpdir/err"; then
  fail "export 'nosuch' was accepted"
fi
cat "$tmpdir/err"
