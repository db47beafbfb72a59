#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Same script, same bytes: each example script of the python plugin
# (plugins/python/examples) is served by Debian's nbdkit 1.32 python
# plugin and by ours, the same client (python-client.py) runs a fixed
# series of writes, zeroes and trims against each, and what the client
# sees must be identical: size, flags, the extents map, the md5 of
# every byte, and for the file-backed example the file left behind.
# Catches any difference in the callbacks' arguments (API 1 vs 2), in
# the defaults for callbacks a script leaves out (can_fua from flush,
# can_fast_zero, ...), in the buffers' contents, and in extents and
# list_exports handling.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo
debian_nbdkit=/usr/bin/nbdkit
[ -x "$debian_nbdkit" ] && [ -f "$debian_plugindir/nbdkit-python-plugin.so" ] ||
  { echo "$0: SKIP: Debian's nbdkit python plugin is not installed"; exit 77; }
[ -f "$abs_top_builddir/plugins/python/.libs/nbdkit-python-plugin.so" ] ||
  { echo "$0: SKIP: the python plugin is not built"; exit 77; }

examples="$abs_top_srcdir/plugins/python/examples"
client="$abs_top_srcdir/tests/python-client.py"

# serve NAME SERVER SCRIPT [ARGS...]: the client's view, in $tmpdir/NAME.
serve ()
{
  local name="$1" server="$2"
  shift 2
  t "$server" -U - python "$@" \
    --run "nbdsh --base-allocation -u \"\$uri\" -c 'exec(open(\"$client\").read())'" \
    > "$tmpdir/$name" 2> "$tmpdir/$name.err" ||
    { cat "$tmpdir/$name.err"; fail "$server python $* failed"; }
}

# same NAME SCRIPT [ARGS...]: both servers, then compare.
same ()
{
  local name="$1"
  shift
  serve "$name.debian" "$debian_nbdkit" "$@"
  serve "$name.ours" "$NBDKIT" "$@"
  grep -q '^md5 ' "$tmpdir/$name.ours" || fail "$name: no output"
  diff -u "$tmpdir/$name.debian" "$tmpdir/$name.ours" ||
    fail "$name: Debian's python plugin and ours differ"
}

same ramdisk "$examples/ramdisk.py" size=4M
grep -qx 'writes done' "$tmpdir/ramdisk.ours" || fail "ramdisk: not written"
same ramdisk-v1 "$examples/ramdisk-v1.py" size=4M
# API 1 and API 2 scripts of the same disk: the same bytes.
diff <(grep '^md5' "$tmpdir/ramdisk.ours") \
     <(grep '^md5' "$tmpdir/ramdisk-v1.ours") ||
  fail "ramdisk.py (API 2) and ramdisk-v1.py (API 1) differ"

same sparse "$examples/sparse.py" size=8M
# The map is not one run: the writes left data among holes.
[ "$(grep -c '^extent ' "$tmpdir/sparse.ours")" -ge 3 ] ||
  fail "sparse: the map shows no holes"

# file.py: each server gets its own copy of the same sparse file.
for s in debian ours; do
  truncate -s 4M "$tmpdir/disk.$s"
  printf 'initial data' | dd of="$tmpdir/disk.$s" bs=1 seek=2000000 \
    conv=notrunc status=none
done
serve file.debian "$debian_nbdkit" "$examples/file.py" file="$tmpdir/disk.debian"
serve file.ours "$NBDKIT" "$examples/file.py" file="$tmpdir/disk.ours"
diff -u "$tmpdir/file.debian" "$tmpdir/file.ours" ||
  fail "file.py: Debian's python plugin and ours differ"
cmp "$tmpdir/disk.debian" "$tmpdir/disk.ours" ||
  fail "file.py: the files written differ"
same file-ro "$examples/file.py" file="$tmpdir/disk.ours" readonly=true
grep -qx 'is_read_only True' "$tmpdir/file-ro.ours" ||
  fail "file.py readonly=true: writable"

# exports.py: the list (names and descriptions), then each export.
for s in debian ours; do
  server="$NBDKIT"; [ "$s" = ours ] || server="$debian_nbdkit"
  t "$server" -U - python "$examples/exports.py" \
    --run 'nbdinfo --list --json "$uri"' > "$tmpdir/list.json.$s"
  /usr/bin/python3 -c '
import json, sys
for e in json.load(open(sys.argv[1]))["exports"]:
    print(e["export-name"], e.get("description"), e["export-size"])' \
    "$tmpdir/list.json.$s" > "$tmpdir/list.$s"
done
cat "$tmpdir/list.ours"
[ "$(wc -l < "$tmpdir/list.ours")" -eq 3 ] || fail "exports: not 3 exports"
diff -u "$tmpdir/list.debian" "$tmpdir/list.ours" ||
  fail "exports.py: the export lists differ"
for e in hello zeroes pattern; do
  for s in debian ours; do
    server="$NBDKIT"; [ "$s" = ours ] || server="$debian_nbdkit"
    t "$server" -U - python "$examples/exports.py" \
      --run "nbdsh --base-allocation -u \"nbd+unix:///$e?socket=\$unixsocket\" -c 'exec(open(\"$client\").read())'" \
      > "$tmpdir/export-$e.$s"
  done
  diff -u "$tmpdir/export-$e.debian" "$tmpdir/export-$e.ours" ||
    fail "exports.py: export $e differs"
done
