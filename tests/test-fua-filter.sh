#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=fua, every fuamode: what the client is offered (can_fua,
# can_flush), what each write, zero, trim and flush gets, and what
# reaches the plugin (Debian's log filter under ours: the fua flag of
# each call, the flushes) are the same as Debian's nbdkit with its own
# fua filter.  Debian's 1.32 refuses fuamode=none, which its page
# documents as the default: we accept it and check it against the
# default.  Plugins that cannot flush or FUA make the modes that need
# them fail; bad modes exit 1 naming the key.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"

log="$tmpdir/plugin.log"
logfilter="--filter=$debian_filterdir/nbdkit-log-filter.so"
cat > "$tmpdir/fua" <<EOF
#!/bin/bash
set -e
nbdinfo --json "\$1" | /usr/bin/python3 -c '
import json, sys
e = json.load(sys.stdin)["exports"][0]
print("can_fua", e["can_fua"], "can_flush", e["can_flush"])'
nbdsh -u "\$1" -c '
def op(n, f):
    try:
        f()
        print(n, "ok")
    except nbd.Error as e:
        print(n, "error", e.errno)
F = nbd.CMD_FLAG_FUA if h.can_fua() else 0
op("write", lambda: h.pwrite(b"x" * 4096, 0))
op("write-fua", lambda: h.pwrite(b"y" * 4096, 4096, F))
op("zero-fua", lambda: h.zero(4096, 8192, F))
op("trim-fua", lambda: h.trim(4096, 12288, F))
op("trim", lambda: h.trim(4096, 16384))
if h.can_flush():
    op("flush", lambda: h.flush())
print("read", h.pread(8192, 0) == b"x" * 4096 + b"y" * 4096)
'
grep -E ' (Write|Zero|Trim|Flush) id=' "$log" | cut -d' ' -f4-
EOF
chmod +x "$tmpdir/fua"

for m in default emulate native force pass discard; do
  arg=()
  [ "$m" = default ] || arg=(fuamode=$m)
  compare_own "fua-$m" "$tmpdir/fua" --filter=fua "$logfilter" memory 1M \
    logfile="$log" "${arg[@]}"
  cp "$ours" "$tmpdir/fua-$m.ours"
done
# What the comparison holds, spelled out for two modes.
expect_in fua-emulate-flush "$tmpdir/fua-emulate.ours" \
  '^Write id=2 offset=0x1000 count=0x1000 fua=0'
expect_in fua-emulate-flush2 "$tmpdir/fua-emulate.ours" '^Flush id=3 '
expect_in fua-force-fua "$tmpdir/fua-force.ours" \
  '^Trim id=5 offset=0x4000 count=0x1000 fua=1'
grep -q '^Flush' "$tmpdir/fua-force.ours" &&
  note_failure fua-force-noflush "a flush reached the plugin under force"

# fuamode=none is the default.
_own_filters=1 _run_one "$NBDKIT" "$tmpdir/fua-none" "$tmpdir/fua" --filter=fua \
  "$logfilter" memory 1M logfile="$log" fuamode=none
cmp -s "$tmpdir/fua-none" "$tmpdir/fua-default.ours" ||
  note_failure fua-none "fuamode=none differs from the default:" \
    "$(diff "$tmpdir/fua-default.ours" "$tmpdir/fua-none")"
expect_in fua-none-nofua "$tmpdir/fua-none" '^can_fua False can_flush True$'

# A plugin that can neither flush nor FUA (Debian's eval plugin).
eval_plugin="$debian_plugindir/nbdkit-eval-plugin.so"
requires test -f "$eval_plugin"
eval_args=(get_size='echo 1M' pread='dd if=/dev/zero bs=$3 count=1
  status=none' can_write='exit 0' pwrite='cat >/dev/null'
  can_flush='exit 3' can_fua='echo none')
for m in emulate native force; do
  t "$NBDKIT" -U - --filter=fua "$eval_plugin" "${eval_args[@]}" \
    fuamode=$m --run 'nbdinfo --size "$uri"' > "$tmpdir/e.out" 2>&1 &&
    fail "fuamode=$m over a plugin without flush/FUA served"
  grep -q "fuamode: '$m' needs a plugin" "$tmpdir/e.out" ||
    fail "fuamode=$m: $(cat "$tmpdir/e.out")"
done
compare_own fua-discard-noflush "$tmpdir/fua" --filter=fua "$logfilter" \
  "$eval_plugin" "${eval_args[@]}" logfile="$log" fuamode=discard
expect_in fua-discard-flush "$ours" '^flush ok$'

# Bytes and map through the filter on a file.
disk="$tmpdir/disk.img"
make_pattern "$disk" $((1024 * 1024))
cp "$disk" "$disk.orig"
state_files=("$disk")
compare_own fua-write-force write --filter=fua file "$disk" fuamode=force
compare_own fua-write-emulate write --filter=fua file "$disk" \
  fuamode=emulate
state_files=()

refuses "^nbdkit: fua: error: fuamode: unknown mode 'bogus'" \
  --filter=fua null 1M fuamode=bogus || fail "fuamode=bogus not refused"

finish
