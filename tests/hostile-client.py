#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# hostile-client.py: an NBD client that misbehaves on purpose, over raw
# sockets, for tests/test-hostile-*.sh.  Standard library only; run it
# with /usr/bin/python3.
#
#   hostile-client.py ADDRESS PID GROUP [--case NAME]... [--list]
#                     [--max-connections N] [--handshake-timeout S]
#                     [--fd-limit N] [--fd-flood N]
#
# ADDRESS is the server's Unix socket, or tcp:HOST:PORT.
# GROUP is one of handshake, requests, stream, connections (the last
# group's cases each need a server started with the matching option;
# see test-hostile-connections.sh).  --list prints the cases.  Before the
# first case a well-behaved connection writes known random patterns (the
# canaries) over the first and the last MiB of the export.  Each case
# then opens its own connection(s) and misbehaves; afterwards the server
# (PID) must still be running and a fresh well-behaved connection must
# read both canaries back intact.  One line per case; the exit status is
# 1 if any case failed, and the failing line says what was expected.
#
# Every socket has a timeout and every loop a bound, and each case runs
# under an alarm, so no case can hang the suite.

import argparse
import os
import random
import resource
import signal
import socket
import struct
import sys
import threading
import time

# --- Wire values (doc/proto.md of the NBD project) -----------------------

NBD_MAGIC = 0x4E42444D41474943           # "NBDMAGIC"
IHAVEOPT = 0x49484156454F5054             # "IHAVEOPT"
REP_MAGIC = 0x3E889045565A9
REQ_MAGIC = 0x25609513
EXT_REQ_MAGIC = 0x21E41C71
SIMPLE_MAGIC = 0x67446698
STRUCTURED_MAGIC = 0x668E33EF
EXTENDED_MAGIC = 0x6E8A278C

C_FIXED, C_NO_ZEROES = 1, 2

OPT_EXPORT_NAME, OPT_ABORT, OPT_LIST, OPT_STARTTLS = 1, 2, 3, 5
OPT_INFO, OPT_GO, OPT_SR = 6, 7, 8
OPT_LIST_META, OPT_SET_META, OPT_EXT = 9, 10, 11

REP_ACK, REP_SERVER, REP_INFO, REP_META = 1, 2, 3, 4
ERR_UNSUP, ERR_POLICY, ERR_INVALID = 0x80000001, 0x80000002, 0x80000003
ERR_PLATFORM, ERR_UNKNOWN, ERR_TOO_BIG = 0x80000004, 0x80000006, 0x80000009
REP_NAMES = {1: "ACK", 2: "SERVER", 3: "INFO", 4: "META_CONTEXT",
             ERR_UNSUP: "ERR_UNSUP", ERR_POLICY: "ERR_POLICY",
             ERR_INVALID: "ERR_INVALID", ERR_PLATFORM: "ERR_PLATFORM",
             0x80000005: "ERR_TLS_REQD", ERR_UNKNOWN: "ERR_UNKNOWN",
             0x80000007: "ERR_SHUTDOWN", ERR_TOO_BIG: "ERR_TOO_BIG"}

INFO_EXPORT, INFO_NAME, INFO_DESCRIPTION, INFO_BLOCK_SIZE = 0, 1, 2, 3

FLAG_SEND_FLUSH, FLAG_SEND_FUA, FLAG_SEND_TRIM = 1 << 2, 1 << 3, 1 << 5
FLAG_SEND_WRITE_ZEROES, FLAG_SEND_DF = 1 << 6, 1 << 7
FLAG_SEND_CACHE = 1 << 10

CMD_READ, CMD_WRITE, CMD_DISC, CMD_FLUSH = 0, 1, 2, 3
CMD_TRIM, CMD_CACHE, CMD_ZERO, CMD_BS = 4, 5, 6, 7
CMD_NAMES = {0: "read", 1: "write", 2: "disc", 3: "flush", 4: "trim",
             5: "cache", 6: "zero", 7: "block_status"}

F_FUA, F_NO_HOLE, F_DF, F_REQ_ONE = 1, 2, 4, 8
F_FAST_ZERO, F_PAYLOAD_LEN = 16, 32

RT_NONE, RT_DATA, RT_HOLE = 0, 1, 2
RT_BS, RT_BS_EXT = 5, 6
RT_ERROR, RT_ERROR_OFFSET = 0x8001, 0x8002
REPLY_DONE = 1

EPERM, EIO, ENOMEM, EINVAL, ENOSPC, EOVERFLOW = 1, 5, 12, 22, 28, 75
ERR_NAMES = {0: "success", EPERM: "EPERM", EIO: "EIO", ENOMEM: "ENOMEM",
             EINVAL: "EINVAL", ENOSPC: "ENOSPC", EOVERFLOW: "EOVERFLOW",
             95: "ENOTSUP", 108: "ESHUTDOWN"}

MiB = 1024 * 1024
MAX_PAYLOAD = 64 * MiB          # the longest read or write (nbdkit's)
CANARY_LEN = MiB
TIMEOUT = 5.0                   # every socket operation
CASE_LIMIT = 40                 # every case, whatever it does


def rep_name(r):
    return REP_NAMES.get(r, "0x%x" % r)


def err_name(e):
    return ERR_NAMES.get(e, str(e))


# --- Failures -------------------------------------------------------------

class CaseFailed(Exception):
    pass


class ServerClosed(Exception):
    """The server ended the connection where the case did not expect it."""


def expect(cond, msg, *args):
    if not cond:
        raise CaseFailed(msg % args if args else msg)


def expect_err(got, allowed, what):
    if isinstance(allowed, int):
        allowed = (allowed,)
    expect(got in allowed, "%s: got %s, expected %s", what, err_name(got),
           " or ".join(err_name(a) for a in allowed))


def expect_rep(got, allowed, what):
    if isinstance(allowed, int):
        allowed = (allowed,)
    expect(got in allowed, "%s: got %s, expected %s", what, rep_name(got),
           " or ".join(rep_name(a) for a in allowed))


# --- One connection -------------------------------------------------------

class Req:
    def __init__(self, typ, offset, count, flags=0):
        self.typ, self.offset, self.count = typ, offset, count
        self.flags = flags


class Reply:
    def __init__(self, kind, cookie, error, data=b"", chunks=()):
        self.kind, self.cookie, self.error = kind, cookie, error
        self.data, self.chunks = data, list(chunks)


