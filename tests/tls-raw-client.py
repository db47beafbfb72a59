#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tests/tls-raw-client.py SOCKET CERTDIR CASE: drive the server's
# STARTTLS by hand (Python's standard library only: socket and ssl with
# X.509) to check what libnbd cannot ask for.  Prints what it checked;
# exits non-zero with a message on the first surprise.
import socket
import ssl
import struct
import sys
import time

import nbd_raw
from nbd_raw import NBD_OPTS_MAGIC, go, option, recv_exact, reply

OPT_EXPORT_NAME, OPT_ABORT, OPT_LIST, OPT_STARTTLS = 1, 2, 3, 5
OPT_INFO, OPT_GO, OPT_STRUCTURED_REPLY = 6, 7, 8
REP_ACK, REP_SERVER, REP_INFO = 1, 2, 3
ERR_POLICY, ERR_INVALID, ERR_TLS_REQD = 0x80000002, 0x80000003, 0x80000005

sockpath, certdir, case = sys.argv[1], sys.argv[2], sys.argv[3]


def fail(msg):
    print("FAIL:", case + ":", msg)
    sys.exit(1)


def greet():
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(sockpath)
    nbd_raw.greet(s)
    return s


def expect(s, opt, want):
    got_opt, rtype, data = reply(s)
    if got_opt != opt or rtype != want:
        fail("option %d: reply 0x%x (%r), wanted 0x%x" %
             (opt, rtype, data[:80], want))
    return data


def closed(s):
    try:
        return s.recv(1) == b""
    except (ConnectionResetError, ssl.SSLError):
        return True


def starttls(s):
    option(s, OPT_STARTTLS)
    expect(s, OPT_STARTTLS, REP_ACK)
    ctx = ssl.create_default_context(cafile=certdir + "/ca-cert.pem")
    ctx.load_cert_chain(certdir + "/client-cert.pem",
                        certdir + "/client-key.pem")
    return ctx.wrap_socket(s, server_hostname="localhost")


def read_reply_kind(s):
    """Send one 512-byte read; say whether the reply is simple or
    structured."""
    s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 0, 0xabc, 0, 512))
    magic = struct.unpack(">I", recv_exact(s, 4))[0]
    if magic == 0x67446698:
        return "simple"
    if magic == 0x668e33ef:
        return "structured"
    fail("unknown reply magic 0x%x" % magic)


if case == "require-refuses-clear":
    # Every option but STARTTLS and ABORT: NBD_REP_ERR_TLS_REQD.
    s = greet()
    for opt, data in [(OPT_LIST, b""), (OPT_STRUCTURED_REPLY, b""),
                      (OPT_INFO, b"\0\0\0\0\0\0"), (OPT_GO, b"\0\0\0\0\0\0"),
                      (99, b"xyz")]:
        option(s, opt, data)
        expect(s, opt, ERR_TLS_REQD)
    # Then TLS works on the same connection, and so does the export.
    t = starttls(s)
    go(t)
    if read_reply_kind(t) != "simple":
        fail("reply kind")
    print("options refused in the clear, then served over TLS")
    # EXPORT_NAME in the clear has no error reply: the server hangs up.
    s = greet()
    option(s, OPT_EXPORT_NAME, b"")
    if not closed(s):
        fail("EXPORT_NAME in the clear did not end the connection")
    print("EXPORT_NAME in the clear: connection closed")

elif case == "state-reset":
    # Structured replies negotiated in the clear must not survive
    # STARTTLS (a man in the middle could have asked for them).
    s = greet()
    option(s, OPT_STRUCTURED_REPLY)
    expect(s, OPT_STRUCTURED_REPLY, REP_ACK)
    t = starttls(s)
    go(t)
    kind = read_reply_kind(t)
    if kind != "simple":
        fail("structured replies from before STARTTLS survived it")
    print("structured replies dropped at STARTTLS")
    # Asked again inside TLS, they are granted afresh (not "already").
    s = greet()
    option(s, OPT_STRUCTURED_REPLY)
    expect(s, OPT_STRUCTURED_REPLY, REP_ACK)
    t = starttls(s)
    option(t, OPT_STRUCTURED_REPLY)
    expect(t, OPT_STRUCTURED_REPLY, REP_ACK)
    go(t)
    if read_reply_kind(t) != "structured":
        fail("structured replies negotiated inside TLS not used")
    print("structured replies negotiated inside TLS are used")
    # STARTTLS twice: refused inside TLS.
    s = greet()
    t = starttls(s)
    option(t, OPT_STARTTLS)
    expect(t, OPT_STARTTLS, ERR_INVALID)
    go(t)
    read_reply_kind(t)
    print("a second STARTTLS is refused")

