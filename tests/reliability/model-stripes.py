#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# model-stripes.py: a concurrent model checker for one NBD export, for
# tests/reliability/test-model-*.sh.  Needs the libnbd Python bindings
# (Debian's /usr/bin/python3).
#
#   model-stripes.py URI --label NAME --workdir DIR [--seed N]
#       [--writers N] [--stripes K] [--ops N] [--time-limit SECS]
#       [--initial-file PATH [--initial-offset N]] [--expected PATH]
#
# The export is cut into N*K stripes of odd sizes (4097 to 65537 bytes)
# at odd offsets, separated by gaps of random size, some of them empty
# (so that stripes of different writers share the blocks of any layer
# that works in blocks), the last stripe ending at the export's last
# byte.  Each of N writer processes (this script again, with its own
# libnbd connection) owns K of them and runs --ops operations on random
# ranges of its own stripes, checking them against its own model:
#   write (a random buffer), write with FUA, zero (with or without
#   NO_HOLE and FUA), trim then read (each byte must read back as
#   before or as zero) then rewrite the whole range, flush, and read
#   and compare.
# At the end each writer reads all its stripes back, and then one
# reader reads the whole export and compares it with the merged model:
# the writers' stripes, and everywhere else the export's initial
# content (zeroes, or --initial-file from --initial-offset).  With
# --expected the merged model is also written to PATH (so that a test
# can compare the plugin's file after a flush).
#
# The seed (by default from the clock) is printed first, and every
# mismatch is printed with its offset and owner, so that a failing run
# can be repeated with --seed.  The last line sums up:
#   model NAME: seed S, W writers, M stripes, O ops (...), T s,
#     mismatches: R in writers' reads, F bytes in the final read
# Exit status 0 only if there was no mismatch, no error and no
# writer went over --time-limit.

import argparse
import json
import os
import random
import subprocess
import sys
import time

import nbd

MIN_STRIPE, MAX_STRIPE = 4097, 65537
CHUNK = 1024 * 1024             # the final reader's request size

KINDS = ("write", "write_fua", "zero", "trim_rewrite", "read", "flush")


def layout(rnd, size, writers, per_writer):
    """[(offset, length, owner)] in offset order; odd offsets and sizes,
    random gaps (a quarter of them empty), the last stripe ending at
    SIZE."""
    n = writers * per_writer
    lengths = [rnd.randrange(MIN_STRIPE, MAX_STRIPE + 1, 2) for _ in range(n)]
    free = size - sum(lengths)
    if free < 2 * n:
        raise SystemExit("model: export of %d bytes too small for %d "
                         "stripes" % (size, n))
    # Gap i comes before stripe i; stripe n-1 ends at SIZE.
    weights = [0 if i and rnd.random() < 0.25 else rnd.random() + 0.05
               for i in range(n)]
    total = sum(weights)
    gaps = [int(free * w / total) for w in weights]
    gaps[0] += free - sum(gaps)
    owners = [i % writers for i in range(n)]
    rnd.shuffle(owners)
    stripes, off, carry = [], 0, 0
    for i in range(n):
        off += gaps[i] + carry
        carry = 0
        # An even offset after a gap: give the gap's last byte to the
        # next gap.  (After an empty gap the offset is what the
        # stripe before leaves.)  The last stripe takes that byte
        # instead, so that it still ends at SIZE.
        if off % 2 == 0 and gaps[i] > 0:
            off -= 1
            if i < n - 1:
                carry = 1
            else:
                lengths[i] += 1
        stripes.append((off, lengths[i], owners[i]))
        off += lengths[i]
    assert off == size, (off, size)
    return stripes


# --- A writer ----------------------------------------------------------