class Conn:
    def __init__(self, address, timeout=TIMEOUT):
        if address.startswith("tcp:"):
            host, port = address[4:].rsplit(":", 1)
            self.s = socket.create_connection((host, int(port)), timeout)
        else:
            self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.s.settimeout(timeout)
            self.s.connect(address)
        self.structured = self.extended = False
        self.size = self.eflags = None

    # bytes

    def send(self, data):
        try:
            self.s.sendall(data)
        except (BrokenPipeError, ConnectionResetError) as e:
            raise ServerClosed("send: %s" % e)
        except socket.timeout:
            raise CaseFailed("send timed out (server not reading)")

    def try_send(self, data):
        """Send; False if the server has gone (which the caller allows)."""
        try:
            self.s.sendall(data)
            return True
        except (BrokenPipeError, ConnectionResetError, socket.timeout):
            return False

    def recv_exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self.s.recv(min(n - len(buf), 4 * MiB))
            except ConnectionResetError:
                raise ServerClosed("connection reset after %d of %d bytes"
                                   % (len(buf), n))
            except socket.timeout:
                raise CaseFailed("timed out waiting for %d bytes (got %d)"
                                 % (n, len(buf)))
            if not chunk:
                raise ServerClosed("end of file after %d of %d bytes"
                                   % (len(buf), n))
            buf += chunk
        return bytes(buf)

    def server_closes(self, timeout=TIMEOUT, limit=MiB):
        """True if the server ends the connection within TIMEOUT,
        discarding at most LIMIT bytes it sends first."""
        deadline = time.monotonic() + timeout
        got = 0
        while got <= limit:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.s.settimeout(left)
            try:
                chunk = self.s.recv(65536)
            except (ConnectionResetError, BrokenPipeError):
                return True
            except socket.timeout:
                return False
            if not chunk:
                return True
            got += len(chunk)
        return False

    def close(self):
        self.s.close()

    def reset(self):
        """Close with SO_LINGER 0: the peer sees a reset, not an EOF."""
        self.s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                          struct.pack("ii", 1, 0))
        self.s.close()

    # handshake

    def greeting(self):
        g = self.recv_exact(18)
        magic, version, gflags = struct.unpack(">QQH", g)
        expect(magic == NBD_MAGIC and version == IHAVEOPT,
               "bad greeting %r", g)
        return gflags

    def greet(self, cflags=C_FIXED | C_NO_ZEROES):
        gflags = self.greeting()
        self.send(struct.pack(">I", cflags))
        return gflags

    def send_option(self, opt, data=b"", optlen=None):
        if optlen is None:
            optlen = len(data)
        self.send(struct.pack(">QII", IHAVEOPT, opt, optlen) + data)

    def opt_reply(self, opt):
        magic, ropt, rtype, rlen = struct.unpack(">QIII",
                                                 self.recv_exact(20))
        expect(magic == REP_MAGIC, "bad option reply magic 0x%x", magic)
        expect(ropt == opt, "reply to option %d, expected %d", ropt, opt)
        expect(rlen <= 65536, "option reply of %d bytes", rlen)
        return rtype, self.recv_exact(rlen) if rlen else b""

    def option(self, opt, data=b"", optlen=None, max_replies=1000):
        """Send an option and read replies up to the final one.
        Returns (final reply type, [(type, payload)] before it)."""
        self.send_option(opt, data, optlen)
        return self.option_replies(opt, max_replies)

    def option_expect(self, opt, allowed, what, data=b"", optlen=None):
        """option(), whose final reply must be one of ALLOWED (the
        case fails naming WHAT otherwise); returns the replies before
        it."""
        rtype, replies = self.option(opt, data, optlen)
        expect_rep(rtype, allowed, what)
        return replies

    def option_replies(self, opt, max_replies=1000):
        replies = []
        for _ in range(max_replies):
            rtype, rdata = self.opt_reply(opt)
            if rtype in (REP_SERVER, REP_INFO, REP_META):
                replies.append((rtype, rdata))
                continue
            if rtype & 0x80000000 and rdata:
                # An error's payload is a message for humans.
                expect(b"\0" not in rdata, "NUL in error message %r", rdata)
            return rtype, replies
        raise CaseFailed("more than %d replies to option %d"
                         % (max_replies, opt))

    @staticmethod
    def go_data(name=b"", infos=(INFO_BLOCK_SIZE,)):
        return (struct.pack(">I", len(name)) + name +
                struct.pack(">H", len(infos)) +
                b"".join(struct.pack(">H", i) for i in infos))

    def go(self, name=b"", opt=OPT_GO, infos=(INFO_BLOCK_SIZE,)):
        """INFO or GO; returns the final reply type.  On ACK, records
        the export's size and flags (and enters transmission for GO)."""
        rtype, replies = self.option(opt, self.go_data(name, infos))
        if rtype == REP_ACK:
            exports = [d for t, d in replies
                       if t == REP_INFO and d[:2] == b"\0\0"]
            expect(len(exports) >= 1, "ACK without NBD_INFO_EXPORT")
            expect(len(exports[0]) == 12, "NBD_INFO_EXPORT of %d bytes",
                   len(exports[0]))
            self.size, self.eflags = struct.unpack(">QH", exports[0][2:])
        return rtype

    def set_meta(self, queries=(b"base:allocation",), name=b""):
        data = (struct.pack(">I", len(name)) + name +
                struct.pack(">I", len(queries)) +
                b"".join(struct.pack(">I", len(q)) + q for q in queries))
        return self.option(OPT_SET_META, data)

    def open(self, mode="simple", meta=False):
        """A correct handshake into transmission, in MODE (simple,
        structured or extended replies)."""
        self.greet()
        if mode in ("structured", "extended"):
            opt = OPT_SR if mode == "structured" else OPT_EXT
            rtype, _ = self.option(opt)
            expect_rep(rtype, REP_ACK, "negotiating %s replies" % mode)
            self.structured = True
            self.extended = mode == "extended"
        if meta:
            rtype, replies = self.set_meta()
            expect_rep(rtype, REP_ACK, "SET_META_CONTEXT base:allocation")
            expect(len(replies) == 1, "base:allocation was not selected")
        expect_rep(self.go(), REP_ACK, "NBD_OPT_GO")
        return self

    # transmission

    def header(self, typ, offset=0, count=0, flags=0, cookie=1):
        if self.extended:
            return struct.pack(">IHHQQQ", EXT_REQ_MAGIC, flags, typ, cookie,
                               offset, count)
        return struct.pack(">IHHQQI", REQ_MAGIC, flags, typ, cookie, offset,
                           count)

    def request(self, typ, offset=0, count=0, flags=0, cookie=1,
                payload=b""):
        self.send(self.header(typ, offset, count, flags, cookie) + payload)

    def reply(self, pending):
        """Read one whole reply (all its chunks).  PENDING maps cookies to
        the Req they answer (or is the one Req in flight)."""
        magic, = struct.unpack(">I", self.recv_exact(4))
        if magic == SIMPLE_MAGIC:
            error, cookie = struct.unpack(">IQ", self.recv_exact(12))
            req = self._pending(pending, cookie)
            expect(not self.extended, "simple reply with extended headers")
            data = b""
            if req.typ == CMD_READ:
                expect(not self.structured, "simple reply to a read with "
                       "structured replies negotiated")
                if error == 0:
                    data = self.recv_exact(req.count)
            return Reply("simple", cookie, error, data)
        expect(magic in (STRUCTURED_MAGIC, EXTENDED_MAGIC),
               "bad reply magic 0x%08x", magic)
        expect(self.structured, "structured reply without negotiation")
        expect((magic == EXTENDED_MAGIC) == self.extended,
               "reply magic 0x%08x does not match the negotiated headers",
               magic)
        first, error, chunks = None, 0, []
        data = None
        for _ in range(100000):
            if magic == EXTENDED_MAGIC:
                flags, typ, cookie, _off, length = struct.unpack(
                    ">HHQQQ", self.recv_exact(28))
            else:
                flags, typ, cookie, length = struct.unpack(
                    ">HHQI", self.recv_exact(16))
            expect(length <= MAX_PAYLOAD + 64,
                   "reply chunk of %d bytes", length)
            if first is None:
                first = cookie
                req = self._pending(pending, cookie)
                # Room for the data, unless the read is too big to be
                # answered with any.
                if req.typ == CMD_READ and req.count <= MAX_PAYLOAD:
                    data = bytearray(req.count)
            expect(cookie == first, "chunks of two replies interleaved")
            payload = self.recv_exact(length) if length else b""
            chunks.append((typ, payload))
            if typ in (RT_ERROR, RT_ERROR_OFFSET):
                expect(len(payload) >= 6, "short error chunk")
                e, mlen = struct.unpack(">IH", payload[:6])
                expect(e != 0, "error chunk with error 0")
                expect(6 + mlen <= len(payload), "error message overruns")
                error = error or e
            elif typ == RT_DATA:
                expect(data is not None, "data chunk for a %s of %d bytes",
                       CMD_NAMES.get(req.typ), req.count)
                off, = struct.unpack(">Q", payload[:8])
                rel = off - req.offset
                expect(0 <= rel and rel + length - 8 <= req.count,
                       "data chunk outside the request")
                data[rel:rel + length - 8] = payload[8:]
            elif typ == RT_HOLE:
                expect(req.typ == CMD_READ, "hole chunk for %s",
                       CMD_NAMES.get(req.typ))
            elif typ not in (RT_NONE, RT_BS, RT_BS_EXT):
                raise CaseFailed("unknown reply chunk type 0x%x" % typ)
            if flags & REPLY_DONE:
                break
            m, = struct.unpack(">I", self.recv_exact(4))
            expect(m == magic, "chunk magic changed to 0x%08x", m)
        else:
            raise CaseFailed("reply never finished")
        kind = "extended" if self.extended else "structured"
        return Reply(kind, first, error,
                     bytes(data) if data is not None and not error else b"",
                     chunks)

    @staticmethod
    def _pending(pending, cookie):
        if isinstance(pending, Req):
            return pending
        expect(cookie in pending, "reply with unknown cookie 0x%x", cookie)
        return pending[cookie]

    def cmd(self, typ, offset=0, count=0, flags=0, payload=b"", cookie=7):
        """One request, its reply; returns the Reply."""
        self.request(typ, offset, count, flags, cookie, payload)
        r = self.reply(Req(typ, offset, count, flags))
        expect(r.cookie == cookie, "reply cookie 0x%x, expected 0x%x",
               r.cookie, cookie)
        return r

    def read(self, offset, count, flags=0):
        r = self.cmd(CMD_READ, offset, count, flags)
        expect_err(r.error, 0, "read of %d at %d" % (count, offset))
        return r.data

    def write(self, offset, data, flags=0):
        r = self.cmd(CMD_WRITE, offset, len(data), flags, data)
        expect_err(r.error, 0, "write of %d at %d" % (len(data), offset))

    def disc(self):
        self.request(CMD_DISC)
        self.close()

    def supports(self, typ):
        """Whether the export advertised command TYP.  Which commands a
        stack offers depends on its plugin and filters (the cow filter,
        as nbdkit's, offers no WRITE_ZEROES): one it does not offer is
        refused with EINVAL, whatever its range."""
        flag = {CMD_FLUSH: FLAG_SEND_FLUSH, CMD_TRIM: FLAG_SEND_TRIM,
                CMD_ZERO: FLAG_SEND_WRITE_ZEROES,
                CMD_CACHE: FLAG_SEND_CACHE}.get(typ)
        return flag is None or bool(self.eflags & flag)

    def zero_or_write(self, offset, count):
        """WRITE_ZEROES where the export offers it, else a write of
        zeroes: for cases about what zeroing does to other requests,
        not about the command itself."""
        if self.supports(CMD_ZERO):
            return self.cmd(CMD_ZERO, offset, count)
        return self.cmd(CMD_WRITE, offset, count, 0, bytes(count))


# --- The cases ------------------------------------------------------------

CASES = {}


def case(group, name, doc):
    def register(fn):
        CASES.setdefault(group, []).append((name, fn, doc))
        return fn
    return register


class Ctx:
    """What a case gets: the socket path, the server's pid, the export
    size, the canaries and the command line's options."""
    def __init__(self, args):
        self.path, self.pid, self.args = args.socket, args.pid, args
        self.size = None
        self.head = random.Random(1).randbytes(CANARY_LEN)
        self.tail = random.Random(2).randbytes(CANARY_LEN)

    def conn(self, timeout=TIMEOUT):
        return Conn(self.path, timeout)

    def good(self, mode="simple", meta=False):
        return self.conn().open(mode, meta)

    @property
    def tail_off(self):
        return self.size - CANARY_LEN

    # A region that cases may write to freely, between the canaries.
    SCRATCH = 4 * MiB
    BIG = 8 * MiB               # start of room for >64 MiB effects


def server_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except OSError:
        return False


def write_canaries(ctx):
    c = ctx.good()
    ctx.size = c.size
    expect(ctx.size >= 256 * MiB, "the export must be at least 256 MiB")
    c.write(0, ctx.head)
    c.write(ctx.tail_off, ctx.tail)
    r = c.cmd(CMD_FLUSH)
    expect_err(r.error, 0, "flush")
    c.disc()


def check_canaries(ctx, retries=50):
    # A server at its connection limit may take a moment to notice the
    # case's connections have gone.
    for i in range(retries):
        try:
            c = ctx.good()
            break
        except (ServerClosed, ConnectionRefusedError, ConnectionResetError,
                BrokenPipeError):
            if i == retries - 1:
                raise CaseFailed("no well-behaved connection possible "
                                 "afterwards")
            time.sleep(0.1)
    for off, want, what in ((0, ctx.head, "head"),
                            (ctx.tail_off, ctx.tail, "tail")):
        got = c.read(off, CANARY_LEN)
        if got != want:
            bad = next(i for i in range(CANARY_LEN) if got[i] != want[i])
            raise CaseFailed("the %s canary changed at offset %d"
                             % (what, off + bad))
    c.disc()


# ---- handshake ----

@case("handshake", "unknown-client-flags",
      "client flags with unknown bits: the server closes the connection")
def _(ctx):
    for flags in (0x80000000, C_FIXED | 4, 0xFFFFFFFF):
        c = ctx.conn()
        c.greet(flags)
        # An option after them must not be answered (the server may
        # already have closed, so the send may fail).
        c.try_send(struct.pack(">QII", IHAVEOPT, OPT_LIST, 0))
        expect(c.server_closes(), "flags 0x%x: connection kept", flags)
        c.close()


@case("handshake", "garbage-instead-of-flags",
      "random bytes sent before even reading the greeting: closed")
def _(ctx):
    c = ctx.conn()
    c.try_send(random.Random(3).randbytes(4096))
    expect(c.server_closes(), "connection kept after 4 KiB of garbage")
    c.close()


