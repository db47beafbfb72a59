#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The sh plugin's probe: sh_script fires after each run of the script
# with the method, its exit code, the time it took and the errno it
# printed: a read that succeeds (0, errno 0), one that fails with
# "ENOSPC ..." (1, errno 28), a missing method (2), a false one (3).
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
trace_start "$tmpdir/trace" "usdt:$so:nbdkit:sh_script {
  printf(\"%s %d %d %d\\n\", str(arg0), arg1, arg2 >= 200000000, arg3); }"
t nbdsh -u "$uri" -c '
h.pread(512, 0)
try:
    h.pread(512, 512)
except nbd.Error:
    pass'
trace_stop
cat "$tmpdir/trace"
for want in "pread 0 1 0" "pread 1 0 28" "get_size 0 0 0" "open 2 0 0" \
            "is_rotational 3 0 0"; do
  grep -qx "$want" "$tmpdir/trace" ||
    fail "no sh_script '$want' (method, exit code, took >= 0.2 s, errno)"
done
