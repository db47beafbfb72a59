#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Filter ABI: Debian's prebuilt filters that are not about the data
# (ip, limit, exitlast, exitwhen, pause, rate, delay, log, stats,
# tls-fallback), loaded by path into OUR server over our file plugin,
# serve, and do their one visible thing, as under Debian's nbdkit
# running the same command (tests/debian-filters.sh).
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"
requires_cmd certtool

disk="$tmpdir/disk.img"
make_pattern "$disk" $((1024 * 1024))
dfilter () { echo "--filter=$debian_filterdir/nbdkit-$1-filter.so"; }

# A client's view in one line: connected or refused, and the first
# bytes' hash.
cat > "$tmpdir/connect" <<'EOF'
#!/bin/sh
URI="$1" nbdsh -c '
import hashlib, os
try:
    h.connect_uri(os.environ["URI"])
    print("served", h.get_size(), hashlib.sha256(h.pread(4096, 0)).hexdigest())
except nbd.Error as e:
    print("refused")
'
EOF
chmod +x "$tmpdir/connect"

# ip: over a Unix socket, by uid and by "anyunix".
compare ip-allow "$tmpdir/connect" --filter=ip file "$disk" \
  allow=uid:"$(id -u)" deny=all
expect_in ip-allow-served "$ours" '^served 1048576 '
compare ip-deny "$tmpdir/connect" --filter=ip file "$disk" deny=anyunix
expect_in ip-deny-refused "$ours" '^refused$'

# limit: a second client is refused while the first is connected.
cat > "$tmpdir/two" <<'EOF'
#!/bin/sh
URI="$1" nbdsh -c '
import os
h.connect_uri(os.environ["URI"])
h2 = nbd.NBD()
try:
    h2.connect_uri(os.environ["URI"])
    print("second served")
except nbd.Error:
    print("second refused")
print("first still served", len(h.pread(512, 0)))
'
EOF
chmod +x "$tmpdir/two"
compare limit "$tmpdir/two" --filter=limit file "$disk" limit=1
expect_in limit-refused "$ours" '^second refused$'
compare limit-2 "$tmpdir/two" --filter=limit file "$disk" limit=2
expect_in limit-2-served "$ours" '^second served$'

# rate and delay slow the requests down: a read of 512 KiB at 8 Mbit/s
# with a small bucket takes about half a second, a read with rdelay=300ms at least that.
cat > "$tmpdir/timed" <<'EOF'
#!/bin/sh
nbdsh -u "$1" -c '
import time
t = time.monotonic()
h.pread(524288, 0)
print("slow" if time.monotonic() - t >= 0.25 else "fast")
'
EOF
chmod +x "$tmpdir/timed"
compare rate "$tmpdir/timed" --filter=rate file "$disk" rate=8M burstiness=0.1
expect_in rate-slow "$ours" '^slow$'
compare delay "$tmpdir/timed" --filter=delay file "$disk" rdelay=300ms
expect_in delay-slow "$ours" '^slow$'
compare delay-read read --filter=delay file "$disk" delay-read=1ms \
  delay-write=1ms

# log and stats: their files, written by the filter, name what was done.
for server in ours ref; do
  nbdkit="$NBDKIT"; [ $server = ours ] || nbdkit="$ref_nbdkit"
  t "$nbdkit" -U - "$(dfilter log)" "$(dfilter stats)" file "$disk" \
    logfile="$tmpdir/$server.log" statsfile="$tmpdir/$server.stats" \
    --run "$probedir/write \"\$uri\"" > "$tmpdir/$server.logrun" 2>&1 ||
    note_failure log-stats-$server "$(cat "$tmpdir/$server.logrun")"
  expect_in log-$server "$tmpdir/$server.log" ' connection=1 Connect export='
  expect_in log-$server-write "$tmpdir/$server.log" ' Write id=[0-9]+ offset=0x0 count=0x10000 fua=0 \.\.\.$'
  expect_in log-$server-zero "$tmpdir/$server.log" ' Zero id=[0-9]+ offset=0x10000 count=0x20000 '
  expect_in stats-$server "$tmpdir/$server.stats" '^write: [0-9]+ ops'
  expect_in stats-$server-read "$tmpdir/$server.stats" '^read: [0-9]+ ops'
