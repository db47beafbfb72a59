#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The README's plugin and filter examples (the code blocks after an
# HTML comment "<!-- test: readme-... -->") work when copied: each line
# runs from the source tree, exits 0 and prints what it promises, with
# the build tree's server as ./nbdkit (a VPATH build too).
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo nbdsh nbdcopy python3

readme="$abs_top_srcdir/README.md"
awk '/^<!-- test: readme-/ { want = 1; next }
     want && /^```sh/ { on = 1; want = 0; next }
     on && /^```/ { on = 0; next }
     on { print }' "$readme" > "$tmpdir/lines"
n=$(wc -l < "$tmpdir/lines")
[ "$n" -ge 7 ] || { cat "$tmpdir/lines"; fail "found only $n marked lines"; }

# Each line's output must contain the text given here, in order.
expect=(
  "0  data"                      # nbdinfo --map: the data at 0
  "1048576"                      # the sh plugin's size
  "# nbdkit: an NBD ser"         # the README's own first bytes, by curl
  "1073741824"                   # the nbd plugin's upstream, through cache
  "1073741824"                   # the python ramdisk
  "bytearray(b'xxxx')"           # cow over a partition: the write reads back
  "the copy failed with EIO, as asked"
)
[ "${#expect[@]}" -eq "$n" ] ||
  fail "the README has $n marked lines, the test expects ${#expect[@]}"

# The lines run where the README says: a source tree with the build
# tree's ./nbdkit.  Here that is a directory of links (the source tree's
# README.md and plugins/, the build tree's wrapper), which is the same
# in a VPATH build, where the two trees differ.
run="$tmpdir/tree"
mkdir "$run"
ln -s "$abs_top_srcdir/README.md" "$run/README.md"
ln -s "$abs_top_srcdir/plugins" "$run/plugins"
ln -s "$abs_top_builddir/nbdkit" "$run/nbdkit"
[ -x "$run/nbdkit" ] || fail "no nbdkit wrapper in $abs_top_builddir"
cd "$run"
i=0
while IFS= read -r line; do
  echo "+ $line"
  out=$(t bash -c "$line" 2>&1) || { echo "$out"; fail "exit status $?: $line"; }
  echo "$out"
  grep -qF -- "${expect[$i]}" <<< "$out" ||
    fail "line $((i + 1)) does not print \`${expect[$i]}'"
  i=$((i + 1))
done < "$tmpdir/lines"
