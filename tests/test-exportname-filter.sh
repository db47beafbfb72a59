#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=exportname over Debian's file plugin serving a directory
# (loaded by path by both servers, so the plugin is the same): what
# `nbdinfo --list' shows (names and descriptions), which export ""
# stands for, which names a client may open and what it reads there,
# for each exportname-list mode, exportname-strict, default-export and
# each exportdesc mode, the same as Debian's nbdkit with its own
# exportname filter.  Bad values exit 1 naming the key.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"

file_plugin="$debian_plugindir/nbdkit-file-plugin.so"
requires test -f "$file_plugin"
dir="$tmpdir/dir"
mkdir "$dir"
for f in file1 file2 file3; do
  printf '%-512s' "this is $f" > "$dir/$f"
done

cat > "$tmpdir/names" <<'EOF'
#!/bin/sh
# The list (NBD_OPT_LIST: names and descriptions), then for each name:
# opened (with its description and first bytes) or refused.
URI="$1" nbdsh -c '
import os
uri = os.environ["URI"]
sock = uri.split("socket=", 1)[1]
h.set_opt_mode(True)
h.connect_uri(uri)
def seen(name, desc):
    print("listed", repr(name), repr(desc))
try:
    h.opt_list(seen)
except nbd.Error:
    print("list refused")
h.opt_abort()
for n in ("", "file1", "file2", "file3", "nosuch"):
    x = nbd.NBD()
    x.set_full_info(True)
    x.set_export_name(n)
    try:
        x.connect_unix(sock)
    except nbd.Error:
        print("open %r refused" % n)
        continue
    try:
        d = x.get_export_description()
    except nbd.Error:
        d = None
    print("open %r -> %r %s" % (n, d, x.pread(16, 0).decode().strip()))
    x.shutdown()
'
EOF
chmod +x "$tmpdir/names"

run ()
{
  local label="$1"
  shift
  compare_own "exportname-$label" "$tmpdir/names" --filter=exportname \
    "$file_plugin" dir="$dir" "$@"
  cp "$ours" "$tmpdir/$label.ours"
}

run keep
run keep-default default-export=file2
run error exportname-list=error
run empty exportname-list=empty
run defaultonly exportname-list=defaultonly default-export=file3
run default-only exportname-list=default-only default_export=file1
run explicit exportname-list=explicit exportname=file3 exportname=file1 \
  exportname=nosuch
run strict exportname-strict=true exportname=file1 exportname=file3
run strict-default exportname-strict=true exportname= exportname=file2 \
  default-export=file2
run strict-default-unlisted exportname_strict=1 exportname= \
  default-export=file2
run desc-none exportdesc=none
run desc-fixed exportdesc=fixed:'a fixed description'
run desc-script exportdesc=script:'echo "this is $name"; echo; echo ignored'
run desc-script-explicit exportname-list=explicit exportname=file2 \
  exportname="it's" exportdesc=script:'printf "<%s>\n" "$name"'
run desc-script-fails exportdesc=script:'exit 1'

# Some of what the comparison holds, spelled out.
expect_in exportname-keep-default "$tmpdir/keep-default.ours" \
  "^open '' -> None this is file2$"
expect_in exportname-explicit-list "$tmpdir/explicit.ours" \
  "^listed 'file3' ''\$"
expect_in exportname-strict-refused "$tmpdir/strict.ours" \
  "^open 'file2' refused$"
expect_in exportname-strict-ok "$tmpdir/strict.ours" \
  "^open 'file3' -> None this is file3$"
expect_in exportname-script "$tmpdir/desc-script-explicit.ours" \
  "^listed \"it's\" \"<it's>\"\$"
expect_in exportname-error "$tmpdir/error.ours" "^list refused$"

# --- Bad parameters: exit 1, one line naming the key ----------------------
bad ()
{
  refuses "$1" --filter=exportname null 1M "${@:2}" ||
    fail "${*:2}: not refused with /$1/"
}
bad "^nbdkit: exportname: error: exportname-list: unknown mode 'all'" \
  exportname-list=all
bad "^nbdkit: exportname: error: exportdesc: unknown mode 'fixed'" \
  exportdesc=fixed
bad "^nbdkit: exportname: error: exportname-strict: " \
  exportname-strict=sometimes
bad "^nbdkit: exportname: error: exportname: .* longer than 4096" \
  exportname="$(printf '%5000s' x)"

finish
