#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Errors of the upstream reach the client through the nbd plugin's
# asynchronous path as they do through its synchronous path
# (-D nbdkit.async=0) and through Debian's nbdkit 1.32 nbd plugin: an
# upstream with the error filter fails reads with EPERM, writes with
# ENOSPC, zeroes with EIO and trims with EINVAL (flushes succeed), and a client sees those errors, each request on its own;
# once the upstream stops failing, the same requests succeed.
# Catches: an error turned into success or into another error on the
# asynchronous path, a failed completion that leaves the request
# hanging.
source "$(dirname "$0")/functions.sh"
source "$srcdir/nbd-plugin-functions.sh"
requires_cmd nbdsh python3
[ -x /usr/bin/nbdkit ] && [ -e "$debian_plugindir/nbdkit-nbd-plugin.so" ] ||
  { echo "$0: Debian's nbdkit nbd plugin is not installed"; exit 77; }

fails="$tmpdir/fail"
args=()
for e in pread=EPERM pwrite=ENOSPC zero=EIO trim=EINVAL; do
  args+=(error-$e error-${e%=*}-rate=100% error-${e%=*}-file="$fails")
done
start_upstream --filter=error memory 4M "${args[@]}"

# Each request, sent together with the others (so that the failures
# complete while other requests are in flight), and its outcome.
cat > "$tmpdir/errs.py" <<'PY'
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
out = {}
def cb(name):
    def f(err):
        out[name] = nbd.Error("", err.value).errno if err.value else "ok"
        return 1
    return f
buf = nbd.Buffer(4096)
for i in range(4):
    h.aio_pread(buf, 4096 * i, cb("pread%d" % i))
h.aio_pwrite(bytearray(b"w" * 4096), 65536, cb("pwrite"))
h.aio_pwrite(bytearray(b"w" * 4096), 65536, cb("pwrite-fua"), nbd.CMD_FLAG_FUA)
h.aio_zero(65536, 131072, cb("zero"))
h.aio_zero(65536, 131072, cb("zero-nohole"), nbd.CMD_FLAG_NO_HOLE)
h.aio_trim(65536, 262144, cb("trim"))
h.aio_flush(cb("flush"))
while h.aio_in_flight() > 0:
    h.poll(-1)
for k in sorted(out):
    print(k, out[k])
h.shutdown()
PY

rm -f "$tmpdir/debian.pid"
/usr/bin/nbdkit -f -U "$tmpdir/debian.sock" -P "$tmpdir/debian.pid" \
  nbd socket="$up_sock" 9>&- &
cleanup_fn _kill_pid $!
wait_for 20 -s "$tmpdir/debian.pid" || fail "Debian's nbdkit did not start"

# outcomes NAME URI: the client's view, in $tmpdir/NAME.
outcomes ()
{
  t python3 "$tmpdir/errs.py" "$2" > "$tmpdir/$1" 2>/dev/null ||
    fail "$1: the client failed"
}

touch "$fails"
start_server nbd socket="$up_sock"
outcomes async "$uri"
stop_server
start_server -D nbdkit.async=0 nbd socket="$up_sock"
outcomes sync "$uri"
stop_server
outcomes debian "nbd+unix:///?socket=$tmpdir/debian.sock"
cat "$tmpdir/async"
cat > "$tmpdir/want" <<'OUT'
flush ok
pread0 EPERM
pread1 EPERM
pread2 EPERM
pread3 EPERM
pwrite ENOSPC
pwrite-fua ENOSPC
trim EINVAL
zero EIO
zero-nohole EIO
OUT
diff -u "$tmpdir/want" "$tmpdir/async" || fail "the wrong errors on the asynchronous path"
diff -u "$tmpdir/sync" "$tmpdir/async" || fail "async and sync paths differ"
diff -u "$tmpdir/debian" "$tmpdir/async" || fail "async and Debian's nbdkit differ"

rm "$fails"
start_server nbd socket="$up_sock"
outcomes async-ok "$uri"
[ "$(grep -vc ' ok$' "$tmpdir/async-ok")" = 0 ] ||
  { cat "$tmpdir/async-ok"; fail "requests failed once the upstream stopped failing"; }