done

# pause: the control socket answers 'p' with 'P' and 'r' with 'R', and
# requests flow again after the resume.
cat > "$tmpdir/pause" <<EOF
#!/bin/sh
nbdsh -u "\$1" -c '
import socket
s = socket.socket(socket.AF_UNIX)
s.connect("$tmpdir/pause.ctl")
for c in (b"p", b"r", b"?"):
    s.sendall(c)
    print(c, s.recv(1))
print("served", len(h.pread(4096, 0)))
'
EOF
chmod +x "$tmpdir/pause"
compare pause "$tmpdir/pause" --filter=pause file "$disk" \
  pause-control="$tmpdir/pause.ctl"
expect_in pause-resumed "$ours" "^b'r' b'R'\$"

# exitlast and exitwhen: the server goes away on its own.
# exits_after LABEL TRIGGER ARGS...: start each server in the
# background, run TRIGGER (a shell command, $uri set), and require that
# the server exits within 20 s.
exits_after ()
{
  local label="$1" trigger="$2" server nbdkit pid i
  shift 2
  for server in ours ref; do
    nbdkit="$NBDKIT"; [ $server = ours ] || nbdkit="$ref_nbdkit"
    rm -f "$tmpdir/exit.sock" "$tmpdir/exit.pid" "$tmpdir/trigger"
    "$nbdkit" -f -U "$tmpdir/exit.sock" -P "$tmpdir/exit.pid" "$@" \
      2> "$tmpdir/exit.err" &
    pid=$!
    cleanup_fn _kill_pid "$pid"
    if ! wait_for 20 -s "$tmpdir/exit.pid"; then
      note_failure "$label-$server" "did not start: $(cat "$tmpdir/exit.err")"
      continue
    fi
    uri="nbd+unix:///?socket=$tmpdir/exit.sock" sh -c "$trigger" ||
      note_failure "$label-$server" "trigger failed: $trigger"
    for (( i = 0; i < 200; i++ )); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      note_failure "$label-$server" "server still running 20 s later"
      _kill_pid "$pid"
    fi
    wait "$pid" 2>/dev/null || :
  done
}
exits_after exitlast 'nbdinfo --size "$uri" >/dev/null' \
  "$(dfilter exitlast)" file "$disk"
exits_after exitwhen-created "nbdinfo --size \"\$uri\" >/dev/null &&
  touch $tmpdir/trigger" \
  "$(dfilter exitwhen)" file "$disk" \
  exit-when-file-created="$tmpdir/trigger" exit-when-poll=1

# tls-fallback: a client without TLS gets the readme export instead of
# the data; a client with TLS gets the data.
t "$srcdir/make-tls-files.sh" "$tmpdir/tls" >/dev/null
cat > "$tmpdir/tlsclients" <<EOF
#!/bin/sh
# The socket from the URI (Debian's nbdkit adds tls-certificates=).
sock="\$(echo "\$1" | sed 's/.*socket=//; s/&.*//')"
SOCK="\$sock" nbdsh -c '
import hashlib, os
h.set_tls(nbd.TLS_DISABLE)
h.connect_unix(os.environ["SOCK"])
print("plain", h.get_size(), h.pread(h.get_size(), 0).rstrip(b"\\0"))
'
SOCK="\$sock" nbdsh -c '
import hashlib, os
h.set_tls(nbd.TLS_REQUIRE)
h.set_tls_certificates("$tmpdir/tls/client")
h.connect_unix(os.environ["SOCK"])
print("tls", h.get_size(), hashlib.sha256(h.pread(4096, 0)).hexdigest())
'
EOF
chmod +x "$tmpdir/tlsclients"
compare tls-fallback "$tmpdir/tlsclients" --tls=on \
  --tls-certificates="$tmpdir/tls/server" --filter=tls-fallback \
  file "$disk" tlsreadme="use TLS, please"
# libnbd's pread answers bytes or a bytearray, by version.
expect_in tls-fallback-readme "$ours" \
  "^plain [0-9]+ (bytearray\\()?b'use TLS, please'\\)?\$"
expect_in tls-fallback-data "$ours" '^tls 1048576 '

finish
