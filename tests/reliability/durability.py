#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tests/reliability/durability.py: what a server acknowledged as
# durable is in its backing file after the server is killed.
#
#   durability.py [options] DISK -- SERVER [ARGS...]
#
# DISK is filled with a known pattern, then SERVER ("nbdkit ... file
# DISK", started here with -f -U SOCK -P PIDFILE) is driven by one or
# two libnbd connections from a single event loop: writes of 1 to 128
# sectors of 512 bytes at random sector-aligned offsets, some with FUA,
# and flushes, --depth of them in flight.  At a random moment the
# server gets --signal (KILL or TERM).  Then DISK is read back and
# checked, sector by sector, against a model of what was acknowledged:
#
#  - every sector holds bytes that someone wrote there (the initial
#    pattern or one of the writes aimed at it), whole: a "wrong" sector
#    is garbage, a torn sector or bytes written to the wrong place;
#  - a sector whose last durable write is W holds W or a write issued
#    after W; anything older is "lost".  A write is durable once it was
#    acknowledged with FUA, or acknowledged before a flush that then
#    succeeded was sent (on its own connection, or with --flush-conn
#    on the other one, which a multi-conn export must honour).  With
#    --signal=TERM every acknowledged write counts as durable: the stop
#    is graceful and the server flushes before it exits.
#
# Each sector written is unique: 16 bytes (write id, sector number)
# repeated 32 times, so any sector says which write put it there.  No
# two writes in flight overlap, so the writes to one sector are ordered.
#
# Prints one line of figures and exits 1 if a sector is lost or wrong,
# if the server was not reachable, or (TERM) did not exit 0.

import argparse
import errno
import os
import random
import select
import signal
import struct
import subprocess
import sys
import time

import nbd

SECTOR = 512

ap = argparse.ArgumentParser()
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--size", type=int, default=8 << 20)
ap.add_argument("--depth", type=int, default=16)
ap.add_argument("--max-sectors", type=int, default=128)
ap.add_argument("--fua", type=float, default=0.1,
                help="share of writes sent with FUA")
ap.add_argument("--conns", type=int, default=1, choices=(1, 2))
ap.add_argument("--flush-conn", type=int, default=0,
                help="the connection that sends the flushes")
ap.add_argument("--after", type=float, default=0.3,
                help="seconds of I/O before the signal")
ap.add_argument("--signal", default="KILL", choices=("KILL", "TERM"))
ap.add_argument("--label", default="")
ap.add_argument("disk")
ap.add_argument("server", nargs=argparse.REMAINDER)
args = ap.parse_args()
if args.server and args.server[0] == "--":
    args.server = args.server[1:]
nsectors = args.size // SECTOR
rng = random.Random(args.seed)


