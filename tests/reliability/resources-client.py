#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# resources-client.py: raw-socket clients for the resources suite
# (tests/reliability/test-resources-*.sh), which misbehave in ways a
# libnbd client cannot: they leave replies unread or never answer the
# greeting.  Standard library only, plus tests/nbd_raw.py for the
# handshake; run with /usr/bin/python3.
#
#   resources-client.py slow-reader SOCKET PID [options]
#       One connection sends --reads READs of --size MiB each and reads
#       none of the replies.  Meanwhile a second connection must be
#       served (writes and reads checked), and the server's resident
#       memory must grow by at most --bound MiB over what it was
#       before (and by --floor MiB at least, or the load did not reach
#       it); then the slow reader takes its replies (all present, all
#       zero) and the memory goes back to within --after-margin MiB.
#
#   resources-client.py flood SOCKET PID [options] -- CLIENT...
#       Opens --flood connections that never answer the greeting, more
#       than the server has descriptors for.  While it is out of them,
#       its CPU time over --cpu-secs must stay under --cpu-max; CLIENT
#       (a well-behaved libnbd client) is started then, queued behind
#       the flood, and must succeed once the flood goes.
#
# Every socket has a timeout and every loop a bound.  Figures are
# printed one per line as "figure: NAME VALUE" for the test's log.

import argparse
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
import nbd_raw  # noqa: E402

MiB = 1024 * 1024
REQ_MAGIC = 0x25609513
SIMPLE_MAGIC = 0x67446698
CMD_READ, CMD_WRITE, CMD_DISC = 0, 1, 2


class Failed(Exception):
    pass


def expect(cond, fmt, *args):
    if not cond:
        raise Failed(fmt % args)


def figure(name, value):
    print("figure: %s %s" % (name, value), flush=True)


# --- The server process, from /proc -----------------------------------------

