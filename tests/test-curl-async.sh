#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The curl plugin's asynchronous path (its event loop, nbdkit-async(3))
# gives the client the bytes the synchronous path (-D nbdkit.async=0)
# and Debian's nbdkit give for the same URL, and overlaps requests on
# few of the server's threads:
#  - nbdcopy through each of the three: the file's bytes;
#  - 16 reads of 32 KiB sent together to a web server that answers
#    each GET after 300 ms (tests/curl-range-server.py), with -t 2 and
#    connections=16: on the asynchronous path they all finish within
#    1.5 s with at most 8 server threads, request_submit fired 16 times
#    with 12 or more in flight at once (bpftrace, where present); on
#    the synchronous path two threads take them two at a time (8 rounds,
#    2 s or more), and no request_submit fires.  Both read the right
#    bytes.
source "$(dirname "$0")/functions.sh"
source "$srcdir/nginx-start.sh"
requires_cmd nbdcopy nbdsh python3 cmp
# Timing against a rate-limited server: a busy machine should not decide.
tracing_lock
debian_nbdkit=/usr/bin/nbdkit
[ -x "$debian_nbdkit" ] || debian_nbdkit=/usr/sbin/nbdkit

mkdir -p "$tmpdir/www"
img="$tmpdir/www/disk.img"
head -c $(( 3 * 1024 * 1024 + 1234 )) /dev/urandom > "$img"
head -c $(( 16 * 32768 )) /dev/urandom > "$tmpdir/slow.img"
port="$(free_port)"
start_nginx "$tmpdir/nginx" "127.0.0.1:$port" "root $tmpdir/www;"
url="http://127.0.0.1:$port/disk.img"
export tmpdir

# Bytes: ours (async), ours (sync), Debian's.
t "$NBDKIT" -U - curl "$url" --run 'nbdcopy "$uri" "$tmpdir/async"' ||
  fail "async: nbdcopy failed"
cmp "$img" "$tmpdir/async" || fail "async: bytes differ from the file"
t "$NBDKIT" -D nbdkit.async=0 -U - curl "$url" \
  --run 'nbdcopy "$uri" "$tmpdir/sync"' || fail "sync: nbdcopy failed"
cmp "$img" "$tmpdir/sync" || fail "sync: bytes differ from the file"
if [ -x "$debian_nbdkit" ] &&
   "$debian_nbdkit" curl --dump-plugin >/dev/null 2>&1; then
  t "$debian_nbdkit" -U - curl "$url" \
    --run 'nbdcopy "$uri" "$tmpdir/debian"' || fail "Debian's nbdkit failed"
  cmp "$tmpdir/async" "$tmpdir/debian" || fail "bytes differ from Debian's"
else
  echo "$0: Debian's nbdkit curl plugin not installed, comparison skipped"
fi

cat > "$tmpdir/burst.py" <<'PY'
import nbd, os, sys, time
h = nbd.NBD()
h.connect_unix(sys.argv[1])
pid = int(sys.argv[2])
want = open(sys.argv[3], "rb").read()
def threads():
    return len(os.listdir("/proc/%d/task" % pid))
t0 = time.monotonic()
bufs = [nbd.Buffer(32768) for i in range(16)]
for i, b in enumerate(bufs):
    h.aio_pread(b, i * 32768)
most = 0
while h.aio_in_flight() > 0:
    most = max(most, threads())
    h.poll(10)
el = time.monotonic() - t0
for i, b in enumerate(bufs):
    assert b.to_bytearray() == want[i * 32768:(i + 1) * 32768], i
print("elapsed %.3f threads %d" % (el, most))
h.shutdown()
PY
timeout -k 5 120 /usr/bin/python3 "$srcdir/curl-range-server.py" \
  "$tmpdir/slow.img" "$tmpdir/port" 0 300 2> "$tmpdir/http.log" 9>&- &
cleanup_fn _kill_pid $!
wait_for 10 -s "$tmpdir/port" || fail "the range server did not start"
slow="http://127.0.0.1:$(cat "$tmpdir/port")/disk.img"

# burst ARGS...: serve the slow file with ARGS, send the 16 reads; sets
# $el and $most.
burst ()
{
  local out
  start_server -t 2 "$@" curl "$slow" connections=16
  out=$(t python3 "$tmpdir/burst.py" "$sock" "$server_pid" \
          "$tmpdir/slow.img") || fail "$*: the reads failed: $out"
  echo "$*: $out"
  read -r _ el _ most <<< "$out"
  stop_server
}

bt=
if [ "$(id -u)" = 0 ] && command -v bpftrace >/dev/null &&
   grep -q '^#define ENABLE_PROBES 1' "$abs_top_builddir/config.h"; then
  b="$server_binary"
  start_bpftrace 60 "$tmpdir/trace" "$tmpdir/trace.err" -e "
    usdt:$b:nbdkit:request_submit { @n++; @in++; if (@in > @most) { @most = @in; } }
    usdt:$b:nbdkit:request_complete { @in--; }
    END { printf(\"submits %d most %d\\n\", @n, @most); clear(@n); clear(@in); clear(@most); }"
fi
burst
if [ -n "$bt" ]; then
  interrupt_tracer "$bt"
  cat "$tmpdir/trace"
  read -r _ n _ m < <(grep '^submits ' "$tmpdir/trace")
  [ "$n" -eq 16 ] || fail "async: $n request_submit, not 16"
  [ "$m" -ge 12 ] || fail "async: at most $m requests in flight"
fi
awk -v e="$el" 'BEGIN { exit !(e < 1.5) }' ||
  fail "async: 16 slow reads took $el s: they did not overlap"
[ "$most" -le 8 ] || fail "async: the server had $most threads"

bt=
if [ "$(id -u)" = 0 ] && command -v bpftrace >/dev/null &&
   grep -q '^#define ENABLE_PROBES 1' "$abs_top_builddir/config.h"; then
  start_bpftrace 60 "$tmpdir/trace" "$tmpdir/trace.err" -e "
    usdt:$b:nbdkit:request_submit { @n++; }
    END { printf(\"submits %d\\n\", @n); clear(@n); }"
fi
burst -D nbdkit.async=0
if [ -n "$bt" ]; then
  interrupt_tracer "$bt"
  cat "$tmpdir/trace"
  grep -qx 'submits 0' "$tmpdir/trace" ||
    fail "sync: request_submit fired with -D nbdkit.async=0"
fi
awk -v e="$el" 'BEGIN { exit !(e >= 2.0) }' ||
  fail "sync: 16 slow reads on 2 threads took only $el s"
