#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=nocache: each cachemode offers cache requests or not, and
# what reaches the plugin (Debian's log filter under ours: reads for
# emulate, nothing for nop, no cache call ever) and what the client
# gets are the same as Debian's nbdkit with its own nocache filter.
# Bad modes exit 1 naming the key.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"

log="$tmpdir/plugin.log"
# Cache requests of at most 1 MiB: nbdkit emulates a larger one with a
# single read, our server with reads of 1 MiB (the server's choice, not
# the filter's; the client sees no difference).
cat > "$tmpdir/cache" <<EOF
#!/bin/sh
set -e
nbdinfo --json "\$1" | /usr/bin/python3 -c '
import json, sys
print("can_cache", json.load(sys.stdin)["exports"][0]["can_cache"])'
nbdsh -u "\$1" -c '
for off, n in ((0, 4096), (12345, 1048576), (3 * 1048576 - 7, 7)):
    try:
        h.cache(n, off)
        print("cache", off, n, "ok")
    except nbd.Error as e:
        print("cache", off, n, "error", e.errno)
print("read", len(h.pread(512, 4096)))
'
grep -E ' (Read|Cache) id=' "$log" | cut -d' ' -f4-
EOF
chmod +x "$tmpdir/cache"

for mode in none emulate nop; do
  compare_own "nocache-$mode" "$tmpdir/cache" --filter=nocache \
    "--filter=$debian_filterdir/nbdkit-log-filter.so" memory 3M \
    logfile="$log" cachemode=$mode
done
compare_own nocache-default "$tmpdir/cache" --filter=nocache \
  "--filter=$debian_filterdir/nbdkit-log-filter.so" memory 3M logfile="$log"
expect_in nocache-default-none "$ours" '^can_cache False$'
compare_own nocache-check "$tmpdir/cache" --filter=nocache \
  "--filter=$debian_filterdir/nbdkit-log-filter.so" memory 3M \
  logfile="$log" cachemode=emulate
expect_in nocache-emulate-reads "$ours" '^Read id=[0-9]+ offset=0x3039 count=0x100000'
compare_own nocache-check2 "$tmpdir/cache" --filter=nocache \
  "--filter=$debian_filterdir/nbdkit-log-filter.so" memory 3M \
  logfile="$log" cachemode=nop
expect_in nocache-nop-ok "$ours" '^cache 12345 1048576 ok$'

disk="$tmpdir/disk.img"
make_pattern "$disk" $((1024 * 1024))
cp "$disk" "$disk.orig"
state_files=("$disk")
compare_own nocache-write write --filter=nocache file "$disk" cachemode=nop
state_files=()

# --- Bad parameters: exit 1, one line naming the key ----------------------
for v in passthrough ''; do
  t "$NBDKIT" -U - --filter=nocache null 1M cachemode="$v" --run true \
    2> "$tmpdir/err" && fail "cachemode=$v accepted"
  [ "$(wc -l < "$tmpdir/err")" -eq 1 ] &&
    grep -q "^nbdkit: nocache: error: cachemode: unknown mode '$v'" \
      "$tmpdir/err" || fail "cachemode=$v: $(cat "$tmpdir/err")"
done

finish
