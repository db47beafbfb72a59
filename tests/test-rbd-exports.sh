#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The rbd plugin without image=: every image of the pool is an export
# (nbdinfo --list shows them), the export name picks the image (each
# has its own size and bytes), and the default export or a name that
# is no image fails that connection with a clear message while the
# server stays up.  With image=, one default export is listed.  Would
# catch: the list missing images, every name served by one image, a
# crash or hang on a bad name.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo
requires /usr/bin/python3 -c 'import json'
source "$srcdir/rbd-functions.sh"

a=$(new_image a 4M)
b=$(new_image b 12M)

start_server rbd "${rbd_args[@]}"
t nbdinfo --list --json "$uri" > "$tmpdir/list"
for name in "$a" "$b"; do
  /usr/bin/python3 -c '
import json, sys
names = [e["export-name"] for e in json.load(open(sys.argv[1]))["exports"]]
sys.exit(sys.argv[2] not in names)' "$tmpdir/list" "$name" ||
    { cat "$tmpdir/list"; fail "$name is not in the export list"; }
done
[ "$(t nbdinfo --size "nbd+unix:///$a?socket=$sock")" = $((4 * 1024 * 1024)) ] ||
  fail "export $a: wrong size"
[ "$(t nbdinfo --size "nbd+unix:///$b?socket=$sock")" = $((12 * 1024 * 1024)) ] ||
  fail "export $b: wrong size"
t nbdsh -u "nbd+unix:///$b?socket=$sock" -c 'h.pwrite(b"B" * 4096, 0); h.flush()'
t nbdsh -u "nbd+unix:///$a?socket=$sock" -c 'assert h.pread(4096, 0) == bytes(4096)' ||
  fail "a write to $b showed in $a"

: > "$tmpdir/log"
expect_fail t nbdinfo --size "$uri" 2>> "$tmpdir/log" ||
  fail "the default export was served without image="
expect_fail t nbdinfo --size "nbd+unix:///nosuchimage?socket=$sock" \
  2>> "$tmpdir/log" || fail "a name that is no image was served"
kill -0 "$server_pid" || fail "the server died on a bad export name"
t nbdinfo --size "nbd+unix:///$a?socket=$sock" >/dev/null ||
  fail "the server stopped serving after a bad export name"
stop_server

# With image=, the list has one export: the default, described.
start_server rbd "${rbd_args[@]}" image="$a"
t nbdinfo --list --json "$uri" > "$tmpdir/list"
/usr/bin/python3 -c '
import json, sys
e = json.load(open(sys.argv[1]))["exports"]
assert [x["export-name"] for x in e] == [""], e' "$tmpdir/list" ||
  { cat "$tmpdir/list"; fail "image=: the list is not the one default export"; }
