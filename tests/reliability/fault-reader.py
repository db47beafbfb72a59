#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tests/reliability/fault-reader.py: read through a server whose
# upstream (an NBD server behind the nbd plugin, a web server behind
# the curl plugin) fails in chosen ways, and check what the client
# sees.
#
#   fault-reader.py --sock SOCK --disk FILE --pid PID
#                   [--upstream CMD --upstream-ready PATH]
#                   [--upstream-pidfile FILE] [--control FILE]
#                   STEP...
#
# SOCK is the server under test (PID), FILE what its export must read
# as.  CMD (a shell command line) is the upstream, started by up-start
# and killed by up-kill; it is ready once PATH exists.  FILE given as
# --control is where "mode" steps write the web server's fault mode.
# An upstream that the test started itself is killed through the pid
# in --upstream-pidfile (the first up-kill, before any up-start).
# The steps, in order:
#
#   connect:NAME          open connection NAME (must work within 10 s)
#   connect-fails         a new connection must fail, within 10 s
#   read:NAME:WANT:N      N reads on NAME, 4 in flight, at random
#                         offsets, 512 bytes to 128 KiB; WANT is ok
#                         (all succeed), eio (all fail with EIO) or
#                         any (each does one or the other)
#   read-during:NAME:STEP keep reads going on NAME while STEP (up-kill
#                         or mode:M) happens: 10 reads before, 10
#                         after, each may succeed or fail with EIO
#   whole:NAME            read the whole export on NAME, 256 KiB at a
#                         time: every read must succeed
#   up-start, up-kill     start the upstream / kill it with SIGKILL
#   mode:M                write M to the control file
#   alive                 the server under test must still run
#   sleep:S               wait S seconds
#
# Whatever the step, every read that succeeds must return the file's
# bytes (a "wrong" read fails the run), every failure must be EIO, and
# no read may take longer than --hang seconds (10).  Prints a line per
# step and the totals; exits 1 at the first broken expectation.

import argparse
import errno
import os
import random
import signal
import subprocess
import sys
import time

import nbd

ap = argparse.ArgumentParser()
ap.add_argument("--sock", required=True)
ap.add_argument("--disk", required=True)
ap.add_argument("--pid", type=int, required=True)
ap.add_argument("--upstream")
ap.add_argument("--upstream-ready")
ap.add_argument("--upstream-pidfile")
ap.add_argument("--control")
ap.add_argument("--hang", type=float, default=10)
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("steps", nargs="+")
args = ap.parse_args()

rng = random.Random(args.seed)
disk = open(args.disk, "rb").read()
conns = {}
upstream = None
totals = {"reads": 0, "ok": 0, "eio": 0, "wrong": 0}
max_latency = 0.0


def die(msg):
    print("FAIL: %s" % msg, file=sys.stderr)
    sys.exit(1)


def up_start():
    global upstream
    if args.upstream_ready and os.path.exists(args.upstream_ready):
        os.unlink(args.upstream_ready)
    upstream = subprocess.Popen(["/bin/sh", "-c", "exec " + args.upstream])
    for i in range(200):
        if not args.upstream_ready or os.path.exists(args.upstream_ready):
            return
        if upstream.poll() is not None:
            die("the upstream exited with %d at start-up" % upstream.returncode)
        time.sleep(0.05)
    die("the upstream did not start within 10 s")


def up_kill():
    global upstream
    if upstream is not None:
        upstream.send_signal(signal.SIGKILL)
        upstream.wait()
        upstream = None
        return
    # An upstream that the test started: its pid is in the pid file,
    # and it is gone once it is a zombie or reaped.
    pid = int(open(args.upstream_pidfile).read())
    os.kill(pid, signal.SIGKILL)
    for i in range(200):
        try:
            with open("/proc/%d/stat" % pid) as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return
        except FileNotFoundError:
            return
        time.sleep(0.05)
    die("the upstream (pid %d) outlived SIGKILL by 10 s" % pid)


def connect(name, want_ok):
    h = nbd.NBD()
    deadline = time.monotonic() + 10
    try:
        h.aio_connect_unix(args.sock)
        while h.aio_is_connecting():
            if time.monotonic() > deadline:
                die("connect:%s still connecting after 10 s" % name)
            h.poll(100)
        if not h.aio_is_ready():
            raise nbd.Error("the connection ended in the handshake")
    except nbd.Error as e:
        if want_ok:
            die("connect:%s failed: %s" % (name, e))
        print("connect-fails: refused at once (%s)" % str(e).strip())
        return
    if not want_ok:
        die("a new connection succeeded while the upstream was down")
    conns[name] = h
    print("connect:%s: ok" % name)


