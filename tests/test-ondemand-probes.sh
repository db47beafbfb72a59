#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The ondemand plugin's probe: ondemand_create fires once for each new
# export, with its name, the command's duration and exit status (also
# when it fails), and not for an export that exists already.
source "$(dirname "$0")/functions.sh"
requires_cmd bpftrace nbdsh nbdinfo
requires_root
tracing_lock

so="$abs_top_builddir/plugins/ondemand/.libs/nbdkit-ondemand-plugin.so"
[ -f "$so" ] || fail "$so not built"
d="$tmpdir/exports"
mkdir "$d"

# Export "bad" makes the command exit 9; each run sleeps 0.1 s.
start_server ondemand dir="$d" 1M command='sleep 0.1
case "$disk" in */bad) exit 9 ;; esac
truncate -s $size "$disk"'
trace_start "$tmpdir/bt" \
  "usdt:$so:nbdkit:ondemand_create {
     printf(\"create %s %d %d\\n\", str(arg0), arg2, arg1 / 1000000);
   }"
for e in one two one "" bad; do
  nbdinfo --size "nbd+unix:///$e?socket=$sock" > /dev/null 2>&1 || :
done
trace_stop
cat "$tmpdir/bt"

grep '^create ' "$tmpdir/bt" | awk '{ print $2, $3 }' | sort > "$tmpdir/got"
printf 'bad 9\ndefault 0\none 0\ntwo 0\n' > "$tmpdir/expected"
diff -u "$tmpdir/expected" "$tmpdir/got" ||
  fail "ondemand_create events are not one per new export"
awk '$1 == "create" && ($4 < 100 || $4 > 20000) { exit 1 }' "$tmpdir/bt" ||
  fail "durations not between 0.1 s and 20 s"
