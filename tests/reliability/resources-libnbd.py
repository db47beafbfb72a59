#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# resources-libnbd.py: well-behaved libnbd clients (python3-libnbd, so
# run with /usr/bin/python3) for the resources suite, which count what
# the server holds in /proc while they come and go.
#
#   resources-libnbd.py idle SOCKET PID [--count N]
#       Opens N connections, every one negotiated, and holds them all
#       at once; then each writes a block of its own and the next one
#       reads it back, and a fresh connection is served beside them.
#       Prints the server's threads, fds and RSS per connection; once
#       they close, threads and fds go back to where they were.
#
#   resources-libnbd.py churn SOCKET --pid PID [--pid PID...] [options]
#       After --warmup cycles, --cycles cycles of: connect, write, read
#       back, flush, disconnect.  Each PID's fds and threads must come
#       back to their count after the warm-up, and its RSS to within
#       --rss-margin KiB.
#
# Figures are printed as "figure: NAME VALUE".  Every wait is bounded.

import argparse
import os
import signal
import sys
import time

import nbd

KiB = 1024
MiB = 1024 * 1024


class Failed(Exception):
    pass


def expect(cond, fmt, *args):
    if not cond:
        raise Failed(fmt % args)


def figure(name, value):
    print("figure: %s %s" % (name, value), flush=True)


def counts(pid):
    """(fds, threads, RSS in KiB) of PID."""
    fds = len(os.listdir("/proc/%d/fd" % pid))
    threads = len(os.listdir("/proc/%d/task" % pid))
    with open("/proc/%d/status" % pid) as f:
        rss = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
    return fds, threads, rss


def wait_back(pid, fds, threads, secs=10):
    """Wait until PID has at most FDS fds and THREADS threads: connection
    threads and their descriptors go a moment after the client."""
    deadline = time.monotonic() + secs
    while True:
        now = counts(pid)
        if now[0] <= fds and now[1] <= threads:
            return now
        if time.monotonic() > deadline:
            return now
        time.sleep(0.05)


def connect(sock):
    h = nbd.NBD()
    h.connect_unix(sock)
    return h


def hang_up(h):
    """NBD_CMD_DISC; the handle (and its socket) goes with the last
    reference to it (this libnbd's Python has no close method)."""
    try:
        h.shutdown()
    except nbd.Error:
        pass


def block(i, size):
    """The block connection I writes: its number, then a filler."""
    head = b"conn %6d " % i
    return head + bytes([i % 251]) * (size - len(head))


# --- idle -------------------------------------------------------------------

def idle(args):
    pid, n, bs = args.pid, args.count, 4096
    # A first connection, so that what the first one allocates for
    # good is in the base.
    h = connect(args.socket)
    h.pread(bs, 0)
    hang_up(h)
    del h
    base = wait_back(pid, 1 << 30, 1 << 30, 0)
    time.sleep(0.3)
    base = counts(pid)
    figure("idle_before_fds", base[0])
    figure("idle_before_threads", base[1])
    figure("idle_before_rss_mib", "%.1f" % (base[2] / KiB))

    t0 = time.monotonic()
    handles = []
    try:
        for i in range(n):
            try:
                handles.append(connect(args.socket))
            except nbd.Error as e:
                raise Failed("connection %d of %d was not negotiated: %s"
                             % (i + 1, n, e))
        figure("idle_connected", len(handles))
        figure("idle_connect_secs", "%.2f" % (time.monotonic() - t0))
        held = counts(pid)
        figure("idle_held_fds", held[0])
        figure("idle_held_threads", held[1])
        figure("idle_held_rss_mib", "%.1f" % (held[2] / KiB))
        figure("idle_threads_per_conn", "%.2f" % ((held[1] - base[1]) / n))
        figure("idle_rss_per_conn_kib", "%.0f" % ((held[2] - base[2]) / n))
        expect(held[0] - base[0] >= n, "the server holds %d fds for %d "
               "connections", held[0] - base[0], n)

        # A newcomer is served beside them.
        t1 = time.monotonic()
        c = connect(args.socket)
        c.pwrite(block(n, bs), n * bs)
        expect(c.pread(bs, n * bs) == block(n, bs), "newcomer read back")
        hang_up(c)
        del c
        figure("idle_newcomer_secs", "%.3f" % (time.monotonic() - t1))

        # Every held connection is still served: each writes its own
        # block, and its neighbour reads it back.
        for i, h in enumerate(handles):
            h.pwrite(block(i, bs), i * bs)
        bad = 0
        for i in range(n):
            if handles[(i + 1) % n].pread(bs, i * bs) != block(i, bs):
                bad += 1
        figure("idle_served", n - bad)
        expect(bad == 0, "%d of %d blocks read back wrong", bad, n)
    finally:
        for h in handles:
            hang_up(h)
        del h
        handles.clear()

    after = wait_back(pid, base[0], base[1], 20)
    figure("idle_after_fds", after[0])
    figure("idle_after_threads", after[1])
    figure("idle_after_rss_mib", "%.1f" % (after[2] / KiB))
    expect(after[0] <= base[0] and after[1] <= base[1],
           "fds/threads did not come back to %d/%d: %d/%d",
           base[0], base[1], after[0], after[1])


