# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# read-burst.py SOCKET PID COUNT [BLOCK]: send COUNT reads of BLOCK
# bytes (default 4096), one after another in the disk, all at once on
# one connection to the server listening on the Unix SOCKET (pid PID),
# and wait for them all.  Prints one line for the test to read:
#   elapsed SECONDS threads MOST (idle BASE)
# MOST is the most threads the server had while they were in flight,
# BASE how many it had before.  Fails (exit 1) if any read fails.
import nbd, os, sys, time
sock, pid, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
block = int(sys.argv[4]) if len(sys.argv) > 4 else 4096
def threads():
    return len(os.listdir("/proc/%d/task" % pid))
h = nbd.NBD()
h.connect_unix(sys.argv[1])
size = h.get_size()
base = threads()
t0 = time.monotonic()
bufs = [nbd.Buffer(block) for i in range(count)]
for i, b in enumerate(bufs):
    h.aio_pread(b, (i * block) % (size - size % block))
most = 0
while h.aio_in_flight() > 0:
    most = max(most, threads())
    h.poll(10)                  # wake to count the threads meanwhile
el = time.monotonic() - t0
print("elapsed %.3f threads %d (idle %d)" % (el, most, base))
h.shutdown()
