#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Every stop signal is the same graceful stop (nbdkit(1), SIGNALS): no
# more requests are read, those in flight finish (a sleep in the delay
# filter, which nbdkit_nanosleep used to cut short at once, included),
# the server exits 0, and every acknowledged write is in the file.
#  - 16 writes of 1 s in flight through --filter=delay over the file
#    plugin, and SIGTERM, SIGINT, SIGHUP or SIGQUIT 0.3 s in: all 16
#    succeed and are on disk (before, all 16 failed with ESHUTDOWN);
#  - the same through an eval plugin whose pwrite sleeps;
#  - the drain is bounded: writes delayed 60 s fail once the drain is
#    over, and the server is gone well before the delay would end.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

cat > "$tmpdir/stop.py" <<'PY'
import nbd, os, signal, subprocess, sys, time
sig, disk, want_ok = getattr(signal, sys.argv[1]), sys.argv[2], sys.argv[3] == "ok"
server = sys.argv[4:]
sock = disk + ".sock"
p = subprocess.Popen([server[0], "-f", "-U", sock] + server[1:])
for i in range(200):
    if os.path.exists(sock):
        break
    time.sleep(0.05)
h = nbd.NBD()
h.connect_unix(sock)
res = {}
def done(i):
    def cb(err):
        res[i] = err.value
        return 1
    return cb
for i in range(16):
    h.aio_pwrite(bytes([65 + i]) * 4096, i * 4096, completion=done(i))
time.sleep(0.3)
t0 = time.monotonic()
p.send_signal(sig)
try:
    while h.aio_in_flight() > 0:
        h.poll(-1)
except nbd.Error as e:
    print("poll:", e)
status = p.wait(60)
took = time.monotonic() - t0
bad = sorted(i for i, v in res.items() if v != 0)
print("%s: %d replies, failed %s, exit %d after %.1f s"
      % (sys.argv[1], len(res), bad, status, took))
if want_ok:
    assert len(res) == 16 and not bad, "writes in flight failed"
    assert status == 0, status
    data = open(disk, "rb").read()
    for i in range(16):
        assert data[i * 4096:(i + 1) * 4096] == bytes([65 + i]) * 4096, \
            "write %d acknowledged but not in the file" % i
else:
    assert bad, "writes delayed past the drain did not fail"
    assert took < 20, "the stop took %.1f s" % took
PY

for sig in SIGTERM SIGINT SIGHUP SIGQUIT; do
  truncate -s 0 "$tmpdir/disk"; truncate -s 1M "$tmpdir/disk"
  t /usr/bin/python3 "$tmpdir/stop.py" $sig "$tmpdir/disk" ok \
    "$NBDKIT" --filter=delay file "$tmpdir/disk" wdelay=1
done

truncate -s 0 "$tmpdir/disk"; truncate -s 1M "$tmpdir/disk"
t /usr/bin/python3 "$tmpdir/stop.py" SIGTERM "$tmpdir/disk" ok \
  "$NBDKIT" eval get_size='echo 1M' thread_model='echo parallel' \
  can_write='exit 0' \
  pread="dd if=$tmpdir/disk skip=\$4 count=\$3 iflag=skip_bytes,count_bytes 2>/dev/null" \
  pwrite="sleep 1; dd of=$tmpdir/disk seek=\$4 oflag=seek_bytes conv=notrunc 2>/dev/null"

truncate -s 0 "$tmpdir/disk"; truncate -s 1M "$tmpdir/disk"
t /usr/bin/python3 "$tmpdir/stop.py" SIGTERM "$tmpdir/disk" cut \
  "$NBDKIT" --filter=delay file "$tmpdir/disk" wdelay=60