# --- churn ------------------------------------------------------------------

def cycle(sock, i, bs, slots):
    h = connect(sock)
    off = (i % slots) * bs
    h.pwrite(block(i, bs), off)
    expect(h.pread(bs, off) == block(i, bs), "cycle %d read back wrong", i)
    h.flush()
    hang_up(h)


def churn(args):
    bs, slots = 65536, 16
    # The warm-up writes every slot the cycles will write, so that a
    # store that allocates on first write (an overlay) holds no more
    # after it.
    for i in range(max(args.warmup, slots)):
        cycle(args.socket, i, bs, slots)
    time.sleep(0.3)
    base = {pid: counts(pid) for pid in args.pid}
    t0 = time.monotonic()
    for i in range(args.cycles):
        cycle(args.socket, i, bs, slots)
    figure("churn_cycles", args.cycles)
    figure("churn_secs", "%.2f" % (time.monotonic() - t0))
    failed = []
    for k, pid in enumerate(args.pid):
        b = base[pid]
        a = wait_back(pid, b[0], b[1])
        name = "%s%s" % (args.label, "" if k == 0 else "-upstream")
        print("%s: fds %d -> %d, threads %d -> %d, RSS %d -> %d KiB (%+d)"
              % (name, b[0], a[0], b[1], a[1], b[2], a[2], a[2] - b[2]),
              flush=True)
        if a[0] > b[0]:
            failed.append("%s: fds %d -> %d" % (name, b[0], a[0]))
        if a[1] > b[1]:
            failed.append("%s: threads %d -> %d" % (name, b[1], a[1]))
        if a[2] - b[2] > args.rss_margin:
            failed.append("%s: RSS grew by %d KiB (margin %d KiB)"
                          % (name, a[2] - b[2], args.rss_margin))
    expect(not failed, "after %d cycles: %s", args.cycles, "; ".join(failed))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser("idle")
    i.add_argument("socket")
    i.add_argument("pid", type=int)
    i.add_argument("--count", type=int, default=1000)
    c = sub.add_parser("churn")
    c.add_argument("socket")
    c.add_argument("--pid", type=int, action="append", required=True)
    c.add_argument("--label", default="churn")
    c.add_argument("--cycles", type=int, default=200)
    c.add_argument("--warmup", type=int, default=20)
    c.add_argument("--rss-margin", type=int, default=4096, help="KiB")
    args = p.parse_args()
    signal.alarm(150)           # no run may hang the suite
    try:
        {"idle": idle, "churn": churn}[args.cmd](args)
    except (Failed, nbd.Error) as e:
        print("FAIL: %s" % e, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
