#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A completion whose reply carries no data (a write's, here) is
# answered on the completing thread when that cannot wait on the
# client (async.c's answer_now), and only then.
#
# 1. Taken: 300 writes one after another, completed by the server's
#    event loop (example-async loop=server), wake the connection's
#    replier thread ("nbdkit-replier") almost never; with
#    -D nbdkit.async.direct=0 every one of them wakes it.  Reads keep
#    going through the replier either way.
# 2. Never waiting on a client: the event loop completes the requests
#    of every connection.  Connection A sends 3000 small writes and
#    reads none of the replies, which fill its socket; connection B
#    meanwhile writes and reads back 100 blocks, which must finish in
#    seconds (if the loop sent A's replies itself once A's socket is
#    full, it would block there, and B would wait for ever).  Then A
#    reads its 3000 replies (each cookie once, no error), and the
#    blocks hold A's last writes.
# 3. The same over TCP, whose queue the kernel counts differently: A
#    sends 300000 flushes (4.8 MB of replies, more than TCP's largest
#    send buffer) and reads nothing while B works.
source "$(dirname "$0")/functions.sh"
requires_cmd python3
requires_cmd nbdsh

cat > "$tmpdir/seq.py" <<'PY'
import glob, nbd, sys
pid = sys.argv[2]
def replier_switches():
    for t in glob.glob("/proc/%s/task/*" % pid):
        if open(t + "/comm").read().strip() == "nbdkit-replier":
            for line in open(t + "/status"):
                if line.startswith("voluntary_ctxt_switches"):
                    return int(line.split()[1])
    raise SystemExit("no nbdkit-replier thread in the server")
h = nbd.NBD()
h.connect_uri(sys.argv[1])
# Answered, so transmission (and the replier) has started.
h.pwrite(b"x" * 4096, 0)
before = replier_switches()
for i in range(300):
    h.pwrite(bytes([65 + i % 26]) * 4096, 8192)
writes = replier_switches() - before
assert h.pread(4096, 8192) == bytes([65 + 299 % 26]) * 4096
before = replier_switches()
for i in range(20):
    h.pread(4096, 8192)
print(writes, replier_switches() - before)
h.shutdown()
PY

for direct in 1 0; do
  start_server example-async size=1M delay=0 loop=server \
    -D nbdkit.async.direct=$direct
  read -r n nr < <(t /usr/bin/python3 "$tmpdir/seq.py" "$uri" "$server_pid")
  echo "async.direct=$direct: the replier woke $n times for 300 writes, $nr for 20 reads"
  [ "$nr" -ge 15 ] || fail "the replier woke $nr times for 20 reads: it sends their data"
  if [ "$direct" = 1 ]; then
    [ "$n" -lt 30 ] || fail "the replier woke $n times: completions were not answered on the loop"
  else
    [ "$n" -ge 250 ] || fail "async.direct=0: the replier woke only $n times"
  fi
  stop_server
done

# 2. A client that reads nothing, beside one that does: A writes
# blocks 0-99 thirty times over, B works past 512 KiB.
# deaf.py ADDRESS KIND N: a client that sends N requests and reads no
# reply until told to (a line on stdin).  ADDRESS: a Unix socket's
# path, or a TCP port on 127.0.0.1.  KIND "writes": 512-byte writes,
# write i to block i % 100 with byte 65 + i % 26; "flushes": flushes.
cat > "$tmpdir/deaf.py" <<'PY'
import os, socket, struct, sys
sys.path.insert(0, os.environ["srcdir"])
import nbd_raw
address, kind, N = sys.argv[1], sys.argv[2], int(sys.argv[3])
if address.isdigit():
    s = socket.socket(socket.AF_INET)
    address = ("127.0.0.1", int(address))
else:
    s = socket.socket(socket.AF_UNIX)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(address)
nbd_raw.greet(s)
nbd_raw.go(s)
if kind == "writes":
    reqs = (struct.pack(">IHHQQI", 0x25609513, 0, 1, 1000 + i,
                        (i % 100) * 4096, 512) + bytes([65 + i % 26]) * 512
            for i in range(N))
else:
    reqs = (struct.pack(">IHHQQI", 0x25609513, 0, 3, 1000 + i, 0, 0)
            for i in range(N))
s.sendall(b"".join(reqs))
print("sent", flush=True)
sys.stdin.readline()            # until B is done
seen = set()
for _ in range(N):
    magic, err, cookie = struct.unpack(">IIQ", nbd_raw.recv_exact(s, 16))
    assert magic == 0x67446698 and err == 0, (magic, err)
    assert 1000 <= cookie < 1000 + N and cookie not in seen, cookie
    seen.add(cookie)
print("A: %d replies, each cookie once, no error" % len(seen))
PY
cat > "$tmpdir/busy.py" <<'PY'
import nbd, sys, time
h = nbd.NBD()
h.connect_uri(sys.argv[1])
t0 = time.monotonic()
for i in range(100):
    h.pwrite(bytes([97 + i % 26]) * 4096, 524288 + i * 4096)
for i in range(100):
    assert h.pread(4096, 524288 + i * 4096) == bytes([97 + i % 26]) * 4096
print("B: 100 writes and reads in %.2f s" % (time.monotonic() - t0))
h.shutdown()
PY
# deaf_beside_busy ADDRESS KIND N: deaf.py sends its N requests; once
# its replies wait in its socket, B must finish within 30 s; then A
# reads all its replies.
deaf_beside_busy ()
{
  local line out
  coproc A { srcdir="$(cd "$srcdir" && pwd)" \
               /usr/bin/python3 "$tmpdir/deaf.py" "$@"; }
  local a_in=${A[1]} a_out=${A[0]}
  read -r -t 60 line <&"$a_out" || fail "A did not send its requests"
  [ "$line" = sent ] || fail "A: $line"
  sleep 1                       # A's replies fill its socket and wait
  out=$(timeout 30 /usr/bin/python3 "$tmpdir/busy.py" "$uri") ||
    fail "B did not finish within 30 s beside a client that reads nothing"
  echo "$out"
  echo go >&"$a_in"
  read -r -t 120 line <&"$a_out" || fail "A did not get its replies"
  echo "$line"
  case "$line" in "A: $3 replies"*) ;; *) fail "A: $line" ;; esac
}

start_server example-async size=1M delay=1 loop=server
deaf_beside_busy "$sock" writes 3000
# Write i went to block i % 100 with byte 65 + i % 26; the last of
# block b was write 2900 + b.
nbdsh -u "$uri" -c '
for b in range(100):
    want = bytes([65 + (2900 + b) % 26]) * 512
    assert h.pread(512, b * 4096) == want, b
print("A: blocks 0-99 hold its last writes")'
stop_server

# 3. Over TCP.
start_tcp_server example-async size=1M delay=1 loop=server
deaf_beside_busy "$port" flushes 300000
stop_server