class Writer:
    """One connection, up to --depth requests in flight on disjoint
    ranges of its own stripes (so their order does not matter, and a
    layer that works in blocks sees neighbouring ranges of one block
    written at once, by this writer and by its neighbours)."""

    def __init__(self, cfg, index):
        self.cfg, self.index = cfg, index
        self.rnd = random.Random("%d/%d" % (cfg["seed"], index))
        self.stripes = [(o, n) for o, n, w in cfg["stripes"] if w == index]
        self.h = nbd.NBD()
        self.h.set_handle_name("writer%d" % index)
        self.h.connect_uri(cfg["uri"])
        self.fua = self.h.can_fua()
        self.can_trim = self.h.can_trim()
        self.can_zero = self.h.can_zero()
        self.can_flush = self.h.can_flush()
        # Each stripe's model starts as the export's initial content.
        init = initial_reader(cfg)
        self.model = [bytearray(init(o, n)) for o, n in self.stripes]
        self.counts = dict.fromkeys(KINDS, 0)
        self.mismatches = []
        self.bytes_written = 0
        self.inflight = {}      # cookie -> Op
        self.busy = [[] for _ in self.stripes]   # (rel, n) in flight

    def pick(self):
        """A free range of a stripe: small, medium or whole, at either
        end of the stripe or anywhere; None if it would overlap a
        request in flight."""
        s = self.rnd.randrange(len(self.stripes))
        n = self.stripes[s][1]
        k = self.rnd.random()
        if k < 0.4:
            length = self.rnd.randint(1, min(n, 700))
        elif k < 0.9:
            length = self.rnd.randint(1, n)
        else:
            length = n
        k = self.rnd.random()
        if k < 0.25:
            rel = 0
        elif k < 0.5:
            rel = n - length
        else:
            rel = self.rnd.randint(0, n - length)
        for r, m in self.busy[s]:
            if rel < r + m and r < rel + length:
                return None
        return s, rel, length

    def off(self, op):
        return self.stripes[op.s][0] + op.rel

    def check(self, s, rel, got, what):
        want = self.model[s][rel:rel + len(got)]
        if got == want:
            return
        off = self.stripes[s][0] + rel
        bad = [i for i in range(len(got)) if got[i] != want[i]]
        self.mismatches.append(
            "%s: %d of %d bytes at %d differ, first at %d "
            "(got 0x%02x, expected 0x%02x)"
            % (what, len(bad), len(got), off, off + bad[0],
               got[bad[0]], want[bad[0]]))

    def issue(self, op, cookie):
        self.inflight[cookie] = op

    def write(self, op, flags):
        data = bytearray(self.rnd.randbytes(op.n))
        op.buf = data
        self.issue(op, self.h.aio_pwrite(data, self.off(op), flags=flags))
        # The model changes now: nothing else in flight touches the range.
        self.model[op.s][op.rel:op.rel + op.n] = data
        self.bytes_written += op.n

    def start(self):
        """Issue one new operation; False if no free range was found."""
        if self.rnd.random() < self.cfg["flush_rate"]:
            self.counts["flush"] += 1
            if self.can_flush:
                self.issue(Op("flush", 0, 0, 0), self.h.aio_flush())
            return True
        for _ in range(10):
            r = self.pick()
            if r:
                break
        else:
            return False
        s, rel, n = r
        k = self.rnd.random()
        kind = ("write" if k < 0.37 else "write_fua" if k < 0.47 else
                "zero" if k < 0.63 else "trim_rewrite" if k < 0.74 else
                "read")
        op = Op(kind, s, rel, n)
        self.counts[kind] += 1
        self.busy[s].append((rel, n))
        if kind == "write":
            self.write(op, 0)
        elif kind == "write_fua":
            self.write(op, nbd.CMD_FLAG_FUA if self.fua else 0)
        elif kind == "zero":
            flags = self.rnd.choice((0, nbd.CMD_FLAG_NO_HOLE))
            if self.fua and self.rnd.random() < 0.3:
                flags |= nbd.CMD_FLAG_FUA
            if self.can_zero:
                self.issue(op, self.h.aio_zero(n, self.off(op), flags=flags))
                self.model[s][rel:rel + n] = bytes(n)
            else:
                self.write(op, flags & nbd.CMD_FLAG_FUA)
        elif kind == "trim_rewrite":
            # Three steps on the range: trim, read, rewrite.
            op.old = bytes(self.model[s][rel:rel + n])
            if self.can_trim:
                self.issue(op, self.h.aio_trim(n, self.off(op)))
            else:
                op.stage = 2
                self.write(op, 0)
        else:
            op.buf = nbd.Buffer(n)
            self.issue(op, self.h.aio_pread(op.buf, self.off(op)))
        return True

    def finish(self, op):
        """OP's request completed: check it, or issue its next step."""
        if op.kind == "read":
            self.check(op.s, op.rel, bytes(op.buf.to_bytearray()),
                       "read of %d" % op.n)
        elif op.kind == "trim_rewrite" and op.stage == 0:
            op.stage = 1
            op.buf = nbd.Buffer(op.n)
            self.issue(op, self.h.aio_pread(op.buf, self.off(op)))
            return
        elif op.kind == "trim_rewrite" and op.stage == 1:
            # After a trim a byte reads back as before or as zero.
            got = bytes(op.buf.to_bytearray())
            if got != op.old and got != bytes(op.n):
                bad = [i for i in range(op.n)
                       if got[i] != op.old[i] and got[i] != 0]
                if bad:
                    self.mismatches.append(
                        "read after trim: %d of %d bytes at %d are neither "
                        "the old data nor zero, first at %d"
                        % (len(bad), op.n, self.off(op), self.off(op) + bad[0]))
            op.stage = 2
            fua = self.fua and self.rnd.random() < 0.3
            self.write(op, nbd.CMD_FLAG_FUA if fua else 0)
            return
        if op.kind != "flush":
            self.busy[op.s].remove((op.rel, op.n))

    def reap(self):
        """Wait for at least one request, and deal with all that are done."""
        self.h.poll(-1)
        for cookie in list(self.inflight):
            if self.h.aio_command_completed(cookie):
                self.finish(self.inflight.pop(cookie))

    def run(self):
        deadline = time.monotonic() + self.cfg["time_limit"]
        depth = self.cfg["depth"]
        issued, error = 0, None
        try:
            while issued < self.cfg["ops"] or self.inflight:
                if time.monotonic() > deadline:
                    error = "over the time limit after %d operations" % issued
                    break
                while issued < self.cfg["ops"] and len(self.inflight) < depth:
                    if not self.start():
                        break
                    issued += 1
                if self.inflight:
                    self.reap()
            # Its whole stripes, once more.
            if not error:
                for s, (off, n) in enumerate(self.stripes):
                    self.check(s, 0, self.h.pread(n, off), "final read of "
                               "its stripe")
                self.h.shutdown()
        except nbd.Error as e:
            error = "an operation failed (%d issued): %s" % (issued, e)
            self.drain()
        return issued, error

    def drain(self):
        """After a failure: let the requests still in flight finish (for
        at most 10 s), so that the final read is not compared with
        writes that were cut short by this process's exit.  (The
        failed request's range may still differ.)"""
        deadline = time.monotonic() + 10
        while self.inflight and time.monotonic() < deadline:
            try:
                self.h.poll(100)
            except nbd.Error:
                return              # the connection is gone
            for cookie in list(self.inflight):
                try:
                    done = self.h.aio_command_completed(cookie)
                except nbd.Error:
                    done = True     # failed, and retired
                if done:
                    del self.inflight[cookie]


