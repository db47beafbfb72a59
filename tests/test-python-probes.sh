#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The python plugin's probes, under bpftrace: python_call_start and
# python_call_done fire around each call into the script, with the
# connection id and the request's cookie (0 outside a connection), the
# callback's name, the time spent (> 0), the errno the server got and
# the exception ("TYPE: MESSAGE", "" on success); nbdkit.probe() in the
# script fires the server's generic probe "user" with its arguments and
# the same cookie as the pread it was called from.  Catches probes
# missing, arguments out of place, a wrong or missing errno or
# exception text, and a cookie that does not join.
source "$(dirname "$0")/functions.sh"
requires_cmd bpftrace nbdsh readelf
requires_root
requires_probes
so="$abs_top_builddir/plugins/python/.libs/nbdkit-python-plugin.so"
[ -f "$so" ] || { echo "$0: SKIP: the python plugin is not built"; exit 77; }
tracing_lock

readelf -n "$so" > "$tmpdir/notes"
for p in python_call_start python_call_done; do
  grep -q "Name: $p\$" "$tmpdir/notes" || fail "no note $p in $so"
done

cat > "$tmpdir/probed.py" <<'PY'
import errno
import nbdkit

API_VERSION = 2

def open(readonly):
    return 1

def get_size(h):
    return 1024 * 1024

def pread(h, buf, offset, flags):
    if offset == 4096:
        raise OSError(errno.ENOSPC, "full")
    nbdkit.probe("py_mark", offset, len(buf), "from python")
    buf[:] = bytes(len(buf))
PY

# The server's pid picks this test's events out of everything traced.
cat > "$tmpdir/trace.bt" <<EOF2
usdt:$so:nbdkit:python_call_start {
  printf("start %d %d %d %s\\n", pid, arg0, arg1 != 0, str(arg2)); }
usdt:$so:nbdkit:python_call_done {
  printf("done %d %d %d %s %d %d %s\\n", pid, arg0, arg1, str(arg2),
         arg3 > 0, arg4, str(arg5)); }
usdt:$server_binary:nbdkit:user {
  printf("user %d %d %d %s %d %d %s\\n", pid, arg0, arg1, str(arg2),
         arg3, arg4, str(arg5)); }
EOF2
start_bpftrace 90 "$tmpdir/trace" "$tmpdir/trace.err" "$tmpdir/trace.bt"

t "$NBDKIT" -U - python "$tmpdir/probed.py" \
  --run "echo \$PPID > $tmpdir/pid; nbdsh -u \"\$uri\" -c '
h.pread(512, 0)
try:
    h.pread(512, 4096)
    raise Exception(\"no error\")
except nbd.Error as e:
    assert e.errno == \"ENOSPC\", e.errno
'"
sleep 1
interrupt_tracer "$bt"
pid="$(cat "$tmpdir/pid")"
grep " $pid " "$tmpdir/trace" > "$tmpdir/ours" || :
cat "$tmpdir/ours"

# Outside a connection: id 0, cookie 0.
grep -qx "done $pid 0 0 config_complete 1 0 " "$tmpdir/ours" ||
  fail "no python_call_done for config_complete (id 0, cookie 0)"
grep -qE "^start $pid [1-9][0-9]* 0 open\$" "$tmpdir/ours" ||
  fail "no python_call_start for open in a connection"
grep -qE "^start $pid [1-9][0-9]* 1 pread\$" "$tmpdir/ours" ||
  fail "no python_call_start for pread with a cookie"
# The good read, and the failed one with its errno and exception.
good="$(grep -E "^done $pid [1-9][0-9]* [1-9][0-9]* pread 1 0 \$" \
  "$tmpdir/ours" || :)"
[ -n "$good" ] || fail "no python_call_done for the good pread"
grep -qE "^done $pid [1-9][0-9]* [1-9][0-9]* pread 1 28 OSError: \[Errno 28\] full\$" \
  "$tmpdir/ours" || fail "no python_call_done with ENOSPC and the exception"
# The script's own probe: in the same request as the good pread.
cookie="$(echo "$good" | awk '{ print $4 }')"
grep -qE "^user $pid [1-9][0-9]* $cookie py_mark 0 512 from python\$" \
  "$tmpdir/ours" || fail "nbdkit.probe: no user probe with cookie $cookie"