def status_kib(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise Failed("no %s for pid %d" % (field, pid))


def cpu_secs(pid):
    """utime + stime of PID, in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def reset_peak(pid):
    """Reset VmHWM to the current VmRSS (clear_refs 5); False if this
    kernel or these permissions do not allow it."""
    try:
        with open("/proc/%d/clear_refs" % pid, "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


# --- A simple-reply NBD connection ------------------------------------------

class Conn:
    def __init__(self, path, timeout=20):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(path)

    def open(self):
        """Fixed newstyle, no structured replies: every reply is simple."""
        nbd_raw.greet(self.s)
        nbd_raw.go(self.s)

    @staticmethod
    def header(typ, offset, length, cookie):
        return struct.pack(">IHHQQI", REQ_MAGIC, 0, typ, cookie, offset,
                           length)

    def reply_header(self):
        magic, err, cookie = struct.unpack(
            ">IIQ", nbd_raw.recv_exact(self.s, 16))
        expect(magic == SIMPLE_MAGIC, "bad reply magic 0x%x", magic)
        return err, cookie

    def write(self, offset, data, cookie=1):
        self.s.sendall(self.header(CMD_WRITE, offset, len(data), cookie) +
                       data)
        err, c = self.reply_header()
        expect(err == 0 and c == cookie, "write: error %d cookie %d", err, c)

    def read(self, offset, length, cookie=2):
        self.s.sendall(self.header(CMD_READ, offset, length, cookie))
        err, c = self.reply_header()
        expect(err == 0 and c == cookie, "read: error %d cookie %d", err, c)
        return nbd_raw.recv_exact(self.s, length)

    def disc(self):
        try:
            self.s.sendall(self.header(CMD_DISC, 0, 0, 0))
        except OSError:
            pass
        self.close()

    def close(self):
        self.s.close()


# --- slow-reader ------------------------------------------------------------

def slow_reader(args):
    pid = args.pid
    size = args.size * MiB
    bound = args.bound * MiB
    # A server that does not bound what it holds would take the
    # machine's memory: past this it is stopped and the test fails.
    hard = bound + 256 * MiB

    # Warm up: one request of each kind on a connection of its own, so
    # that what a first connection allocates for good is in the base.
    # It writes at the end of the export, where the slow reads (which
    # must find zeros) do not go.
    scratch = args.export_size - 8 * MiB
    w = Conn(args.socket)
    w.open()
    w.write(scratch, b"w" * 4096)
    expect(w.read(scratch, 4096) == b"w" * 4096, "warm-up read back")
    w.disc()
    time.sleep(0.2)

    peak_reset = reset_peak(pid)
    base = status_kib(pid, "VmRSS") * 1024
    figure("rss_before_mib", "%.1f" % (base / MiB))
    peak = [base]
    killed = []
    done = threading.Event()

    def sample():
        while not done.wait(0.005):
            try:
                rss = status_kib(pid, "VmRSS") * 1024
            except (OSError, Failed):
                return
            peak[0] = max(peak[0], rss)
            if rss - base > hard:
                killed.append(rss)
                os.kill(pid, signal.SIGKILL)
                return
    sampler = threading.Thread(target=sample)
    sampler.start()

    slow = Conn(args.socket, timeout=60)
    try:
        slow.open()
        # Every read at its own offset, all inside the export.
        slow.s.sendall(b"".join(
            Conn.header(CMD_READ, (i * size) % (args.export_size // 2), size,
                        100 + i)
            for i in range(args.reads)))
        # Let the server read what it will of them and stall on the
        # full socket: until its RSS has not moved for half a second
        # (at least --settle s, at most 15 s), so that a loaded machine
        # does not cut the test short.
        t0 = time.monotonic()
        last, still = None, 0
        while time.monotonic() - t0 < 15 and not killed:
            time.sleep(0.1)
            try:
                rss = status_kib(pid, "VmRSS") // 1024
            except (OSError, Failed):
                break           # stopped by the sampler, or dead
            still = still + 1 if last is not None and \
                abs(rss - last) <= 1 else 0
            last = rss
            if still >= 5 and time.monotonic() - t0 >= args.settle:
                break
        figure("settle_secs", "%.1f" % (time.monotonic() - t0))
        expect(not killed, "the server grew by %d MiB (past %d MiB) with "
               "the replies unread: stopped",
               (killed[0] - base) // MiB if killed else 0, hard // MiB)

        # Another client is served meanwhile, in full.
        t0 = time.monotonic()
        other = Conn(args.socket)
        other.open()
        for i in range(args.others):
            data = bytes([i % 251]) * 65536 + os.urandom(65536)
            off = args.export_size - (i + 1) * 131072
            other.write(off, data, cookie=i)
            expect(other.read(off, len(data), cookie=i) == data,
                   "the other client read back wrong data")
        other.disc()
        took = time.monotonic() - t0
        figure("other_client_secs", "%.2f" % took)
        expect(took < 20, "the other client took %.1f s beside the slow "
               "reader", took)

        held = status_kib(pid, "VmRSS") * 1024
        hwm = status_kib(pid, "VmHWM") * 1024
        if peak_reset:
            peak[0] = max(peak[0], hwm)
        figure("rss_stalled_mib", "%.1f" % (held / MiB))
        figure("rss_peak_mib", "%.1f" % (peak[0] / MiB))
        figure("rss_growth_mib", "%.1f" % ((peak[0] - base) / MiB))
        figure("rss_bound_mib", "%d" % (bound // MiB))
        expect(not killed, "the server grew by %d MiB (past %d MiB): "
               "stopped", (killed[0] - base) // MiB if killed else 0,
               hard // MiB)
        expect(peak[0] - base <= bound, "the server grew by %.0f MiB with "
               "%d unread %d MiB reads (bound %d MiB)",
               (peak[0] - base) / MiB, args.reads, args.size, bound // MiB)
        # And the load did reach the server: otherwise the bound above
        # proved nothing.
        expect(peak[0] - base >= args.floor * MiB, "the server grew by only "
               "%.0f MiB: the unread reads did not load it (floor %d MiB)",
               (peak[0] - base) / MiB, args.floor)

        # Now take the replies: every one answered, once, with zeros.
        buf = bytearray(size)
        zero = bytes(size)
        left = set(range(100, 100 + args.reads))
        for _ in range(args.reads):
            err, cookie = slow.reply_header()
            expect(err == 0 and cookie in left, "reply: error %d cookie %d",
                   err, cookie)
            left.discard(cookie)
            view = memoryview(buf)
            got = 0
            while got < size:
                n = slow.s.recv_into(view[got:])
                expect(n > 0, "end of file inside a reply")
                got += n
            expect(buf == zero, "a read of a hole returned non-zero data")
        figure("replies_read", args.reads)
        slow.disc()
    finally:
        done.set()
        sampler.join()
        slow.close()

    # The large buffers go back with their replies.
    after = base
    for _ in range(100):
        after = status_kib(pid, "VmRSS") * 1024
        if after - base <= args.after_margin * MiB:
            break
        time.sleep(0.1)
    figure("rss_after_mib", "%.1f" % (after / MiB))
    expect(after - base <= args.after_margin * MiB,
           "the server still holds %.0f MiB more after the replies were read",
           (after - base) / MiB)


# --- flood ------------------------------------------------------------------

def flood(args):
    pid = args.pid
    socks = []
    client = None
    try:
        for _ in range(args.flood):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(5)
            try:
                s.connect(args.socket)
            except OSError:
                s.close()
                break
            socks.append(s)
        time.sleep(args.settle)
        # The ones the server took have had their greeting.
        greeted = 0
        for s in socks:
            s.settimeout(0.01)
            try:
                if s.recv(1, socket.MSG_PEEK):
                    greeted += 1
            except (socket.timeout, BlockingIOError):
                pass
        figure("flood_connections", len(socks))
        figure("flood_greeted", greeted)
        expect(len(socks) == args.flood, "only %d of %d connections made",
               len(socks), args.flood)
        expect(greeted < len(socks), "the server greeted all %d connections: "
               "it was never out of descriptors", greeted)

        c0 = cpu_secs(pid)
        t0 = time.monotonic()
        time.sleep(args.cpu_secs)
        used = cpu_secs(pid) - c0
        wall = time.monotonic() - t0
        figure("emfile_cpu_secs", "%.2f" % used)
        figure("emfile_wall_secs", "%.2f" % wall)
        expect(used <= args.cpu_max, "the server used %.2f s of CPU in "
               "%.1f s while out of descriptors: it spins", used, wall)

        # A real client arrives now, queued behind the flood; it is
        # served once the flood is gone.
        client = subprocess.Popen(args.client)
        time.sleep(0.5)
        expect(client.poll() is None,
               "the client finished while the server had no descriptors")
    finally:
        for s in socks:
            s.close()
    t0 = time.monotonic()
    try:
        rc = client.wait(args.client_timeout)
    except subprocess.TimeoutExpired:
        client.kill()
        client.wait()
        raise Failed("the queued client was not served within %d s after "
                     "the flood closed" % args.client_timeout)
    figure("client_served_after_secs", "%.2f" % (time.monotonic() - t0))
    expect(rc == 0, "the queued client failed (status %d)", rc)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)

    s = sub.add_parser("slow-reader")
    s.add_argument("socket")
    s.add_argument("pid", type=int)
    s.add_argument("--reads", type=int, default=64)
    s.add_argument("--size", type=int, default=32, help="MiB per read")
    s.add_argument("--export-size", type=int, default=1 << 30)
    s.add_argument("--bound", type=int, required=True,
                   help="MiB the server may grow by")
    s.add_argument("--after-margin", type=int, default=64,
                   help="MiB above the base allowed once replies are read")
    s.add_argument("--floor", type=int, default=0,
                   help="MiB the server must at least grow by")
    s.add_argument("--settle", type=float, default=1)
    s.add_argument("--others", type=int, default=32)

    f = sub.add_parser("flood")
    f.add_argument("socket")
    f.add_argument("pid", type=int)
    f.add_argument("--flood", type=int, default=200)
    f.add_argument("--settle", type=float, default=1)
    f.add_argument("--cpu-secs", type=float, default=3)
    f.add_argument("--cpu-max", type=float, default=0.3)
    f.add_argument("--client-timeout", type=int, default=20)
    f.add_argument("client", nargs="+")

    args = p.parse_args()
    signal.alarm(120)           # no case may hang the suite
    try:
        {"slow-reader": slow_reader, "flood": flood}[args.cmd](args)
    except (Failed, nbd_raw.Surprise, EOFError, OSError) as e:
        print("FAIL: %s" % e, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