elif case == "data-after-starttls":
    # Plaintext sent right behind STARTTLS, before the server's ACK,
    # must never be read as if it came through TLS.
    s = greet()
    s.sendall(struct.pack(">QII", NBD_OPTS_MAGIC, OPT_STARTTLS, 0) +
              struct.pack(">QII", NBD_OPTS_MAGIC, OPT_LIST, 0))
    expect(s, OPT_STARTTLS, REP_ACK)
    if not closed(s):
        fail("bytes injected after STARTTLS did not end the connection")
    print("bytes injected after STARTTLS: connection closed")

elif case == "silent-after-starttls":
    # A client that asks for TLS and then says nothing is dropped by
    # the handshake timeout (the test runs the server with 2 s).
    s = greet()
    option(s, OPT_STARTTLS)
    expect(s, OPT_STARTTLS, REP_ACK)
    start = time.time()
    s.settimeout(15)
    if not closed(s):
        fail("silent TLS client not dropped")
    took = time.time() - start
    if took > 8:
        fail("dropped only after %.1f s" % took)
    print("silent client dropped after %.1f s" % took)

elif case == "garbage-hello":
    # Not TLS at all after STARTTLS: the handshake fails, the
    # connection closes, nothing else is affected.
    s = greet()
    option(s, OPT_STARTTLS)
    expect(s, OPT_STARTTLS, REP_ACK)
    s.sendall(b"GET / HTTP/1.0\r\n\r\n" + bytes(range(256)) * 4)
    if not closed(s):
        fail("garbage instead of a TLS hello did not end the connection")
    print("garbage instead of a TLS hello: connection closed")

elif case == "drip-hello":
    # A TLS record header promising 512 bytes, then one byte every
    # 100 ms: the handshake deadline (2 s in the test) still applies.
    s = greet()
    option(s, OPT_STARTTLS)
    expect(s, OPT_STARTTLS, REP_ACK)
    s.sendall(b"\x16\x03\x01\x02\x00")
    start = time.time()
    dropped = False
    for i in range(150):
        try:
            s.sendall(b"\x01")
        except (BrokenPipeError, ConnectionResetError):
            dropped = True
            break
        time.sleep(0.1)
    took = time.time() - start
    if not dropped and not closed(s):
        fail("dripping client not dropped")
    if took > 8:
        fail("dripping client dropped only after %.1f s" % took)
    print("dripping TLS client dropped after %.1f s" % took)

elif case == "on-allows-clear":
    # --tls=on: the same options work in the clear, and TLS too.
    s = greet()
    option(s, OPT_LIST)
    names = []
    while True:
        _, rtype, data = reply(s)
        if rtype == REP_ACK:
            break
        names.append(data[4:4 + struct.unpack(">I", data[:4])[0]])
    if names != [b"plain"]:
        fail("clear LIST gave %r" % names)
    t = starttls(s)
    option(t, OPT_LIST)
    names = []
    while True:
        _, rtype, data = reply(t)
        if rtype == REP_ACK:
            break
        names.append(data[4:4 + struct.unpack(">I", data[:4])[0]])
    if names != [b"secure"]:
        fail("LIST inside TLS gave %r" % names)
    print("exports: %r in the clear, %r over TLS" % ([b"plain"], names))

elif case == "off-refuses-starttls":
    s = greet()
    option(s, OPT_STARTTLS)
    expect(s, OPT_STARTTLS, ERR_POLICY)
    go(s)
    read_reply_kind(s)
    print("STARTTLS refused with ERR_POLICY; the connection goes on")

else:
    fail("unknown case")