class Reads:
    """Reads on one connection, 4 in flight, each checked."""

    def __init__(self, h):
        self.h = h
        self.flight = {}        # cookie -> (buf, offset, length, t0, result)
        self.done = []          # (result, latency): "ok", "eio"

    def issue(self):
        n = rng.randint(1, 256) * 512
        off = rng.randrange(0, (len(disk) - n) // 512 + 1) * 512
        buf = nbd.Buffer(n)
        rec = {"buf": buf, "off": off, "n": n, "t0": time.monotonic(),
               "err": None}

        def cb(err, rec=rec):
            rec["err"] = err.value
            return 1
        rec["cookie"] = self.h.aio_pread(buf, off, completion=cb)
        self.flight[rec["cookie"]] = rec

    def pump(self):
        global max_latency
        self.h.poll(100)
        now = time.monotonic()
        for c, rec in list(self.flight.items()):
            if rec["err"] is None:
                if now - rec["t0"] > args.hang:
                    die("a read of %d bytes at %d hung for %.0f s"
                        % (rec["n"], rec["off"], now - rec["t0"]))
                continue
            del self.flight[c]
            lat = now - rec["t0"]
            max_latency = max(max_latency, lat)
            totals["reads"] += 1
            if rec["err"] == 0:
                got = rec["buf"].to_bytearray()
                if got != disk[rec["off"]:rec["off"] + rec["n"]]:
                    totals["wrong"] += 1
                    die("a read of %d bytes at %d succeeded with wrong bytes"
                        % (rec["n"], rec["off"]))
                totals["ok"] += 1
                self.done.append("ok")
            elif rec["err"] == errno.EIO:
                totals["eio"] += 1
                self.done.append("eio")
            else:
                die("a read failed with %s, not EIO"
                    % errno.errorcode.get(rec["err"], rec["err"]))

    def run(self, n, between=None):
        """N reads; BETWEEN (a function) runs after the first N/2."""
        issued = 0
        while len(self.done) < n:
            while issued < n and len(self.flight) < 4:
                self.issue()
                issued += 1
            self.pump()
            if between and len(self.done) >= n // 2:
                between()
                between = None
        return self.done


def do(step):
    f = step.split(":")
    if f[0] == "connect":
        connect(f[1], True)
    elif f[0] == "connect-fails":
        connect(None, False)
    elif f[0] == "read":
        name, want, n = f[1], f[2], int(f[3])
        res = Reads(conns[name]).run(n)
        ok, eio = res.count("ok"), res.count("eio")
        print("%s: ok=%d eio=%d" % (step, ok, eio))
        if want == "ok" and eio:
            die("%s: %d reads failed" % (step, eio))
        if want == "eio" and ok:
            die("%s: %d reads succeeded while the upstream failed"
                % (step, ok))
    elif f[0] == "read-during":
        name, inner = f[1], ":".join(f[2:])
        res = Reads(conns[name]).run(20, lambda: do(inner))
        print("%s: ok=%d eio=%d" % (step, res.count("ok"), res.count("eio")))
    elif f[0] == "whole":
        h = conns[f[1]]
        for off in range(0, len(disk), 262144):
            n = min(262144, len(disk) - off)
            try:
                got = h.pread(n, off)
            except nbd.Error as e:
                die("%s: a read at %d failed: %s" % (step, off, e))
            totals["reads"] += 1
            if got != disk[off:off + n]:
                totals["wrong"] += 1
                die("%s: wrong bytes at %d" % (step, off))
            totals["ok"] += 1
        print("%s: %d bytes, all right" % (step, len(disk)))
    elif f[0] == "up-start":
        up_start()
        print("up-start: the upstream is up")
    elif f[0] == "up-kill":
        up_kill()
        print("up-kill: the upstream was killed")
    elif f[0] == "mode":
        with open(args.control + ".tmp", "w") as c:
            c.write(f[1] + "\n")
        os.rename(args.control + ".tmp", args.control)
        print("mode: %s" % f[1])
    elif f[0] == "alive":
        try:
            os.kill(args.pid, 0)
        except OSError:
            die("the server under test has gone")
        print("alive: the server runs")
    elif f[0] == "sleep":
        time.sleep(float(f[1]))
    else:
        die("unknown step %s" % step)


try:
    for step in args.steps:
        do(step)
finally:
    if upstream is not None and upstream.poll() is None:
        upstream.kill()
        upstream.wait()
print("total: reads=%d ok=%d eio=%d wrong=%d max-latency=%.2fs"
      % (totals["reads"], totals["ok"], totals["eio"], totals["wrong"],
         max_latency))
