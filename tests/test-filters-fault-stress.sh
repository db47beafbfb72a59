#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Faults through the caching filters: the error filter fails 10% of
# every command (error-rate=10%, all commands), once above cow and cache
# (clients see the errors) and once below them (the "disk" fails and
# the errors come up through cache and cow).  Each time, 20 nbdcopy
# runs at once, first 20 copies out, then 20 copies in of the same
# source (4 MiB in 1 MiB requests: at 10% per command about half the
# runs meet no error, so both outcomes are seen):
#  - every run ends by itself, with success or a clean failure (exit 1
#    and a message), never killed by its time limit or a signal;
#  - every copy out that succeeded holds exactly the disk's bytes;
#  - after the copies in, with errors turned off (the trigger file
#    removed), every 64 KiB block of the export is either the source's
#    or the disk's: nothing torn or garbled;
#  - the server is still there and serving, and the disk file under
#    cow is byte-for-byte what it was.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdcopy nbdsh sha256sum cmp

size=$((4 * 1024 * 1024))
head -c "$size" /dev/urandom > "$tmpdir/disk.img"
head -c "$size" /dev/urandom > "$tmpdir/source.img"
before="$(sha256sum < "$tmpdir/disk.img")"
trigger="$tmpdir/inject"

# runs KIND: 20 nbdcopy at once; KIND out or in.  Each run's exit
# status goes to $tmpdir/status.KIND.N.
runs ()
{
  local kind="$1" i pids=()
  for (( i = 0; i < 20; i++ )); do
    if [ "$kind" = out ]; then
      timeout -k 5 120 nbdcopy --request-size=1048576 "$uri" \
        "$tmpdir/out.$i" 2> "$tmpdir/err.$kind.$i" &
    else
      timeout -k 5 120 nbdcopy --request-size=1048576 "$tmpdir/source.img" \
        "$uri" 2> "$tmpdir/err.$kind.$i" &
    fi
    pids+=($!)
  done
  for (( i = 0; i < 20; i++ )); do
    local status=0
    wait "${pids[i]}" || status=$?
    echo "$status" > "$tmpdir/status.$kind.$i"
    case "$status" in
      0) ;;
      1) [ -s "$tmpdir/err.$kind.$i" ] ||
           fail "$label: nbdcopy $kind $i failed without a message" ;;
      *) cat "$tmpdir/err.$kind.$i"
         fail "$label: nbdcopy $kind $i ended with status $status" ;;
    esac
  done
  local ok
  ok=$(grep -lx 0 "$tmpdir"/status.$kind.* | wc -l)
  echo "$label: copies $kind: $ok of 20 succeeded"
  succeeded=$((succeeded + ok))
}

for where in above below; do
  label="error $where cow and cache"
  touch "$trigger"
  if [ "$where" = above ]; then
    start_server --filter=error --filter=cow --filter=cache \
      file "$tmpdir/disk.img" error=EIO error-rate=10% error-file="$trigger"
  else
    start_server --filter=cow --filter=cache --filter=error \
      file "$tmpdir/disk.img" error=EIO error-rate=10% error-file="$trigger"
  fi

  succeeded=0
  runs out
  for (( i = 0; i < 20; i++ )); do
    if [ "$(cat "$tmpdir/status.out.$i")" = 0 ]; then
      cmp -s "$tmpdir/out.$i" "$tmpdir/disk.img" ||
        fail "$label: copy out $i succeeded with the wrong bytes"
    fi
    rm -f "$tmpdir/out.$i"
  done

  runs in
  # Above the filters a run meets no error about 2 times in 3: of the
  # 40, both outcomes must show (all 40 alike: under 1 in 10^7).
  if [ "$where" = above ] && { [ "$succeeded" -eq 0 ] || [ "$succeeded" -eq 40 ]; }; then
    fail "$label: $succeeded of 40 copies succeeded: errors not injected at 10%?"
  fi
  rm "$trigger"
  t nbdcopy "$uri" "$tmpdir/final" ||
    fail "$label: the server does not serve once errors stop"
  t /usr/bin/python3 - "$tmpdir/final" "$tmpdir/source.img" "$tmpdir/disk.img" <<'PY' ||
import sys
final, source, disk = (open(p, "rb").read() for p in sys.argv[1:])
bs = 65536
bad = [i for i in range(0, len(final), bs)
       if final[i:i+bs] not in (source[i:i+bs], disk[i:i+bs])]
if bad:
    print("blocks neither the source's nor the disk's:", bad[:10])
    sys.exit(1)
n = sum(final[i:i+bs] == source[i:i+bs] for i in range(0, len(final), bs))
print("%d of %d blocks hold the source" % (n, len(final) // bs))
PY
    fail "$label: torn or garbled blocks"
  stop_server
  [ "$(sha256sum < "$tmpdir/disk.img")" = "$before" ] ||
    fail "$label: the disk under cow changed"
done
