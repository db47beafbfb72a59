#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A completion answers its request on the completing thread when that
# cannot wait on the client (async.c's answer_now), and only then.
#
# 1. Taken: 300 reads one after another, completed by the server's
#    event loop (example-async loop=server), wake the connection's
#    replier thread ("nbdkit-replier") almost never; with
#    -D nbdkit.async.direct=0 every one of them wakes it.
# 2. Never waiting on a client: the event loop completes the requests
#    of every connection.  Connection A sends 2000 reads and reads none
#    of the replies; connection B meanwhile writes and reads back 100
#    blocks, which must finish in seconds (if the loop sent A's replies
#    itself it would block in A's full socket, and B would wait for
#    ever).  Then A reads its 2000 replies: each cookie once, each with
#    the bytes written there.
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
h.pwrite(b"d" * 4096, 8192)
before = replier_switches()
for i in range(300):
    assert h.pread(4096, 8192) == b"d" * 4096
print(replier_switches() - before)
h.shutdown()
PY

for direct in 1 0; do
  start_server example-async size=1M delay=0 loop=server \
    -D nbdkit.async.direct=$direct
  n=$(t /usr/bin/python3 "$tmpdir/seq.py" "$uri" "$server_pid")
  echo "async.direct=$direct: the replier woke $n times for 300 reads"
  if [ "$direct" = 1 ]; then
    [ "$n" -lt 30 ] || fail "the replier woke $n times: completions were not answered on the loop"
  else
    [ "$n" -ge 250 ] || fail "async.direct=0: the replier woke only $n times"
  fi
  stop_server
done

# 2. A client that reads nothing, beside one that does.  Blocks 0-99
# hold 100 known patterns first; A reads them, B works past 512 KiB.
cat > "$tmpdir/fill.py" <<'PY'
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
for i in range(100):
    h.pwrite(bytes([65 + i % 26]) * 4096, i * 4096)
h.shutdown()
PY
cat > "$tmpdir/deaf.py" <<'PY'
import os, socket, struct, sys
sys.path.insert(0, os.environ["srcdir"])
import nbd_raw
N = 2000
s = socket.socket(socket.AF_UNIX)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(sys.argv[1])
nbd_raw.greet(s)
nbd_raw.go(s)
s.sendall(b"".join(struct.pack(">IHHQQI", 0x25609513, 0, 0, 1000 + i,
                               (i % 100) * 4096, 4096) for i in range(N)))
print("sent", flush=True)
sys.stdin.readline()            # until B is done
seen = set()
for _ in range(N):
    magic, err, cookie = struct.unpack(">IIQ", nbd_raw.recv_exact(s, 16))
    assert magic == 0x67446698 and err == 0, (magic, err)
    assert 1000 <= cookie < 1000 + N and cookie not in seen, cookie
    seen.add(cookie)
    block = (cookie - 1000) % 100
    assert nbd_raw.recv_exact(s, 4096) == bytes([65 + block % 26]) * 4096, cookie
print("A: %d replies, each cookie once, with the bytes of its block" % len(seen))
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
start_server example-async size=1M delay=1 loop=server
t /usr/bin/python3 "$tmpdir/fill.py" "$uri"
coproc A { srcdir="$(cd "$srcdir" && pwd)" /usr/bin/python3 "$tmpdir/deaf.py" "$sock"; }
a_in=${A[1]} a_out=${A[0]}
read -r -t 30 line <&"$a_out" || fail "A did not send its requests"
[ "$line" = sent ] || fail "A: $line"
sleep 1                         # A's replies fill its socket and wait
out=$(timeout 30 /usr/bin/python3 "$tmpdir/busy.py" "$uri") ||
  fail "B did not finish within 30 s beside a client that reads nothing"
echo "$out"
echo go >&"$a_in"
read -r -t 60 line <&"$a_out" || fail "A did not get its replies"
echo "$line"
case "$line" in A:\ 2000\ replies*) ;; *) fail "A: $line" ;; esac
stop_server