@case("handshake", "http-request",
      "an HTTP request instead of the handshake: closed")
def _(ctx):
    c = ctx.conn()
    c.try_send(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
    expect(c.server_closes(), "connection kept after an HTTP request")
    c.close()


@case("handshake", "garbage-instead-of-option",
      "valid flags, then garbage where an option header belongs: closed")
def _(ctx):
    c = ctx.conn()
    c.greet()
    c.try_send(random.Random(4).randbytes(64))
    expect(c.server_closes(), "connection kept after a bad option magic")
    c.close()


@case("handshake", "truncated-option-header",
      "half an option header, then the client closes its side")
def _(ctx):
    c = ctx.conn()
    c.greet()
    c.send(struct.pack(">QI", IHAVEOPT, OPT_GO)[:10])
    c.s.shutdown(socket.SHUT_WR)
    expect(c.server_closes(), "server did not close on a truncated header")
    c.close()


@case("handshake", "unknown-options",
      "unknown option numbers get ERR_UNSUP and negotiation goes on")
def _(ctx):
    c = ctx.conn()
    c.greet()
    for opt in (0, 4, 12, 13, 0x4242, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF):
        replies = c.option_expect(opt, ERR_UNSUP, "option 0x%x" % opt,
                                  b"hello")
        expect(not replies, "option 0x%x: replies before the error" % opt)
    expect_rep(c.go(), REP_ACK, "GO after unknown options")
    expect(c.read(0, 4096) == ctx.head[:4096], "read after GO is wrong")
    c.disc()


@case("handshake", "unknown-option-large",
      "a 60000-byte unknown option is skipped whole: ERR_UNSUP, then GO")
def _(ctx):
    c = ctx.conn()
    c.greet()
    c.option_expect(0x4242, ERR_UNSUP, "large unknown option", b"\x55" * 60000)
    expect_rep(c.go(), REP_ACK, "GO after a large unknown option")
    c.disc()


@case("handshake", "optlen-4G",
      "option lengths of 2^32-1 (unknown, GO, EXPORT_NAME, "
      "SET_META_CONTEXT): refused without reading 4 GiB")
def _(ctx):
    for opt in (0x4242, OPT_GO, OPT_EXPORT_NAME, OPT_SET_META):
        c = ctx.conn()
        c.greet()
        c.send_option(opt, b"\0" * 64, optlen=0xFFFFFFFF)
        # Either an error reply and then the close, or just the close;
        # never an ACK and never waiting for 4 GiB.
        try:
            rtype, _ = c.opt_reply(opt)
            expect(rtype & 0x80000000, "option 0x%x with length 2^32-1: %s",
                   opt, rep_name(rtype))
        except ServerClosed:
            pass
        expect(c.server_closes(), "option 0x%x with length 2^32-1: the "
               "server waits for the data" % opt)
        c.close()


@case("handshake", "optlen-zero",
      "options whose data is required but whose length is 0: ERR_INVALID")
def _(ctx):
    c = ctx.conn()
    c.greet()
    for opt in (OPT_GO, OPT_INFO):
        rtype, replies = c.option(opt, b"")
        expect_rep(rtype, ERR_INVALID, "option %d with length 0" % opt)
        expect(not replies, "INFO replies before the error")
    c.option_expect(OPT_SR, REP_ACK, "STRUCTURED_REPLY")
    for opt in (OPT_SET_META, OPT_LIST_META):
        rtype, replies = c.option(opt, b"")
        expect_rep(rtype, ERR_INVALID, "option %d with length 0" % opt)
    c.option_expect(OPT_LIST, REP_ACK, "LIST with length 0", b"")
    expect_rep(c.go(), REP_ACK, "GO afterwards")
    c.disc()
    # EXPORT_NAME with length 0 is the default export.
    c = ctx.conn()
    c.greet()
    c.send_option(OPT_EXPORT_NAME, b"")
    size, _flags = struct.unpack(">QH", c.recv_exact(10))
    expect(size == ctx.size, "EXPORT_NAME \"\": size %d", size)
    c.structured = False
    expect(c.read(0, 512) == ctx.head[:512], "read after EXPORT_NAME")
    c.disc()


@case("handshake", "optlen-shorter-than-data",
      "GO whose length stops inside its own data: ERR_INVALID, then the "
      "leftover bytes are a bad option header and the server closes")
def _(ctx):
    c = ctx.conn()
    c.greet()
    data = Conn.go_data(b"abcdefgh", ())
    c.option_expect(OPT_GO, ERR_INVALID, "GO cut short by its length",
                    data[:10], optlen=10)
    c.send(data[10:])                      # the rest, out of frame
    c.try_send(struct.pack(">QII", IHAVEOPT, OPT_LIST, 0))
    expect(c.server_closes(), "leftover option bytes were accepted")
    c.close()
    # STRUCTURED_REPLY with length 0 but 4 bytes of data after it.
    c = ctx.conn()
    c.greet()
    c.send_option(OPT_SR, b"junk", optlen=0)
    rtype, _ = c.opt_reply(OPT_SR)
    expect_rep(rtype, REP_ACK, "STRUCTURED_REPLY")
    c.try_send(struct.pack(">QII", IHAVEOPT, OPT_LIST, 0))
    expect(c.server_closes(), "junk after an option was taken as an option")
    c.close()


@case("handshake", "optlen-longer-than-data",
      "GO with junk inside its length: ERR_INVALID, negotiation goes on")
def _(ctx):
    c = ctx.conn()
    c.greet()
    c.option_expect(OPT_GO, ERR_INVALID, "GO with 100 bytes of trailing junk",
                    Conn.go_data(b"", ()) + b"junk" * 25)
    expect_rep(c.go(), REP_ACK, "GO afterwards")
    c.disc()


@case("handshake", "long-export-names",
      "export names over 4096 bytes: GO/INFO get an error, EXPORT_NAME "
      "closes the connection")
def _(ctx):
    c = ctx.conn()
    c.greet()
    for opt in (OPT_INFO, OPT_GO):
        for n in (4097, 5000, 65000):
            rtype = c.go(b"x" * n, opt)
            expect_rep(rtype, (ERR_INVALID, ERR_TOO_BIG, ERR_UNKNOWN),
                       "option %d with a %d-byte name" % (opt, n))
    c.option_expect(OPT_SR, REP_ACK, "STRUCTURED_REPLY")
    rtype, _ = c.set_meta(name=b"y" * 5000)
    expect_rep(rtype, (ERR_INVALID, ERR_TOO_BIG, ERR_UNKNOWN),
               "SET_META_CONTEXT with a 5000-byte name")
    # 4096 bytes is allowed by the protocol; this plugin ignores names.
    rtype = c.go(b"z" * 4096, OPT_INFO)
    expect_rep(rtype, (REP_ACK, ERR_UNKNOWN), "INFO, 4096-byte name")
    expect_rep(c.go(), REP_ACK, "GO afterwards")
    c.disc()
    for n in (4097, 60000):
        c = ctx.conn()
        c.greet()
        c.send_option(OPT_EXPORT_NAME, b"x" * n)
        expect(c.server_closes(), "EXPORT_NAME with a %d-byte name was "
               "not refused" % n)
        c.close()


@case("handshake", "lying-name-length",
      "GO/INFO whose name length disagrees with the option length")
def _(ctx):
    c = ctx.conn()
    c.greet()
    for opt in (OPT_INFO, OPT_GO):
        for namelen in (0xFFFFFFFF, 0x80000000, 4097, 100, 9, 3):
            data = struct.pack(">I", namelen) + b"abcdefgh" + b"\0\0"
            rtype, replies = c.option(opt, data)
            expect_rep(rtype, ERR_INVALID, "option %d, name length %d in "
                       "14 bytes" % (opt, namelen))
            expect(not replies, "INFO replies before the error")
    expect_rep(c.go(), REP_ACK, "GO afterwards")
    c.disc()


@case("handshake", "lying-info-count",
      "GO/INFO whose number of info requests disagrees with the length")
def _(ctx):
    c = ctx.conn()
    c.greet()
    for opt in (OPT_INFO, OPT_GO):
        for claimed, given in ((1, 0), (2, 1), (0xFFFF, 3), (0, 2),
                               (1, 5)):
            data = (struct.pack(">IH", 0, claimed) +
                    struct.pack(">H", INFO_NAME) * given)
            c.option_expect(opt, ERR_INVALID, "option %d: %d info requests "
                            "claimed, %d sent" % (opt, claimed, given), data)
        # An odd byte after a consistent list.
        c.option_expect(opt, ERR_INVALID, "odd trailing byte",
                        struct.pack(">IHH", 0, 1, 0) + b"\0")
    expect_rep(c.go(), REP_ACK, "GO afterwards")
    c.disc()


@case("handshake", "many-info-requests",
      "INFO asking 30000 times for names, descriptions and unknown items: "
      "answered once each (no amplification)")
def _(ctx):
    c = ctx.conn()
    c.greet()
    infos = [INFO_NAME, INFO_DESCRIPTION, INFO_BLOCK_SIZE, 0x7FFF] * 7500
    replies = c.option_expect(OPT_INFO, REP_ACK, "INFO with 30000 requests",
                              Conn.go_data(b"", infos))
    expect(len(replies) <= 8, "%d INFO replies for 4 distinct items",
           len(replies))
    expect_rep(c.go(), REP_ACK, "GO afterwards")
    c.disc()


@case("handshake", "nul-in-export-name",
      "an export name with a NUL byte: GO gets ERR_INVALID (or UNKNOWN)")
def _(ctx):
    c = ctx.conn()
    c.greet()
    rtype = c.go(b"abc\0def")
    expect_rep(rtype, (ERR_INVALID, ERR_UNKNOWN), "name with NUL")
    expect_rep(c.go(), REP_ACK, "GO afterwards")
    c.disc()
    c = ctx.conn()
    c.greet()
    c.send_option(OPT_EXPORT_NAME, b"abc\0def")
    expect(c.server_closes(), "EXPORT_NAME with a NUL was accepted")
    c.close()


@case("handshake", "starttls-without-tls",
      "STARTTLS on a server without TLS: ERR_POLICY or ERR_UNSUP, and the "
      "connection goes on in plain text")
def _(ctx):
    c = ctx.conn()
    c.greet()
    c.option_expect(OPT_STARTTLS, (ERR_POLICY, ERR_UNSUP), "STARTTLS")
    c.option_expect(OPT_STARTTLS, (ERR_POLICY, ERR_UNSUP), "STARTTLS again")
    c.option_expect(OPT_STARTTLS, (ERR_POLICY, ERR_UNSUP, ERR_INVALID),
                    "STARTTLS with data", b"\x16\x03\x01\x00\x05hello")
    expect_rep(c.go(), REP_ACK, "GO after STARTTLS was refused")
    expect(c.read(0, 4096) == ctx.head[:4096], "read after STARTTLS")
    c.disc()


@case("handshake", "structured-reply-twice",
      "STRUCTURED_REPLY twice: ACK then ACK or ERR_INVALID; replies are "
      "structured")
def _(ctx):
    c = ctx.conn()
    c.greet()
    c.option_expect(OPT_SR, REP_ACK, "first STRUCTURED_REPLY")
    c.option_expect(OPT_SR, (REP_ACK, ERR_INVALID), "second STRUCTURED_REPLY")
    c.option_expect(OPT_SR, ERR_INVALID, "STRUCTURED_REPLY with data", b"x")
    c.structured = True
    expect_rep(c.go(), REP_ACK, "GO")
    expect(c.eflags & FLAG_SEND_DF, "no NBD_FLAG_SEND_DF with structured "
           "replies (eflags 0x%x)", c.eflags)
    r = c.cmd(CMD_READ, 0, 4096, F_DF)
    expect(r.kind == "structured" and r.error == 0 and
           r.data == ctx.head[:4096], "DF read: %s error %s", r.kind,
           err_name(r.error))
    c.disc()


@case("handshake", "extended-headers-twice",
      "EXTENDED_HEADERS twice, then STRUCTURED_REPLY: the connection ends "
      "up with working extended headers")
def _(ctx):
    c = ctx.conn()
    c.greet()
    c.option_expect(OPT_EXT, REP_ACK, "first EXTENDED_HEADERS")
    c.option_expect(OPT_EXT, (REP_ACK, ERR_INVALID), "second EXTENDED_HEADERS")
    c.option_expect(OPT_SR, (REP_ACK, ERR_INVALID), "STRUCTURED_REPLY after "
                    "EXTENDED_HEADERS")
    c.structured = c.extended = True
    expect_rep(c.go(), REP_ACK, "GO")
    expect(c.read(0, 4096) == ctx.head[:4096], "extended read")
    c.disc()


@case("handshake", "meta-context-before-structured",
      "LIST/SET_META_CONTEXT before STRUCTURED_REPLY: ERR_INVALID; "
      "BLOCK_STATUS is then refused with EINVAL")
def _(ctx):
    c = ctx.conn()
    c.greet()
    replies = c.option_expect(OPT_LIST_META, ERR_INVALID, "LIST_META_CONTEXT",
                              struct.pack(">II", 0, 0))
    rtype, replies = c.set_meta()
    expect_rep(rtype, ERR_INVALID, "SET_META_CONTEXT")
    expect(not replies, "a context was selected without structured replies")
    expect_rep(c.go(), REP_ACK, "GO")
    r = c.cmd(CMD_BS, 0, 4096)
    expect(r.kind == "simple", "%s reply without structured replies", r.kind)
    expect_err(r.error, EINVAL, "BLOCK_STATUS without a context")
    expect(c.read(0, 512) == ctx.head[:512], "read afterwards")
    c.disc()


@case("handshake", "meta-context-lying-lengths",
      "SET/LIST_META_CONTEXT with lying lengths and counts: ERR_INVALID or "
      "ERR_TOO_BIG; a correct SET afterwards works")
def _(ctx):
    c = ctx.conn()
    c.greet()
    c.option_expect(OPT_SR, REP_ACK, "STRUCTURED_REPLY")
    q = b"base:allocation"
    bad = [
        struct.pack(">II", 0, 0xFFFFFFFF),                  # count
        struct.pack(">II", 0, 2) + struct.pack(">I", len(q)) + q,
        struct.pack(">II", 0, 1) + struct.pack(">I", 1000) + q,
        struct.pack(">II", 0, 1) + struct.pack(">I", 0xFFFFFFFF) + q,
        struct.pack(">II", 100, 0),                          # name length
        struct.pack(">II", 0xFFFFFFFF, 0),
        struct.pack(">II", 0, 1) + struct.pack(">I", len(q)) + q + b"x",
        struct.pack(">II", 0, 1) + b"\0\0",                 # cut query len
        struct.pack(">II", 0, 100000),
    ]
    for opt in (OPT_LIST_META, OPT_SET_META):
        for i, data in enumerate(bad):
            c.option_expect(opt, (ERR_INVALID, ERR_TOO_BIG),
                            "option %d, bad data #%d" % (opt, i), data)
    rtype, replies = c.set_meta()
    expect_rep(rtype, REP_ACK, "a correct SET_META_CONTEXT")
    expect(len(replies) == 1, "base:allocation not selected")
    c.structured = True
    expect_rep(c.go(), REP_ACK, "GO")
    r = c.cmd(CMD_BS, 0, 4096)
    expect_err(r.error, 0, "BLOCK_STATUS")
    c.disc()


@case("handshake", "meta-context-other-export",
      "SET_META_CONTEXT for export \"a\", GO to export \"b\": the "
      "context does not carry over, BLOCK_STATUS gets EINVAL")
def _(ctx):
    c = ctx.conn()
    c.greet()
    c.option_expect(OPT_SR, REP_ACK, "STRUCTURED_REPLY")
    rtype, replies = c.set_meta(name=b"a")
    expect_rep(rtype, REP_ACK, "SET_META_CONTEXT for \"a\"")
    c.structured = True
    rtype = c.go(b"b")
    if rtype != REP_ACK:        # a plugin with named exports
        expect_rep(rtype, ERR_UNKNOWN, "GO \"b\"")
        c.close()
        return
    r = c.cmd(CMD_BS, 0, 4096)
    expect_err(r.error, EINVAL, "BLOCK_STATUS with another export's context")
    c.disc()


@case("handshake", "request-instead-of-option",
      "a transmission request where an option belongs: closed")
def _(ctx):
    c = ctx.conn()
    c.greet()
    c.try_send(struct.pack(">IHHQQI", REQ_MAGIC, 0, CMD_WRITE, 1, 0, 512)
               + b"\xee" * 512)
    expect(c.server_closes(), "a request was accepted as an option")
    c.close()


@case("handshake", "request-after-info",
      "INFO (which does not end the handshake) then a write request: "
      "closed, nothing written")
def _(ctx):
    c = ctx.conn()
    c.greet()
    expect_rep(c.go(opt=OPT_INFO), REP_ACK, "INFO")
    c.try_send(struct.pack(">IHHQQI", REQ_MAGIC, 0, CMD_WRITE, 1, 0, 512)
               + b"\xee" * 512)
    expect(c.server_closes(), "a request after INFO was accepted")
    c.close()


@case("handshake", "request-pipelined-with-go",
      "GO and a read sent together, before GO's reply: the read is "
      "answered after GO's ACK")
def _(ctx):
    c = ctx.conn()
    c.greet()
    c.send(struct.pack(">QII", IHAVEOPT, OPT_GO, 6) + Conn.go_data(b"", ())
           + struct.pack(">IHHQQI", REQ_MAGIC, 0, CMD_READ, 9, 0, 4096))
    rtype, replies = c.option_replies(OPT_GO)
    expect_rep(rtype, REP_ACK, "GO")
    r = c.reply(Req(CMD_READ, 0, 4096))
    expect(r.cookie == 9 and r.error == 0 and r.data == ctx.head[:4096],
           "the pipelined read was not answered correctly")
    c.disc()


@case("handshake", "option-flood",
      "5000 unknown options in a row: each answered until the server "
      "decides it is a flood and closes; it stays up")
def _(ctx):
    c = ctx.conn(timeout=10)
    c.greet()
    answered, closed = 0, False
    try:
        for _ in range(50):
            c.send(struct.pack(">QII", IHAVEOPT, 0x4242, 0) * 100)
            for _ in range(100):
                rtype, _ = c.opt_reply(0x4242)
                expect_rep(rtype, ERR_UNSUP, "flooded option")
                answered += 1
    except ServerClosed:
        closed = True
    expect(closed or answered == 5000, "answered %d then stalled", answered)
    if not closed:
        c.disc()
    else:
        c.close()


@case("handshake", "abort-with-data",
      "ABORT carrying data: acknowledged or not, the connection ends")
def _(ctx):
    c = ctx.conn()
    c.greet()
    c.send_option(OPT_ABORT, b"bye" * 10)
    expect(c.server_closes(), "ABORT did not end the connection")
    c.close()


@case("handshake", "list-with-data",
      "LIST with data: ERR_INVALID, negotiation goes on")
def _(ctx):
    c = ctx.conn()
    c.greet()
    c.option_expect(OPT_LIST, ERR_INVALID, "LIST with data", b"data")
    replies = c.option_expect(OPT_LIST, REP_ACK, "LIST")
    for t, d in replies:
        expect(len(d) >= 4 and struct.unpack(">I", d[:4])[0] <= len(d) - 4,
               "NBD_REP_SERVER with a bad name length")
    expect_rep(c.go(), REP_ACK, "GO")
    c.disc()


@case("handshake", "no-fixed-newstyle",
      "client flags 0 (plain newstyle), then EXPORT_NAME: served")
def _(ctx):
    c = ctx.conn()
    c.greet(0)
    c.send_option(OPT_EXPORT_NAME, b"")
    size, _flags = struct.unpack(">QH", c.recv_exact(10))
    expect(c.recv_exact(124) == b"\0" * 124, "reserved bytes not zero")
    expect(size == ctx.size, "EXPORT_NAME: size %d", size)
    expect(c.read(0, 512) == ctx.head[:512], "read after EXPORT_NAME")
    c.disc()


# ---- requests: every command with bad ranges, lengths and flags ----

MODES = ("simple", "structured", "extended")


def each_mode(ctx, fn, meta=False):
    for mode in MODES:
        c = ctx.good(mode, meta and mode != "simple")
        try:
            fn(c, mode)
        except CaseFailed as e:
            raise CaseFailed("%s replies: %s" % (mode, e))
        # Whatever came before, the connection still serves correctly.
        expect(c.read(0, 4096) == ctx.head[:4096],
               "%s: read after the bad requests is wrong" % mode)
        c.disc()


def ranges(size):
    """(what, offset, count) beyond the end of an export of SIZE."""
    return [
        ("past the end", size - 512, 1024),
        ("at the end", size, 1),
        ("far past the end", size + 4096, 512),
        ("offset 2^63", 1 << 63, 512),
        ("wrapping 2^64", (1 << 64) - 512, 1024),
        ("wrapping 2^64 by one", (1 << 64) - 1, 2),
        ("offset 2^64-1", (1 << 64) - 1, 1),
    ]


@case("requests", "read-bad-ranges",
      "READ past the end and at offsets that wrap 2^64: EINVAL")
def _(ctx):
    def body(c, mode):
        for what, off, n in ranges(ctx.size):
            r = c.cmd(CMD_READ, off, n)
            expect_err(r.error, EINVAL, "read %s" % what)
            expect(r.data == b"", "data with an error reply")
    each_mode(ctx, body)


@case("requests", "read-length-zero",
      "READ of length 0: success without data, or EINVAL")
def _(ctx):
    def body(c, mode):
        for off in (0, 4096, ctx.size):
            r = c.cmd(CMD_READ, off, 0)
            expect_err(r.error, (0, EINVAL), "read of 0 bytes at %d" % off)
    each_mode(ctx, body)


@case("requests", "read-too-long",
      "READ above the 64 MiB limit: ENOMEM as nbdkit answers (EINVAL "
      "if it also runs past the end), connection kept; 64 MiB is served")
def _(ctx):
    def body(c, mode):
        for n in (MAX_PAYLOAD + 1, MAX_PAYLOAD + 4096):
            r = c.cmd(CMD_READ, 0, n)
            expect_err(r.error, ENOMEM, "read of %d bytes" % n)
        n = 0xFFFFFFFF
        r = c.cmd(CMD_READ, 0, n)
        expect_err(r.error, (ENOMEM, EINVAL), "read of %d bytes" % n)
        if c.extended:
            for n in (1 << 32, 1 << 40, (1 << 64) - 1):
                r = c.cmd(CMD_READ, 0, n)
                expect_err(r.error, (ENOMEM, EINVAL),
                           "read of %d bytes" % n)
        # The limit itself works.
        r = c.cmd(CMD_READ, 0, MAX_PAYLOAD)
        expect_err(r.error, 0, "read of exactly 64 MiB")
        expect(r.data[:CANARY_LEN] == ctx.head, "64 MiB read is wrong")
    each_mode(ctx, body)


@case("requests", "write-bad-ranges",
      "WRITE past the end and at wrapping offsets: ENOSPC, payload "
      "skipped, nothing changed")
def _(ctx):
    def body(c, mode):
        for what, off, n in ranges(ctx.size):
            r = c.cmd(CMD_WRITE, off, n, 0, b"\xee" * n)
            expect_err(r.error, ENOSPC, "write %s" % what)
    each_mode(ctx, body)


@case("requests", "write-length-zero",
      "WRITE of length 0: success or EINVAL, nothing changed")
def _(ctx):
    def body(c, mode):
        for off in (0, ctx.size - 1, ctx.size):
            r = c.cmd(CMD_WRITE, off, 0)
            expect_err(r.error, (0, EINVAL), "write of 0 bytes at %d" % off)
    each_mode(ctx, body)


@case("requests", "trim-bad-ranges",
      "TRIM past the end and at wrapping offsets: EINVAL")
def _(ctx):
    def body(c, mode):
        for what, off, n in ranges(ctx.size):
            r = c.cmd(CMD_TRIM, off, n)
            expect_err(r.error, EINVAL, "trim %s" % what)
    each_mode(ctx, body)


@case("requests", "zero-bad-ranges",
      "WRITE_ZEROES past the end and at wrapping offsets: ENOSPC (EINVAL "
      "where the export does not offer WRITE_ZEROES)")
def _(ctx):
    def body(c, mode):
        want = ENOSPC if c.supports(CMD_ZERO) else EINVAL
        for what, off, n in ranges(ctx.size):
            for flags in (0, F_NO_HOLE):
                r = c.cmd(CMD_ZERO, off, n, flags)
                expect_err(r.error, want, "zero %s (flags %d, eflags 0x%x)"
                           % (what, flags, c.eflags))
    each_mode(ctx, body)


@case("requests", "cache-and-block-status-bad-ranges",
      "CACHE and BLOCK_STATUS past the end and wrapping: EINVAL")
def _(ctx):
    def body(c, mode):
        for what, off, n in ranges(ctx.size):
            r = c.cmd(CMD_CACHE, off, n)
            expect_err(r.error, EINVAL, "cache %s" % what)
            if c.structured:
                r = c.cmd(CMD_BS, off, n)
                expect_err(r.error, EINVAL, "block status %s" % what)
    each_mode(ctx, body, meta=True)


@case("requests", "effects-length-zero",
      "TRIM, WRITE_ZEROES, CACHE, BLOCK_STATUS of length 0: answered "
      "(success or EINVAL)")
def _(ctx):
    def body(c, mode):
        for typ in (CMD_TRIM, CMD_ZERO, CMD_CACHE, CMD_BS):
            if typ == CMD_BS and not c.structured:
                continue
            r = c.cmd(typ, 4096, 0)
            expect_err(r.error, (0, EINVAL), "%s of 0 bytes"
                       % CMD_NAMES[typ])
    each_mode(ctx, body, meta=True)


@case("requests", "effects-above-maximum",
      "TRIM and WRITE_ZEROES of 65 MiB (above the payload limit): "
      "done, or EOVERFLOW/EINVAL; the range reads back as zeroes if done")
def _(ctx):
    def body(c, mode):
        n = MAX_PAYLOAD + MiB
        for typ in (CMD_TRIM, CMD_ZERO):
            r = c.cmd(typ, Ctx.BIG, n)
            expect_err(r.error, (0, EOVERFLOW, EINVAL), "%s of 65 MiB"
                       % CMD_NAMES[typ])
            if typ == CMD_ZERO and r.error == 0:
                got = c.read(Ctx.BIG + n - MiB, MiB)
                expect(got == b"\0" * MiB, "zeroed range is not zero")
        if c.extended:
            r = c.cmd(CMD_ZERO, Ctx.BIG, (1 << 32) + 1)
            expect_err(r.error, (ENOSPC, EINVAL), "zero of 4 GiB past end")
        if c.structured:
            r = c.cmd(CMD_BS, 0, ctx.size)
            expect_err(r.error, 0, "block status of the whole export")
    each_mode(ctx, body, meta=True)


@case("requests", "flush-with-range",
      "FLUSH with offset and length set (they must be 0): answered, "
      "success or EINVAL")
def _(ctx):
    def body(c, mode):
        r = c.cmd(CMD_FLUSH, 12345, 678)
        expect_err(r.error, (0, EINVAL), "flush with a range")
        r = c.cmd(CMD_FLUSH, (1 << 64) - 1, 0xFFFFFFFF)
        expect_err(r.error, (0, EINVAL), "flush with a wild range")
    each_mode(ctx, body)


@case("requests", "fua-everywhere",
      "FUA on every command: accepted (it may do nothing) when the export "
      "advertises it, EINVAL when it does not (or not the command)")
def _(ctx):
    def body(c, mode):
        for typ in (CMD_READ, CMD_WRITE, CMD_FLUSH, CMD_TRIM, CMD_ZERO,
                    CMD_CACHE, CMD_BS):
            if typ == CMD_BS and not c.structured:
                continue
            want = 0 if c.eflags & FLAG_SEND_FUA and c.supports(typ) \
                else EINVAL
            count = 0 if typ == CMD_FLUSH else 4096
            off = Ctx.SCRATCH
            payload = b"\x11" * 4096 if typ == CMD_WRITE else b""
            r = c.cmd(typ, off, count, F_FUA, payload)
            expect_err(r.error, want, "%s with FUA (eflags 0x%x)"
                       % (CMD_NAMES[typ], c.eflags))
    each_mode(ctx, body, meta=True)


@case("requests", "unknown-commands",
      "unknown command types: EINVAL, no payload assumed")
def _(ctx):
    def body(c, mode):
        for typ in (8, 9, 12, 0x42, 0x8000, 0xFFFF):
            r = c.cmd(typ, 0, 4096)
            expect_err(r.error, EINVAL, "command %d" % typ)
            # The next request is read from the right place.
            expect(c.read(0, 512) == ctx.head[:512],
                   "read after command %d" % typ)
    each_mode(ctx, body)


BAD_FLAGS = {
    CMD_READ: (1 << 15, 1 << 6, F_NO_HOLE, F_REQ_ONE, F_FAST_ZERO),
    CMD_WRITE: (1 << 15, 1 << 6, F_NO_HOLE, F_REQ_ONE, F_FAST_ZERO, F_DF),
    CMD_TRIM: (1 << 15, F_NO_HOLE, F_REQ_ONE, F_DF, F_FAST_ZERO),
    CMD_ZERO: (1 << 15, F_REQ_ONE, F_DF),
    CMD_FLUSH: (1 << 15, F_NO_HOLE, F_DF),
    CMD_CACHE: (1 << 15, F_NO_HOLE, F_DF, F_REQ_ONE),
    CMD_BS: (1 << 15, F_NO_HOLE, F_DF, F_FAST_ZERO),
}


@case("requests", "unknown-flags",
      "each command with unknown or inapplicable flags: EINVAL; a write's "
      "payload is skipped, not written (it targets the head canary)")
def _(ctx):
    def body(c, mode):
        for typ, flags_list in BAD_FLAGS.items():
            if typ == CMD_BS and not c.structured:
                continue
            for flags in flags_list:
                payload = b"\xee" * 4096 if typ == CMD_WRITE else b""
                count = 4096 if typ != CMD_FLUSH else 0
                r = c.cmd(typ, 0, count, flags, payload)
                expect_err(r.error, EINVAL, "%s with flags 0x%x"
                           % (CMD_NAMES[typ], flags))
        if not c.extended:
            # Without extended headers PAYLOAD_LEN is just unknown; a
            # write still carries its payload.
            r = c.cmd(CMD_WRITE, 0, 4096, F_PAYLOAD_LEN, b"\xee" * 4096)
            expect_err(r.error, EINVAL, "write with PAYLOAD_LEN")
        else:
            # A payload on a command that takes none is skipped.
            r = c.cmd(CMD_READ, 0, 512, F_PAYLOAD_LEN, b"\xee" * 512)
            expect_err(r.error, EINVAL, "read with a payload")
        if not c.structured:
            r = c.cmd(CMD_READ, 0, 512, F_DF)
            expect_err(r.error, EINVAL, "DF without structured replies")
    each_mode(ctx, body, meta=True)


# ---- stream: cut payloads, pipelining, resets, DISC, cookies ----

def write_header(c, offset, count, cookie=1, flags=0):
    return c.header(CMD_WRITE, offset, count, flags, cookie)


def expect_no_reply(c, secs):
    """Nothing may come back within SECS for a write whose payload has
    not all arrived."""
    c.s.settimeout(secs)
    try:
        got = c.s.recv(16)
        raise CaseFailed("the server answered a write without all its "
                         "payload (%r)" % got)
    except socket.timeout:
        pass
    c.s.settimeout(TIMEOUT)


@case("stream", "write-header-only",
      "a write header for the head canary, no payload, then close: "
      "nothing written")
def _(ctx):
    c = ctx.good()
    c.send(write_header(c, 0, 65536))
    c.close()


@case("stream", "write-cut-mid-payload",
      "writes to the canaries whose payload stops short (1 byte, half, "
      "all but one byte) before the client closes: nothing written")
def _(ctx):
    for off in (0, ctx.size - 65536):
        for sent in (1, 32768, 65535):
            c = ctx.good()
            c.send(write_header(c, off, 65536) + b"\xee" * sent)
            c.s.shutdown(socket.SHUT_WR)
            expect(c.server_closes(), "no close after a cut payload")
            c.close()


@case("stream", "write-cut-by-reset",
      "a 1 MiB write to the head canary cut by a reset (SO_LINGER 0) "
      "half way: nothing written")
def _(ctx):
    c = ctx.good()
    c.send(write_header(c, 0, MiB) + b"\xee" * (MiB // 2))
    time.sleep(0.1)
    c.reset()


@case("stream", "write-stalled-then-closed",
      "a write whose payload stalls half way for 1 s, then the client "
      "closes: nothing written, no reply")
def _(ctx):
    c = ctx.good()
    c.send(write_header(c, 0, 65536) + b"\xee" * 32768)
    expect_no_reply(c, 1)
    c.close()


@case("stream", "write-64m-cut",
      "a 64 MiB write over the head canary, 16 MiB sent, then a reset: "
      "nothing written")
def _(ctx):
    c = ctx.good()
    c.send(write_header(c, 0, MAX_PAYLOAD))
    chunk = b"\xee" * MiB
    for _ in range(16):
        c.send(chunk)
    c.reset()


@case("stream", "header-cut",
      "20 bytes of a request header, then close")
def _(ctx):
    c = ctx.good()
    c.send(write_header(c, 0, 512)[:20])
    c.s.shutdown(socket.SHUT_WR)
    expect(c.server_closes(), "no close after a cut header")
    c.close()


@case("stream", "complete-then-cut-write",
      "a complete write to scratch, then a cut write to the head canary, "
      "sent together: the first is answered and applied, the second not")
def _(ctx):
    c = ctx.good()
    data = random.Random(5).randbytes(4096)
    c.send(write_header(c, Ctx.SCRATCH, 4096, cookie=1) + data +
           write_header(c, 0, 4096, cookie=2) + b"\xee" * 2048)
    c.s.shutdown(socket.SHUT_WR)
    r = c.reply({1: Req(CMD_WRITE, Ctx.SCRATCH, 4096)})
    expect(r.cookie == 1 and r.error == 0, "complete write not answered")
    expect(c.server_closes(), "no close after the cut write")
    c.close()
    g = ctx.good()
    expect(g.read(Ctx.SCRATCH, 4096) == data, "complete write not applied")
    g.disc()


@case("stream", "oversized-write",
      "WRITE over the head canary above the 64 MiB limit: up to 128 MiB "
      "the payload is read and thrown away, the reply is ENOMEM and the "
      "connection goes on (as nbdkit); beyond (4 GiB-1, and 4 GiB+ with "
      "extended headers) the server hangs up without a reply (as "
      "nbdkit); nothing written")
def _(ctx):
    for mode, count in (("simple", MAX_PAYLOAD + 1),
                        ("structured", 2 * MAX_PAYLOAD)):
        c = ctx.good(mode)
        c.send(write_header(c, 0, count, cookie=3))
        chunk = b"\xee" * (4 * MiB)
        for i in range(0, count, len(chunk)):
            c.send(chunk[:count - i])
        r = c.reply(Req(CMD_WRITE, 0, count))
        expect_err(r.error, ENOMEM, "%s write of %d bytes" % (mode, count))
        expect(c.read(0, CANARY_LEN) == ctx.head,
               "%s: the connection does not go on after a write of %d "
               "bytes" % (mode, count))
        c.disc()
    for mode, count in (("simple", 2 * MAX_PAYLOAD + 1),
                        ("structured", 0xFFFFFFFF),
                        ("extended", (1 << 32) + 4096)):
        c = ctx.good(mode)
        c.send(write_header(c, 0, count, cookie=3))
        c.try_send(b"\xee" * MiB)
        # The rest of the payload is not read as requests: the server
        # ends the connection, and answers nothing.
        c.try_send(b"\xee" * MiB)
        try:
            r = c.reply(Req(CMD_WRITE, 0, count))
            raise CaseFailed("%s: a reply (error %s) to a write of %d bytes"
                             % (mode, err_name(r.error), count))
        except ServerClosed:
            pass
        c.close()


@case("stream", "max-size-write",
      "a WRITE of exactly 64 MiB (the limit) is accepted")
def _(ctx):
    c = ctx.good()
    data = random.Random(6).randbytes(MAX_PAYLOAD)
    c.write(Ctx.BIG, data)
    expect(c.read(Ctx.BIG, MAX_PAYLOAD) == data, "64 MiB read back wrong")
    c.disc()


@case("stream", "writes-of-many-sizes",
      "one write at a time of sizes from 1 byte to 4 MiB and 3 bytes, "
      "around the server's thresholds for reading a payload, each "
      "answered and read back")
def _(ctx):
    c = ctx.good()
    rnd = random.Random(7)
    off = Ctx.BIG
    for n in (1, 4095, 32767, 32768, 65535, 65536, 65537, 262151,
              512 * 1024 - 1, 512 * 1024, 512 * 1024 + 1,
              MiB - 1, MiB, MiB + 4097, 4 * MiB + 3):
        data = rnd.randbytes(n)
        c.write(off, data)
        expect(c.read(off, n) == data, "%d bytes at %d read back wrong",
               n, off)
        off += n + 511
    c.disc()


@case("stream", "write-payload-dripped",
      "a 3 MiB write whose payload comes 96 KiB at a time, 20 ms apart: "
      "answered once it is all in, and read back")
def _(ctx):
    c = ctx.good()
    data = random.Random(8).randbytes(3 * MiB)
    c.send(write_header(c, Ctx.BIG, len(data), cookie=9))
    step = 96 * 1024
    for i in range(0, len(data), step):
        c.send(data[i:i + step])
        time.sleep(0.02)
    r = c.reply({9: Req(CMD_WRITE, Ctx.BIG, len(data))})
    expect(r.error == 0, "the dripped write failed: error %d", r.error)
    expect(c.read(Ctx.BIG, len(data)) == data, "dripped write read back wrong")
    c.disc()


def pipeline(ctx, c, n, seed):
    """N mixed requests, correct and not; returns (bytes to send, pending
    map, expected results)."""
    rnd = random.Random(seed)
    out, pending, want = [], {}, {}
    for i in range(n):
        cookie = 1000 + i
        k = rnd.randrange(8)
        if k < 3:
            off = rnd.randrange(0, CANARY_LEN - 4096)
            req, payload = Req(CMD_READ, off, 4096), b""
            want[cookie] = (0, ctx.head[off:off + 4096])
        elif k < 5:
            off = Ctx.SCRATCH + rnd.randrange(0, 256) * 4096
            payload = bytes([i & 0xFF]) * 4096
            req = Req(CMD_WRITE, off, 4096)
            want[cookie] = (0, None)
        elif k == 5:
            req, payload = Req(CMD_FLUSH, 0, 0), b""
            want[cookie] = (0, None)
        elif k == 6:
            req, payload = Req(CMD_READ, ctx.size, 4096), b""
            want[cookie] = (EINVAL, None)
        else:
            req, payload = Req(CMD_WRITE, 0, 4096, 1 << 15), b"\xee" * 4096
            want[cookie] = (EINVAL, None)
        pending[cookie] = req
        out.append(c.header(req.typ, req.offset, req.count, req.flags,
                            cookie) + payload)
    return b"".join(out), pending, want


@case("stream", "pipelined-2000",
      "2000 mixed requests sent without waiting: every cookie answered "
      "once, with the right error and data")
def _(ctx):
    for mode in MODES:
        c = ctx.good(mode)
        c.s.settimeout(15)
        data, pending, want = pipeline(ctx, c, 2000, 7)
        sender_err = []

        def send():
            try:
                c.s.sendall(data)
            except OSError as e:
                sender_err.append(e)
        t = threading.Thread(target=send)
        t.start()
        seen = set()
        try:
            for _ in range(2000):
                r = c.reply(pending)
                expect(r.cookie not in seen, "cookie %d answered twice",
                       r.cookie)
                seen.add(r.cookie)
                err, d = want[r.cookie]
                expect_err(r.error, err, "%s pipelined %s (cookie %d)" % (
                    mode, CMD_NAMES[pending[r.cookie].typ], r.cookie))
                expect(d is None or r.data == d, "cookie %d: wrong data",
                       r.cookie)
        finally:
            t.join(20)
        expect(not sender_err, "sending failed: %s", sender_err)
        c.disc()


@case("stream", "pipelined-2000-then-reset",
      "2000 requests (reads, writes to scratch, bad writes to the canary) "
      "sent without reading a reply, then a reset")
def _(ctx):
    c = ctx.good()
    data, _, _ = pipeline(ctx, c, 2000, 8)
    # Replies pile up unread, so the server stops reading requests: send
    # what goes in a second.
    c.s.settimeout(1)
    c.try_send(data)
    c.reset()


@case("stream", "unread-replies-then-close",
      "eight 64 MiB reads, then the client goes without reading a byte "
      "(closed, then reset)")
def _(ctx):
    for how in ("close", "reset"):
        c = ctx.good()
        c.send(b"".join(c.header(CMD_READ, 0, MAX_PAYLOAD, 0, i)
                        for i in range(8)))
        time.sleep(0.2)
        c.close() if how == "close" else c.reset()


def read_whole_chunk(c, buf):
    """A structured reply of one chunk of data (OFFSET_DATA, DONE) into
    BUF, without the copies of Conn.reply: (cookie, its payload)."""
    magic, flags, typ, cookie, length = struct.unpack(
        ">IHHQI", c.recv_exact(20))
    expect(magic == STRUCTURED_MAGIC and typ == RT_DATA and
           flags & REPLY_DONE and length <= len(buf),
           "not one whole data chunk (magic 0x%x, type %d, length %d)",
           magic, typ, length)
    view = memoryview(buf)[:length]
    got = 0
    while got < length:
        n = c.s.recv_into(view[got:])
        if n == 0:
            raise ServerClosed("end of file in a data chunk")
        got += n
    return cookie, view


def server_rss(pid):
    """The server's resident memory in bytes."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise CaseFailed("no VmRSS for pid %d" % pid)


@case("stream", "unread-large-reads-bounded",
      "two bursts of sixteen 64 MiB reads, each left unread for 1 s, then "
      "read: all are answered right, and meanwhile the server's memory "
      "grows by at most the 512 MiB a connection's requests may hold "
      "(plus 96 MiB), not by the 1 GiB sixteen workers would; once "
      "answered, the memory goes back")
def _(ctx):
    c = ctx.good("structured")
    c.s.settimeout(20)
    buf = bytearray(MAX_PAYLOAD + 8)
    base = server_rss(ctx.pid)
    peak = [base]
    done = threading.Event()

    def sample():
        while not done.wait(0.02):
            peak[0] = max(peak[0], server_rss(ctx.pid))
    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        n = 16
        for burst in range(2):
            cookies = range(100 * burst, 100 * burst + n)
            c.send(b"".join(c.header(CMD_READ, 0, MAX_PAYLOAD, 0, k)
                            for k in cookies))
            time.sleep(1)
            left = set(cookies)
            for _ in range(n):
                cookie, data = read_whole_chunk(c, buf)
                expect(cookie in left, "unexpected reply (cookie %d)", cookie)
                left.discard(cookie)
                expect(data[8:8 + CANARY_LEN] == ctx.head,
                       "64 MiB read is wrong")
    finally:
        done.set()
        sampler.join()
    expect(peak[0] - base <= 608 * MiB,
           "the server grew by %d MiB for 64 MiB reads in flight",
           (peak[0] - base) // MiB)
    c.disc()
    after = base
    for _ in range(20):         # the workers give their buffers back
        after = server_rss(ctx.pid)
        if after - base <= 64 * MiB:
            break
        time.sleep(0.1)
    expect(after - base <= 64 * MiB, "the server still holds %d MiB after "
           "the reads were answered", (after - base) // MiB)


@case("stream", "unread-reads-while-others-trim",
      "sixteen 1 MiB reads left unanswered on the wire (the socket "
      "fills), while a second client trims, zeroes, writes and reads the "
      "same region: the stalled reader must hold nothing the others need")
def _(ctx):
    base = ctx.SCRATCH
    stalled = ctx.good()
    stalled.write(base, random.Random(3).randbytes(MiB))
    stalled.send(b"".join(stalled.header(CMD_READ, base, MiB, 0, i)
                          for i in range(16)))
    time.sleep(0.5)             # the server is now blocked on this socket
    other = ctx.good()
    start = time.monotonic()
    r = other.cmd(CMD_TRIM, base, MiB)
    expect_err(r.error, 0, "trim")
    r = other.zero_or_write(base, MiB)
    expect_err(r.error, 0, "zero")
    data = random.Random(4).randbytes(MiB)
    other.write(base, data)
    expect(other.read(base, MiB) == data, "read back after trim and zero")
    expect(time.monotonic() - start < 3,
           "trim, zero, write and read took %.1f s beside a stalled reader",
           time.monotonic() - start)
    other.disc()
    stalled.reset()


@case("stream", "stalled-write-payload-while-others-trim",
      "1 MiB writes whose payload stops half way for 0.5 s, over a hole "
      "(the memory plugin lends new pages for it) and over data, while a "
      "second client trims, zeroes, writes and reads the same region: the "
      "stalled writer must hold nothing the others need; then the rest "
      "arrives and its whole payload lands over the other's data")
def _(ctx):
    base = ctx.SCRATCH
    off = base + 1000           # partial pages at both ends
    for over_data in (False, True):
        other = ctx.good()
        r = other.cmd(CMD_TRIM, base, 2 * MiB)
        expect_err(r.error, 0, "trim")
        if over_data:
            other.write(base, random.Random(10).randbytes(2 * MiB))
        payload = random.Random(11).randbytes(MiB)
        stalled = ctx.good()
        stalled.send(write_header(stalled, off, MiB, cookie=5) +
                     payload[:MiB // 2])
        expect_no_reply(stalled, 0.5)
        start = time.monotonic()
        r = other.cmd(CMD_TRIM, base, 2 * MiB)
        expect_err(r.error, 0, "trim")
        r = other.zero_or_write(base, 2 * MiB)
        expect_err(r.error, 0, "zero")
        expect(other.read(base, 2 * MiB) == bytes(2 * MiB),
               "read back after trim and zero")
        data = random.Random(12).randbytes(2 * MiB)
        other.write(base, data)
        expect(other.read(base, 2 * MiB) == data, "read back after write")
        took = time.monotonic() - start
        expect(took < 3, "trim, zero, write and read took %.1f s beside a "
               "stalled writer", took)
        # The rest of the payload: the write succeeds, and all of it is
        # there, over the other client's data.
        stalled.send(payload[MiB // 2:])
        r = stalled.reply({5: Req(CMD_WRITE, off, MiB)})
        expect(r.cookie == 5, "reply cookie %d, expected 5", r.cookie)
        expect_err(r.error, 0, "the stalled write, completed")
        want = data[:1000] + payload + data[1000 + MiB:]
        for c, who in ((stalled, "the writer"), (other, "the other client")):
            got = c.read(base, 2 * MiB)
            if got != want:
                bad = next(i for i in range(2 * MiB) if got[i] != want[i])
                raise CaseFailed("%s reads byte %d of the region wrong "
                                 "(offset %d from the write; over %s)"
                                 % (who, bad, bad - 1000,
                                    "data" if over_data else "a hole"))
        stalled.disc()
        other.disc()


@case("stream", "write-payload-reset-midway",
      "1 MiB writes reset after 300 KiB of their payload, over a hole "
      "(into pages the memory plugin lends) and over data: nothing of "
      "them lands, and another client then writes and reads the region "
      "back correctly")
def _(ctx):
    base = ctx.SCRATCH + 2 * MiB
    off = base + 64 * 1024 + 517
    sent = 300 * 1024
    payload = random.Random(14).randbytes(MiB)
    for over_data in (False, True):
        other = ctx.good()
        r = other.cmd(CMD_TRIM, base, 2 * MiB)
        expect_err(r.error, 0, "trim")
        before = bytes(2 * MiB)
        if over_data:
            before = random.Random(13).randbytes(2 * MiB)
            other.write(base, before)
        c = ctx.good()
        c.send(write_header(c, off, MiB, cookie=9) + payload[:sent])
        time.sleep(0.2)
        c.reset()
        time.sleep(0.1)
        got = other.read(base, 2 * MiB)
        if got != before:
            bad = next(i for i in range(2 * MiB) if got[i] != before[i])
            raise CaseFailed("byte %d of the region (%d from the write, "
                             "over %s) changed by a write never completed"
                             % (bad, bad - (off - base),
                                "data" if over_data else "a hole"))
        data = random.Random(15).randbytes(2 * MiB)
        other.write(base, data)
        expect(other.read(base, 2 * MiB) == data, "read back after the reset")
        # Nothing of the reset write lands late.
        time.sleep(0.2)
        g = ctx.good()
        expect(g.read(base, 2 * MiB) == data, "a new client reads the "
               "region back wrong")
        g.write(off, payload)
        expect(g.read(off, MiB) == payload, "the reset write, made whole "
               "by another client, reads back wrong")
        g.disc()
        other.disc()


@case("stream", "reset-at-once",
      "50 clients that connect and reset at once, before or after the "
      "greeting, or after GO")
def _(ctx):
    for i in range(50):
        c = ctx.conn()
        if i % 3 == 1:
            c.greeting()
        elif i % 3 == 2:
            c.open()
        c.reset()


@case("stream", "pipelined-then-half-close",
      "100 reads, then the client shuts its sending side: all 100 "
      "answered, then the server closes")
def _(ctx):
    c = ctx.good()
    pending = {}
    out = []
    for i in range(100):
        off = i * 4096
        pending[i] = Req(CMD_READ, off, 4096)
        out.append(c.header(CMD_READ, off, 4096, 0, i))
    c.send(b"".join(out))
    c.s.shutdown(socket.SHUT_WR)
    seen = set()
    for _ in range(100):
        r = c.reply(pending)
        expect(r.error == 0 and r.data == ctx.head[r.cookie * 4096:
                                                   (r.cookie + 1) * 4096],
               "read %d wrong after half-close", r.cookie)
        seen.add(r.cookie)
    expect(len(seen) == 100, "only %d reads answered", len(seen))
    expect(c.server_closes(), "no close after the client's EOF")
    c.close()


@case("stream", "disc-with-fields-then-data",
      "a write, then DISC with flags, offset and length set, then a write "
      "to the head canary: the first write is answered, the DISC ends the "
      "connection, the last write is ignored")
def _(ctx):
    c = ctx.good()
    data = random.Random(9).randbytes(4096)
    c.send(write_header(c, Ctx.SCRATCH + 8192, 4096, cookie=1) + data +
           c.header(CMD_DISC, 0xFFFFFFFF, 0x1234, 0xFFFF, 2) +
           write_header(c, 0, 4096, cookie=3) + b"\xee" * 4096 +
           b"more junk after the disconnect")
    r = c.reply({1: Req(CMD_WRITE, 0, 4096)})
    expect(r.cookie == 1 and r.error == 0, "write before DISC: cookie %d "
           "error %s", r.cookie, err_name(r.error))
    expect(c.server_closes(limit=0), "something after DISC was answered, "
           "or the connection stayed open")
    c.close()
    g = ctx.good()
    expect(g.read(Ctx.SCRATCH + 8192, 4096) == data,
           "the write before DISC was not applied")
    g.disc()


@case("stream", "duplicate-cookies",
      "four writes and four reads pipelined with one cookie (and cookies "
      "0 and 2^64-1): eight answers, all with that cookie")
def _(ctx):
    for cookie in (42, 0, (1 << 64) - 1):
        c = ctx.good("structured")
        blocks = [random.Random(cookie + i).randbytes(4096)
                  for i in range(4)]
        out = b""
        for i, b in enumerate(blocks):
            out += write_header(c, Ctx.SCRATCH + i * 4096, 4096, cookie) + b
        c.send(out)
        for _ in range(4):
            r = c.reply({cookie: Req(CMD_WRITE, 0, 4096)})
            expect(r.cookie == cookie and r.error == 0, "duplicate-cookie "
                   "write: cookie %d error %s", r.cookie, err_name(r.error))
        out = b"".join(c.header(CMD_READ, Ctx.SCRATCH + i * 4096, 4096, 0,
                                cookie) for i in range(4))
        c.send(out)
        # The replies cannot be told apart by cookie, only by the offset
        # in their data chunk.
        seen = set()
        for _ in range(4):
            r = c.reply({cookie: Req(CMD_READ, Ctx.SCRATCH, 4 * 4096)})
            expect(r.cookie == cookie and r.error == 0, "duplicate-cookie "
                   "read: error %s", err_name(r.error))
            for typ, payload in r.chunks:
                if typ != RT_DATA:
                    continue
                i = (struct.unpack(">Q", payload[:8])[0] - Ctx.SCRATCH) // 4096
                expect(0 <= i < 4 and payload[8:] == blocks[i],
                       "duplicate-cookie read returned the wrong data")
                seen.add(i)
        expect(seen == {0, 1, 2, 3}, "reads answered: %s", sorted(seen))
        c.disc()


@case("stream", "bad-magic-after-good",
      "a read and then a request with a bad magic: the read is answered, "
      "then the connection is closed")
def _(ctx):
    c = ctx.good()
    c.send(c.header(CMD_READ, 0, 4096, 0, 1) +
           struct.pack(">IHHQQI", 0xDEADBEEF, 0, CMD_WRITE, 2, 0, 4096) +
           b"\xee" * 4096)
    r = c.reply(Req(CMD_READ, 0, 4096))
    expect(r.error == 0 and r.data == ctx.head[:4096], "read before the "
           "bad magic")
    expect(c.server_closes(limit=0), "bad magic did not end the connection")
    c.close()


@case("stream", "extended-request-without-negotiation",
      "a 32-byte extended request on a compact connection: closed")
def _(ctx):
    c = ctx.good()
    c.send(struct.pack(">IHHQQQ", EXT_REQ_MAGIC, 0, CMD_WRITE, 1, 0, 4096)
           + b"\xee" * 4096)
    expect(c.server_closes(limit=0), "extended request accepted")
    c.close()


# ---- connections: many, slow, limited ----

def proc_count(pid):
    with open("/proc/%d/status" % pid) as f:
        threads = next(int(l.split()[1]) for l in f
                       if l.startswith("Threads:"))
    return threads, len(os.listdir("/proc/%d/fd" % pid))


def wait_for_counts(ctx, base, secs=10):
    deadline = time.monotonic() + secs
    while True:
        now = proc_count(ctx.pid)
        if now[0] <= base[0] and now[1] <= base[1]:
            return
        if time.monotonic() > deadline:
            raise CaseFailed("threads/fds did not return to %s, still %s"
                             % (base, now))
        time.sleep(0.1)


def timed_good_client(ctx, limit):
    t0 = time.monotonic()
    c = ctx.good()
    data = random.Random(10).randbytes(65536)
    c.write(Ctx.SCRATCH, data)
    expect(c.read(Ctx.SCRATCH, 65536) == data, "good client read back")
    expect(c.read(0, CANARY_LEN) == ctx.head, "good client: head canary")
    c.disc()
    took = time.monotonic() - t0
    expect(took < limit, "good client took %.1f s", took)
    return took


@case("connections", "idle-1000",
      "1000 idle connections (silent, after flags, after GO) while a good "
      "client is served; afterwards threads and fds go back down")
def _(ctx):
    base = proc_count(ctx.pid)
    conns = []
    try:
        for i in range(1000):
            c = ctx.conn(timeout=10)
            conns.append(c)
            if i % 3 == 1:
                c.greet()
            elif i % 3 == 2:
                c.open()
        took = timed_good_client(ctx, 5)
        print("    good client served in %.2f s with %d idle connections"
              % (took, len(conns)))
        # The idle connections are still served too.
        opened = [c for i, c in enumerate(conns) if i % 3 == 2]
        for c in (opened[0], opened[-1]):
            expect(c.read(0, 512) == ctx.head[:512], "an idle connection "
                   "stopped working")
    finally:
        for c in conns:
            c.close()
    wait_for_counts(ctx, base)


@case("connections", "connection-limit",
      "40 connections at once on a server limited to --max-connections N: "
      "at most N greeted, the rest closed at once; served again after")
def _(ctx):
    limit = ctx.args.max_connections
    expect(limit and limit < 40, "needs --max-connections below 40")
    conns = [ctx.conn() for _ in range(40)]
    greeted = closed = 0
    for c in conns:
        try:
            c.greeting()
            greeted += 1
        except ServerClosed:
            closed += 1
    for c in conns:
        c.close()
    print("    %d greeted, %d refused" % (greeted, closed))
    expect(1 <= greeted <= limit, "%d connections served, limit %d",
           greeted, limit)
    expect(greeted + closed == 40, "some connections got no answer")


def drip(ctx, stream, secs_expected, result):
    """Send STREAM one byte every 100 ms; record when the server hangs
    up (or None after 3x the expected time)."""
    c = ctx.conn()
    t0 = time.monotonic()
    try:
        c.greeting()
        for b in stream:
            if time.monotonic() - t0 > 3 * secs_expected + 2:
                break
            if not c.try_send(bytes([b])):
                result.append(time.monotonic() - t0)
                return
            c.s.settimeout(0.1)
            try:
                while True:
                    d = c.s.recv(4096)
                    if not d:
                        result.append(time.monotonic() - t0)
                        return
            except socket.timeout:
                pass
            except ConnectionResetError:
                result.append(time.monotonic() - t0)
                return
        result.append(None)
    finally:
        c.close()


@case("connections", "drip-feed",
      "clients sending one byte every 100 ms (a never-finished option; "
      "valid options that each get answered) are dropped at the handshake "
      "timeout, while a good client is served")
def _(ctx):
    limit = ctx.args.handshake_timeout
    expect(limit, "needs --handshake-timeout")
    flags = struct.pack(">I", C_FIXED | C_NO_ZEROES)
    streams = [
        flags + struct.pack(">QII", IHAVEOPT, OPT_INFO, 1000) + b"\0" * 1000,
        flags + struct.pack(">QII", IHAVEOPT, 0x4242, 0) * 200,
    ]
    results = [[] for _ in streams]
    threads = [threading.Thread(target=drip, args=(ctx, s, limit, r))
               for s, r in zip(streams, results)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    try:
        timed_good_client(ctx, 2)
    finally:
        for t in threads:
            t.join(3 * limit + 10)
    for i, r in enumerate(results):
        expect(r and r[0] is not None, "drip %d: never dropped", i)
        expect(limit * 0.8 <= r[0] < limit + 4, "drip %d: dropped after "
               "%.1f s, timeout %d s", i, r[0], limit)
        print("    drip %d dropped after %.1f s" % (i, r[0]))


@case("connections", "fd-exhaustion",
      "more connections than the server has file descriptors: it does not "
      "spin on accept, and serves again once they close")
def _(ctx):
    def cpu():
        with open("/proc/%d/stat" % ctx.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    limit = ctx.args.fd_limit
    expect(limit, "needs --fd-limit")
    resource.prlimit(ctx.pid, resource.RLIMIT_NOFILE, (limit, limit))
    conns = []
    try:
        for _ in range(ctx.args.fd_flood):
            try:
                conns.append(ctx.conn())
            except OSError:
                break
        time.sleep(0.5)
        c0 = cpu()
        time.sleep(2)
        used = cpu() - c0
        print("    server used %.2f s of CPU in 2 s with %d connections "
              "pending" % (used, len(conns)))
        expect(used < 0.5, "the server spins while out of file descriptors "
               "(%.2f s of CPU in 2 s)", used)
    finally:
        for c in conns:
            c.close()
    # Connections still queued in the backlog are accepted and dropped
    # as they close; then a good client is served.
    deadline = time.monotonic() + 10
    while True:
        try:
            timed_good_client(ctx, 5)
            break
        except (CaseFailed, ServerClosed, OSError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


# --- Running ----------------------------------------------------------------

def on_alarm(signum, frame):
    raise CaseFailed("the case took more than %d s" % CASE_LIMIT)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("socket", metavar="ADDRESS")
    p.add_argument("pid", type=int)
    p.add_argument("group", choices=sorted(CASES))
    p.add_argument("--case", action="append", default=[],
                   help="run only this case (repeatable)")
    p.add_argument("--list", action="store_true")
    p.add_argument("--max-connections", type=int, default=0)
    p.add_argument("--handshake-timeout", type=int, default=0)
    p.add_argument("--fd-flood", type=int, default=200)
    p.add_argument("--fd-limit", type=int, default=0)
    args = p.parse_args()

    cases = CASES[args.group]
    if args.case:
        names = {n for n, _, _ in cases}
        for n in args.case:
            if n not in names:
                p.error("no case %s in group %s" % (n, args.group))
        cases = [c for c in cases if c[0] in args.case]
    if args.list:
        for name, _, doc in cases:
            print("%-40s %s" % (name, doc))
        return 0

    ctx = Ctx(args)
    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(CASE_LIMIT)
    try:
        write_canaries(ctx)
    except (CaseFailed, ServerClosed, OSError) as e:
        print("FAIL setup: could not write the canaries: %s" % e)
        return 1
    finally:
        signal.alarm(0)

    failed = 0
    t_all = time.monotonic()
    for name, fn, doc in cases:
        t0 = time.monotonic()
        msg = None
        signal.alarm(CASE_LIMIT)
        try:
            fn(ctx)
        except CaseFailed as e:
            msg = str(e)
        except ServerClosed as e:
            msg = "the server closed the connection unexpectedly: %s" % e
        except OSError as e:
            msg = "socket error: %s" % e
        finally:
            signal.alarm(0)
        if msg is None:
            if not server_alive(ctx.pid):
                msg = "the server (pid %d) is gone" % ctx.pid
            else:
                signal.alarm(CASE_LIMIT)
                try:
                    check_canaries(ctx)
                except (CaseFailed, ServerClosed, OSError) as e:
                    msg = "after the case: %s" % e
                finally:
                    signal.alarm(0)
        took = time.monotonic() - t0
        if msg is None:
            print("ok   %s/%s (%.2f s): %s" % (args.group, name, took, doc))
        else:
            failed += 1
            print("FAIL %s/%s (%.2f s): %s\n     -> %s"
                  % (args.group, name, took, doc, msg))
            if not server_alive(ctx.pid):
                print("FAIL the server (pid %d) died; stopping" % ctx.pid)
                break
        sys.stdout.flush()
    print("%s: %d of %d cases failed (%.1f s)"
          % (args.group, failed, len(cases), time.monotonic() - t_all))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
