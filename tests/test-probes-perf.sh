#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The probes fire under perf: buildid-cache the server, `perf list' shows
# sdt_nbdkit:*, `perf probe' + `perf record' around a captive server that
# nbdsh reads from, and `perf script' shows request_start with the read's
# offset and count (args 6 and 7) and a request_done with the same cookie.
source "$(dirname "$0")/functions.sh"
requires_cmd perf nbdsh
requires_root
requires_probes
requires perf --version
tracing_lock

# A private build-id cache ($HOME/.debug): other builds of the server
# cached there offer sdt_nbdkit events too, and perf probe would try to
# add theirs as well.
export HOME="$tmpdir/home"
mkdir -p "$HOME"

export PERF_PAGER=cat
perf buildid-cache --add "$server_binary"
cleanup_fn perf buildid-cache --remove "$server_binary"
cleanup_fn perf probe -q -d 'sdt_nbdkit:*'

perf list 'sdt_nbdkit:*' > "$tmpdir/list" 2>&1
cat "$tmpdir/list"
for p in connection_accept handshake_done request_start request_done \
         connection_close; do
  grep -q "sdt_nbdkit:$p" "$tmpdir/list" || fail "perf list has no sdt_nbdkit:$p"
done

# The scenario users type: every probe at once.  perf refuses a probe
# whose sites record their arguments differently, so this also proves
# that every site of every probe agrees.
perf probe -q -d 'sdt_nbdkit:*' 2>/dev/null || :
perf probe -x "$server_binary" 'sdt_nbdkit:*' > "$tmpdir/probe-all" 2>&1 ||
  { cat "$tmpdir/probe-all"; fail "perf probe 'sdt_nbdkit:*' failed"; }
perf probe -l 2>/dev/null | awk '/sdt_nbdkit:/ { print $1 }' | sort -u \
  > "$tmpdir/events"
declared=$(grep -c '^[[:space:]]*probe[[:space:]]' \
             "$abs_top_srcdir/server/probes.d")
created=$(wc -l < "$tmpdir/events")
[ "$created" -eq "$declared" ] ||
  fail "perf probe created $created events for $declared declared probes"

t perf record -q -o "$tmpdir/perf.data" \
  -e sdt_nbdkit:request_start -e sdt_nbdkit:request_done \
  -e sdt_nbdkit:connection_accept -e sdt_nbdkit:connection_close -- \
  "$NBDKIT" -U - memory 1M \
    --run 'nbdsh -u "$uri" -c "h.pwrite(b\"p\" * 512, 12288); h.pread(4096, 12288)"'
perf script -i "$tmpdir/perf.data" > "$tmpdir/script" 2>&1
cat "$tmpdir/script"

grep -q 'sdt_nbdkit:connection_accept' "$tmpdir/script" ||
  fail "connection_accept did not fire"
grep -q 'sdt_nbdkit:connection_close' "$tmpdir/script" ||
  fail "connection_close did not fire"
# request_start (id, cookie, command, offset, count, flags), perf's arg1
# to arg6: the read is command 0 at offset 12288 for 4096 bytes, the
# write command 1, 512.
read_line="$(grep 'sdt_nbdkit:request_start' "$tmpdir/script" |
             grep -E ' arg3=0 arg4=12288 arg5=4096 arg6=0( |$)' | head -1)"
[ -n "$read_line" ] || fail "no request_start: read at offset 12288 count 4096"
grep 'sdt_nbdkit:request_start' "$tmpdir/script" |
  grep -Eq ' arg3=1 arg4=12288 arg5=512 arg6=[0-9]+( |$)' ||
  fail "no request_start with offset 12288 count 512 (the write)"
cookie="$(echo "$read_line" | grep -Eo 'arg2=[0-9a-fx]+' || :)"
if [ -n "$cookie" ]; then
  grep 'sdt_nbdkit:request_done' "$tmpdir/script" | grep -q "$cookie " ||
    fail "no request_done with the read's cookie ($cookie)"
fi
starts="$(grep -c 'sdt_nbdkit:request_start' "$tmpdir/script")"
dones="$(grep -c 'sdt_nbdkit:request_done' "$tmpdir/script")"
echo "request_start: $starts, request_done: $dones"
[ "$starts" -eq "$dones" ] || fail "request_start and request_done differ"
