# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tests/nbd_raw.py: the pieces of NBD's fixed newstyle negotiation that
# the raw test clients (tls-raw-client.py, tls-trickle-client.py)
# share.  A reply that breaks the protocol raises Surprise.
import struct

NBD_OPTS_MAGIC = 0x49484156454F5054
REP_MAGIC = 0x3E889045565A9


class Surprise(Exception):
    pass


def recv_exact(s, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError("server closed after %d of %d bytes" % (len(buf), n))
        buf += chunk
    return bytes(buf)


def greet(s):
    """Read the server's greeting on S and answer it."""
    magic, opts, flags = struct.unpack(">QQH", recv_exact(s, 18))
    if magic != 0x4E42444D41474943 or opts != NBD_OPTS_MAGIC:
        raise Surprise("bad greeting")
    s.sendall(struct.pack(">I", 3))      # FIXED_NEWSTYLE | NO_ZEROES


def option(s, opt, data=b""):
    s.sendall(struct.pack(">QII", NBD_OPTS_MAGIC, opt, len(data)) + data)


def reply(s):
    """One option reply: (option, reply type, data)."""
    magic, opt, rtype, length = struct.unpack(">QIII", recv_exact(s, 20))
    if magic != REP_MAGIC:
        raise Surprise("bad option reply magic")
    return opt, rtype, recv_exact(s, length)


def go(s, name=b""):
    """NBD_OPT_GO for export NAME, through its NBD_REP_INFO replies."""
    option(s, 7, struct.pack(">I", len(name)) + name + b"\0\0")
    while True:
        _, rtype, _ = reply(s)
        if rtype == 1:                  # NBD_REP_ACK
            return
        if rtype != 3:                  # NBD_REP_INFO
            raise Surprise("GO failed: 0x%x" % rtype)