def sector_bytes(wid, s):
    return struct.pack("<QQ", wid, s) * (SECTOR // 16)


def pattern(wid, first, n):
    return b"".join(sector_bytes(wid, s) for s in range(first, first + n))


# The initial pattern is write id 0.
with open(args.disk, "wb") as f:
    f.write(pattern(0, 0, nsectors))

sock = args.disk + ".sock"
pidfile = args.disk + ".pid"
for p in (sock, pidfile):
    if os.path.exists(p):
        os.unlink(p)
server = subprocess.Popen([args.server[0], "-f", "-U", sock, "-P", pidfile]
                          + args.server[1:])


def stop_server():
    if server.poll() is None:
        server.kill()
        server.wait()


try:
    for i in range(400):
        if os.path.exists(pidfile) and os.path.getsize(pidfile) > 0:
            break
        if server.poll() is not None:
            sys.exit("the server exited with %d at start-up" % server.returncode)
        time.sleep(0.05)
    else:
        sys.exit("the server did not start within 20 s")

    handles = []
    for c in range(args.conns):
        h = nbd.NBD()
        h.connect_unix(sock)
        handles.append(h)
    if args.conns > 1 and not handles[0].can_multi_conn():
        sys.exit("a flush on another connection needs multi-conn, "
                 "and the export does not advertise it")
    can_fua = handles[0].can_fua()

    # The model.  writes[id] = [first, n, conn, fua, state]
    # state: "flight", "acked", "durable", "failed".
    writes = [None]                 # write id 0 is the initial pattern
    history = [[0] for s in range(nsectors)]  # write ids per sector
    busy = bytearray(nsectors)      # 1 while a write to it is in flight
    acked_pending = [set() for c in range(args.conns)]
    in_flight = [0] * args.conns
    flush_in_flight = False
    stats = {"writes": 0, "fua": 0, "flushes": 0, "errors": 0}
    errnos = {}

    def write_done(wid):
        def cb(err):
            w = writes[wid]
            first, n, conn, fua = w[0], w[1], w[2], w[3]
            for s in range(first, first + n):
                busy[s] = 0
            in_flight[conn] -= 1
            if err.value != 0:
                w[4] = "failed"
                stats["errors"] += 1
                errnos[err.value] = errnos.get(err.value, 0) + 1
            elif fua:
                w[4] = "durable"
            else:
                w[4] = "acked"
                acked_pending[conn].add(wid)
            return 1
        return cb

    def flush_done(covered, conn):
        def cb(err):
            global flush_in_flight
            flush_in_flight = False
            in_flight[conn] -= 1
            if err.value != 0:
                stats["errors"] += 1
                return 1
            for wid in covered:
                writes[wid][4] = "durable"
            return 1
        return cb

    def issue_write(conn):
        for attempt in range(8):
            n = rng.randint(1, args.max_sectors)
            first = rng.randrange(0, nsectors - n + 1)
            if not any(busy[first:first + n]):
                break
        else:
            return False
        wid = len(writes)
        fua = can_fua and rng.random() < args.fua
        writes.append([first, n, conn, fua, "flight"])
        for s in range(first, first + n):
            busy[s] = 1
            history[s].append(wid)
        handles[conn].aio_pwrite(pattern(wid, first, n), first * SECTOR,
                                 completion=write_done(wid),
                                 flags=nbd.CMD_FLAG_FUA if fua else 0)
        in_flight[conn] += 1
        stats["writes"] += 1
        stats["fua"] += fua
        return True

    def issue_flush():
        # What this flush covers: the writes acknowledged so far, on
        # every connection if the flush may speak for all of them.
        global flush_in_flight
        conn = args.flush_conn
        covered = set()
        for c in range(args.conns):
            if c == conn or args.conns > 1:
                covered |= acked_pending[c]
                acked_pending[c] = set()
        handles[conn].aio_flush(completion=flush_done(covered, conn))
        in_flight[conn] += 1
        flush_in_flight = True
        stats["flushes"] += 1

    def pump(timeout):
        rl, wl = [], []
        for h in handles:
            if h.aio_is_dead() or h.aio_is_closed():
                continue
            d = h.aio_get_direction()
            if d & nbd.AIO_DIRECTION_READ:
                rl.append(h)
            if d & nbd.AIO_DIRECTION_WRITE:
                wl.append(h)
        if not rl and not wl:
            return False
        fds = {h.aio_get_fd(): h for h in rl + wl}
        r, w, x = select.select([h.aio_get_fd() for h in rl],
                                [h.aio_get_fd() for h in wl], [], timeout)
        for fd in r:
            fds[fd].aio_notify_read()
        for fd in w:
            h = fds[fd]
            if not (h.aio_is_dead() or h.aio_is_closed()) and \
               h.aio_get_direction() & nbd.AIO_DIRECTION_WRITE:
                h.aio_notify_write()
        return True

    # The writers are the connections that do not only flush.
    writers = [c for c in range(args.conns)
               if args.conns == 1 or c != args.flush_conn]
    signum = getattr(signal, "SIG" + args.signal)
    t0 = time.monotonic()
    while time.monotonic() - t0 < args.after:
        for c in writers:
            while in_flight[c] < args.depth:
                if not issue_write(c):
                    break
        if args.signal == "KILL" and not flush_in_flight and \
           any(acked_pending) and rng.random() < 0.3:
            issue_flush()
        pump(0.01)
    server.send_signal(signum)

    if args.signal == "TERM":
        # A graceful stop: the writes the server had read finish and
        # are acknowledged; the rest fail when the connection closes.
        deadline = time.monotonic() + 30
        try:
            while any(in_flight) and time.monotonic() < deadline:
                if not pump(0.1):
                    break
        except nbd.Error:
            pass
        for w in writes[1:]:
            if w[4] == "flight":
                w[4] = "failed"
            elif w[4] == "acked":
                w[4] = "durable"
        try:
            status = server.wait(30)
        except subprocess.TimeoutExpired:
            sys.exit("the server did not exit within 30 s of SIGTERM")
    else:
        # Nothing the server did after the kill counts: the model is
        # what the client knew when it sent the signal.
        status = server.wait(30)
finally:
    stop_server()

# The check.
data = open(args.disk, "rb").read()
if len(data) != args.size:
    sys.exit("the disk is %d bytes, not %d" % (len(data), args.size))
checked = lost = wrong = 0
for s in range(nsectors):
    chunk = data[s * SECTOR:(s + 1) * SECTOR]
    wid, sec = struct.unpack_from("<QQ", chunk)
    hist = history[s]
    if sec != s or wid not in hist or chunk != sector_bytes(wid, s):
        wrong += 1
        if wrong <= 5:
            print("sector %d: bytes nobody wrote there (id %d, sector %d)"
                  % (s, wid, sec), file=sys.stderr)
        continue
    durable = [x for x in hist if x == 0 or writes[x][4] == "durable"]
    d = durable[-1]
    if d == 0:
        continue
    checked += 1
    if wid < d:
        lost += 1
        if lost <= 5:
            print("sector %d: durable write %d lost (the file has %s)"
                  % (s, d, "the initial pattern" if wid == 0
                     else "write %d" % wid), file=sys.stderr)

acked = sum(1 for w in writes[1:] if w[4] in ("acked", "durable"))
print("%s seed=%d %s after %.2fs: writes=%d (fua=%d) acked=%d flushes=%d "
      "errors=%d exit=%d blocks-checked=%d blocks-lost=%d wrong=%d"
      % (args.label, args.seed, args.signal, args.after, stats["writes"],
         stats["fua"], acked, stats["flushes"], stats["errors"], status,
         checked, lost, wrong))
bad = lost or wrong
if args.signal == "TERM" and status != 0:
    print("the server exited with status %d after SIGTERM" % status,
          file=sys.stderr)
    bad = True
if errnos:
    print("write errors: %s" % ", ".join(
        "%s x%d" % (errno.errorcode.get(e, str(e)), k)
        for e, k in sorted(errnos.items())), file=sys.stderr)
# A graceful stop fails only the requests the server never read, which
# the client sees fail with ENOTCONN when the connection closes; a
# request that the server took and then failed was not drained.
if args.signal == "TERM" and set(errnos) - {errno.ENOTCONN}:
    print("writes in flight failed with a server error", file=sys.stderr)
    bad = True
if checked == 0:
    print("nothing was durable: the check proved nothing", file=sys.stderr)
    bad = True
sys.exit(1 if bad else 0)
