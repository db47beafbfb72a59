#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The luks filter's probes.  luks_unlock fires once per opened key slot
# with the slot's number and iterations: here slot 3, added by qemu-img
# amend with a second passphrase, and only for the first connection (a
# second one finds the disk already opened).  luks_rmw fires for each
# sector a write covers in part, with the export offset and the bytes
# written in that sector.
source "$(dirname "$0")/functions.sh"
requires_cmd bpftrace nbdsh nbdinfo qemu-img
requires_root
tracing_lock

img="$tmpdir/disk.luks"
# qemu-img gives up on its key timing now and then ("Unable to get
# accurate CPU usage"): up to 30 tries, a little apart.
for i in $(seq 30); do
  [ "$i" -eq 1 ] || sleep 0.2
  rm -f "$img"
  qemu-img create -q -f luks --object secret,id=sec0,data=first-pass \
    -o key-secret=sec0,iter-time=10 "$img" 1M 2> "$tmpdir/qemu.err" &&
  qemu-img amend --object secret,id=sec0,data=first-pass \
    --object secret,id=sec1,data=second-pass \
    -o state=active,new-secret=sec1,keyslot=3,iter-time=10 \
    --image-opts "driver=luks,key-secret=sec0,file.filename=$img" \
    2>> "$tmpdir/qemu.err" && break
done
[ -s "$img" ] || fail "qemu-img: $(cat "$tmpdir/qemu.err")"
# Slot 3's iteration count, from the header (big-endian, slot at 208
# + 3 * 48, iterations after the 4-byte state).
iters=$(od -An -tu1 -j $(( 208 + 3 * 48 + 4 )) -N4 "$img" |
        awk '{ print $1 * 16777216 + $2 * 65536 + $3 * 256 + $4 }')

so="$(filter_so luks)"
start_server --filter=luks file "$img" passphrase=second-pass
trace_start "$tmpdir/trace" "
usdt:$so:nbdkit:luks_unlock { printf(\"unlock %d %d\\n\", arg0, arg1); }
usdt:$so:nbdkit:luks_rmw /arg0 != 0 && arg1 != 0/ { printf(\"rmw %d %d\\n\", arg2, arg3); }"
t nbdinfo --size "$uri" > /dev/null
# 600 bytes at 1000: 24 bytes at the end of sector 1, sector 2 whole,
# 64 bytes at the start of sector 3.  Then an aligned write: no rmw.
t nbdsh -u "$uri" -c '
h.set_strict_mode(0)
h.pwrite(b"x" * 600, 1000)
h.pwrite(b"y" * 4096, 8192)
assert h.pread(600, 1000) == b"x" * 600
'
trace_stop

cat > "$tmpdir/expected" <<EOF2
unlock 3 $iters
rmw 1000 24
rmw 1536 64
EOF2
grep -E '^(unlock|rmw) ' "$tmpdir/trace" > "$tmpdir/got" || :
diff -u "$tmpdir/expected" "$tmpdir/got" ||
  { cat "$tmpdir/trace.err"; fail "probes: not the expected events"; }
