#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# fuzzing/replay.py SOCKET RO_SOCKET FILE...: replay fuzz inputs against a
# running server, without the fuzzer (stdlib only).  Each FILE is one
# connection: a file named transmission-* is a fuzz-transmission input
# (its first byte picks the handshake, see nbdwire.py; it goes to
# RO_SOCKET, a server started with -r, if that byte asks for read-only),
# any other file is sent as it is.  After each input the server must
# have closed that connection within the time limit and must still
# serve a fresh client (GO, a read, NBD_CMD_DISC).  Exits 1 otherwise.
import os
import select
import socket
import struct
import sys
import time

sys.dont_write_bytecode = True   # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nbdwire  # noqa: E402

LIMIT = 30          # seconds for one input's connection to end


def fail(msg):
    print("replay.py: FAIL: %s" % msg, file=sys.stderr)
    sys.exit(1)


def converse(path, stream):
    """Send STREAM, then read until the server closes.  Returns the
    number of bytes the server sent."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.setblocking(False)
    deadline = time.monotonic() + LIMIT
    sent, received, writing = 0, 0, True
    if not stream:
        s.shutdown(socket.SHUT_WR)
        writing = False
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            fail("the server did not close the connection within %ds "
                 "(%d of %d bytes sent)" % (LIMIT, sent, len(stream)))
        r, w, _ = select.select([s], [s] if writing else [], [], left)
        if w:
            try:
                sent += s.send(stream[sent:sent + 65536])
            except (BrokenPipeError, ConnectionResetError):
                writing = False
            if writing and sent == len(stream):
                s.shutdown(socket.SHUT_WR)
                writing = False
        if r:
            try:
                data = s.recv(1 << 20)
            except ConnectionResetError:
                data = b""
            if not data:
                break
            received += len(data)
    s.close()
    return received


def recv_exactly(s, n):
    buf = b""
    while len(buf) < n:
        data = s.recv(n - len(buf))
        if not data:
            fail("the server closed a healthy client's connection")
        buf += data
    return buf


def health_check(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(LIMIT)
    s.connect(path)
    recv_exactly(s, 18)                          # greeting
    s.sendall(nbdwire.client_flags() + nbdwire.info_go(nbdwire.OPT_GO))
    for _ in range(16):
        _, _, reply, length = struct.unpack(">QIII", recv_exactly(s, 20))
        recv_exactly(s, length)
        if reply == 1:
            break
        if reply & 0x80000000:
            fail("NBD_OPT_GO refused on a fresh connection")
    else:
        fail("no ACK to NBD_OPT_GO on a fresh connection")
    s.sendall(nbdwire.request(nbdwire.CMD_READ, 0, 512, cookie=77))
    _, error, cookie = struct.unpack(">IIQ", recv_exactly(s, 16))
    if error or cookie != 77:
        fail("a fresh client's read failed (error %d)" % error)
    recv_exactly(s, 512)
    s.sendall(nbdwire.request(nbdwire.CMD_DISC, cookie=78))
    s.close()


def main():
    if len(sys.argv) < 3:
        print("usage: replay.py SOCKET RO_SOCKET FILE...", file=sys.stderr)
        sys.exit(2)
    sock, ro_sock = sys.argv[1], sys.argv[2]
    for name in sys.argv[3:]:
        with open(name, "rb") as f:
            data = f.read()
        path = sock
        if os.path.basename(name).startswith("transmission-") and data:
            prefix, _, readonly = nbdwire.transmission_prefix(data[0])
            data = prefix + data[1:]
            if readonly:
                path = ro_sock
        n = converse(path, data)
        health_check(path)
        print("replay.py: %s: %d bytes in, %d out; server alive"
              % (os.path.basename(name), len(data), n))


main()
