#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# An eval plugin's probe fires under bpftrace: the pread= and pwrite=
# fragments run `nbdkit-probe NAME ARG1 ARG2 TEXT', and bpftrace on the
# server's generic probe "user" sees each with its name, integers and
# text, and the (id, cookie) of the server's request_start for that
# request; config= fires it outside any connection (id and cookie 0).
# It would catch: eval's fragments (run under /bin/sh, not executed)
# not getting the helper on PATH or the pipe, and probes from
# configuration time dropped.
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh timeout

# bpftrace first: the config probe fires while the server starts.
user_probe_program > "$tmpdir/trace.bt"
start_bpftrace 60 "$tmpdir/out" "$tmpdir/out.err" "$tmpdir/trace.bt"

t "$NBDKIT" -U - eval \
  get_size='echo 1M' \
  config='nbdkit-probe evalconf 0 0 "$2=$3"' \
  pread='nbdkit-probe evalread "$3" "$4" "eval read" &&
         dd if=/dev/zero count="$3" iflag=count_bytes 2>/dev/null' \
  pwrite='cat >/dev/null; nbdkit-probe evalwrite "$3" -"$4"' \
  mykey=myvalue \
  --run 'nbdsh -u "$uri" -c "h.pread(2048, 4096); h.pwrite(b\"y\" * 100, 512)"' ||
  fail "the eval plugin under bpftrace failed"
sleep 1
interrupt_tracer "$bt"
trace_in_order "$tmpdir/out" \
  > "$tmpdir/sorted"
cat "$tmpdir/sorted"

grep -q '^user 0 0 evalconf 0 0 \[mykey=myvalue\]$' "$tmpdir/sorted" ||
  fail "no user probe evalconf (id 0, cookie 0, mykey=myvalue)"
set -- $(awk '$1 == "start" && $4 == 0 && $5 == 4096' "$tmpdir/sorted")
[ "$#" -eq 5 ] || fail "no request_start for the read"
grep -q "^user $2 $3 evalread 2048 4096 \[eval read\]\$" "$tmpdir/sorted" ||
  fail "no user probe evalread with the read's id $2 and cookie $3"
set -- $(awk '$1 == "start" && $4 == 1 && $5 == 512' "$tmpdir/sorted")
[ "$#" -eq 5 ] || fail "no request_start for the write"
grep -q "^user $2 $3 evalwrite 100 -512 \[\]\$" "$tmpdir/sorted" ||
  fail "no user probe evalwrite with the write's id $2 and cookie $3"
echo "OK: nbdkit-probe in eval fragments fires the user probe"
