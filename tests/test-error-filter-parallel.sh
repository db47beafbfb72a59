#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The error filter under parallel clients: four nbdcopy runs at once
# (each with several connections and many requests in flight) through
# error-rate=10% either complete with the right bytes or fail with an
# error; the server survives them, the plugin's data is intact, and
# once the trigger file is gone a copy succeeds byte for byte.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdcopy cmp

disk="$tmpdir/disk.img"
/usr/bin/python3 -c '
import os, sys
sys.stdout.buffer.write(os.urandom(8 * 1024 * 1024))' > "$disk"
cp "$disk" "$disk.orig"
trigger="$tmpdir/inject"
touch "$trigger"
start_server --filter=error file "$disk" error-rate=10% error-file="$trigger"

pids=()
for i in 0 1 2 3; do
  t nbdcopy --connections=2 --requests=16 --request-size=65536 \
    "$uri" "$tmpdir/out$i" > "$tmpdir/copy$i.log" 2>&1 &
  pids+=($!)
done
ok=0 failed=0
for i in 0 1 2 3; do
  status=0
  wait "${pids[$i]}" || status=$?
  case $status in
    0) cmp -s "$disk" "$tmpdir/out$i" || fail "copy $i succeeded with wrong bytes"
       ok=$((ok + 1)) ;;
    124|137) fail "copy $i timed out" ;;
    *) grep -qi 'error' "$tmpdir/copy$i.log" ||
         fail "copy $i failed without an error: $(cat "$tmpdir/copy$i.log")"
       failed=$((failed + 1)) ;;
  esac
done
echo "10%: $ok copies succeeded, $failed failed"
kill -0 "$server_pid" || fail "the server died"

rm "$trigger"
t nbdcopy "$uri" "$tmpdir/final"
cmp "$disk.orig" "$tmpdir/final" || fail "copy without errors differs"
cmp "$disk.orig" "$disk" || fail "the plugin's data changed"