class Op:
    def __init__(self, kind, s, rel, n):
        self.kind, self.s, self.rel, self.n = kind, s, rel, n
        self.stage, self.buf, self.old = 0, None, None


def writer_main(workdir, index):
    with open(os.path.join(workdir, "layout.json")) as f:
        cfg = json.load(f)
    w = Writer(cfg, index)
    done, error = w.run()
    with open(os.path.join(workdir, "writer%d.bin" % index), "wb") as f:
        for m in w.model:
            f.write(m)
    with open(os.path.join(workdir, "writer%d.json" % index), "w") as f:
        json.dump({"ops": done, "counts": w.counts, "error": error,
                   "mismatches": w.mismatches,
                   "bytes_written": w.bytes_written}, f)
    return 0


# --- The driver -----------------------------------------------------------

def initial_reader(cfg):
    """A function (offset, length) -> the export's initial bytes there."""
    path = cfg.get("initial_file")
    if not path:
        return lambda off, n: bytes(n)
    base = cfg.get("initial_offset", 0)

    def read(off, n):
        with open(path, "rb") as f:
            f.seek(base + off)
            data = f.read(n)
        if len(data) != n:
            raise SystemExit("model: %s is too short" % path)
        return data
    return read


def owner_of(stripes, off):
    for o, n, w in stripes:
        if o <= off < o + n:
            return "writer %d's stripe at %d+%d" % (w, o, n)
    return "a gap nobody wrote"


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "--writer":
        return writer_main(sys.argv[2], int(sys.argv[3]))

    p = argparse.ArgumentParser()
    p.add_argument("uri")
    p.add_argument("--label", required=True)
    p.add_argument("--workdir", required=True)
    p.add_argument("--seed", type=int)
    p.add_argument("--writers", type=int, default=4)
    p.add_argument("--stripes", type=int, default=6,
                   help="stripes per writer")
    p.add_argument("--ops", type=int, default=1000,
                   help="operations per writer")
    p.add_argument("--depth", type=int, default=8,
                   help="requests in flight per writer")
    p.add_argument("--flush-rate", type=float, default=0.05,
                   help="the share of operations that are flushes")
    p.add_argument("--time-limit", type=float, default=60)
    p.add_argument("--initial-file")
    p.add_argument("--initial-offset", type=int, default=0)
    p.add_argument("--expected")
    p.add_argument("--times",
                   help="write the monotonic times (ns) when the writers "
                   "started and ended to this file")
    a = p.parse_args()
    seed = a.seed if a.seed is not None else int(time.time() * 1000) % 10**9
    print("model %s: seed %d (repeat with --seed %d)" % (a.label, seed, seed))
    sys.stdout.flush()
    t0 = time.monotonic()

    h = nbd.NBD()
    h.connect_uri(a.uri)
    size = h.get_size()
    h.shutdown()
    del h

    stripes = layout(random.Random(seed), size, a.writers, a.stripes)
    cfg = {"uri": a.uri, "seed": seed, "ops": a.ops, "depth": a.depth,
           "flush_rate": a.flush_rate,
           "time_limit": a.time_limit, "stripes": stripes,
           "initial_file": a.initial_file,
           "initial_offset": a.initial_offset}
    os.makedirs(a.workdir, exist_ok=True)
    with open(os.path.join(a.workdir, "layout.json"), "w") as f:
        json.dump(cfg, f)

    start_ns = time.monotonic_ns()
    procs = [subprocess.Popen([sys.executable, __file__, "--writer",
                               a.workdir, str(i)])
             for i in range(a.writers)]
    failures = []
    for i, pr in enumerate(procs):
        try:
            pr.wait(timeout=max(1, t0 + a.time_limit + 30 - time.monotonic()))
        except subprocess.TimeoutExpired:
            pr.kill()
            pr.wait()
            failures.append("writer %d hung and was killed" % i)
        if pr.returncode != 0:
            failures.append("writer %d exited with status %d"
                            % (i, pr.returncode))
    end_ns = time.monotonic_ns()
    if a.times:
        with open(a.times, "w") as f:
            f.write("%d %d\n" % (start_ns, end_ns))

    # The merged model.
    init = initial_reader(cfg)
    model = bytearray(init(0, size))
    counts = dict.fromkeys(KINDS, 0)
    ops = written = 0
    writer_mismatches = 0
    for i in range(a.writers):
        try:
            with open(os.path.join(a.workdir, "writer%d.json" % i)) as f:
                res = json.load(f)
            with open(os.path.join(a.workdir, "writer%d.bin" % i), "rb") as f:
                data = f.read()
        except OSError as e:
            failures.append("writer %d left no result: %s" % (i, e))
            continue
        ops += res["ops"]
        written += res["bytes_written"]
        for k in KINDS:
            counts[k] += res["counts"][k]
        if res["error"]:
            failures.append("writer %d: %s" % (i, res["error"]))
        for m in res["mismatches"]:
            print("MISMATCH writer %d: %s" % (i, m))
        writer_mismatches += len(res["mismatches"])
        pos = 0
        for o, n, w in stripes:
            if w == i:
                model[o:o + n] = data[pos:pos + n]
                pos += n

    # One reader, the whole export.
    final_bad = 0
    try:
        h = nbd.NBD()
        h.set_handle_name("reader")
        h.connect_uri(a.uri)
        shown = 0
        for off in range(0, size, CHUNK):
            n = min(CHUNK, size - off)
            got = h.pread(n, off)
            want = model[off:off + n]
            if got == want:
                continue
            i = 0
            while i < n:
                if got[i] == want[i]:
                    i += 1
                    continue
                j = i
                while j < n and got[j] != want[j]:
                    j += 1
                final_bad += j - i
                if shown < 10:
                    print("MISMATCH final read: %d bytes at %d (in %s): got "
                          "0x%02x, expected 0x%02x"
                          % (j - i, off + i, owner_of(stripes, off + i),
                             got[i], want[i]))
                    shown += 1
                i = j
        if h.can_flush():
            h.flush()
        h.shutdown()
    except nbd.Error as e:
        failures.append("the final reader failed: %s" % e)
    if a.expected:
        with open(a.expected, "wb") as f:
            f.write(model)

    for f in failures:
        print("FAIL %s" % f)
    print("model %s: seed %d, %d writers, %d stripes (%d bytes of %d), "
          "%d ops (%s), %d bytes written, %.1f s, mismatches: %d in "
          "writers' reads, %d bytes in the final read"
          % (a.label, seed, a.writers, len(stripes),
             sum(n for _, n, _ in stripes), size, ops,
             " ".join("%s %d" % (k, counts[k]) for k in KINDS), written,
             time.monotonic() - t0, writer_mismatches, final_bad))
    return 1 if failures or writer_mismatches or final_bad else 0


if __name__ == "__main__":
    sys.exit(main())
