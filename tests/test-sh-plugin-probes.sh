#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The sh plugin's probe: sh_script fires after each run of the script
# with the method, its exit code, the time it took and the errno it
# printed: a read that succeeds (0, errno 0), one that fails with
# "ENOSPC ..." (1, errno 28), a missing method (2), a false one (3).
# Its id and cookie are those of the read's request_start (r1, r2 in
# trace_join), or the connection's id and cookie 0 for the methods run
# outside any request (conn).
source "$(dirname "$0")/functions.sh"
requires_cmd bpftrace nbdsh
requires_root
tracing_lock

so="$abs_top_builddir/plugins/sh/.libs/nbdkit-sh-plugin.so"
[ -f "$so" ] || fail "$so not built"
script="$tmpdir/probe.sh"
cat > "$script" <<'SH'
#!/bin/sh
case "$1" in
  get_size) echo 1M ;;
  is_rotational) exit 3 ;;
  pread)
    if [ "$4" = 512 ]; then echo 'ENOSPC full' >&2; exit 1; fi
    sleep 0.2; head -c $3 /dev/zero ;;
  *) exit 2 ;;
esac
SH
chmod +x "$script"

start_server sh "$script"
trace_start "$tmpdir/trace" "$(request_start_clause)
usdt:$so:nbdkit:sh_script {
  printf(\"%llu sh_script %d %d %s %d %d %d\\n\", nsecs, arg0, arg1, str(arg2),
         arg3, arg4 >= 200000000, arg5); }"
t nbdsh -u "$uri" -c '
h.pread(512, 0)
try:
    h.pread(512, 512)
except nbd.Error:
    pass'
trace_stop
trace_in_order "$tmpdir/trace" > "$tmpdir/ordered"
trace_join "$tmpdir/ordered" | tee "$tmpdir/got"
for want in "r1 pread 0 1 0" "r2 pread 1 0 28" "conn get_size 0 0 0" \
            "conn open 2 0 0" "conn is_rotational 3 0 0"; do
  grep -qx "sh_script $want" "$tmpdir/got" ||
    fail "no sh_script '$want' (method, exit code, took >= 0.2 s, errno)"
done
