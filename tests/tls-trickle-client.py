#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tests/tls-trickle-client.py PORT CERTDIR: over TLS on 127.0.0.1
# (X.509, Python's ssl), write payloads of awkward sizes whose last
# bytes come late, in small records, and read each back.  A server that
# waited for more bytes than the client owes would not reply within the
# socket's timeout.  Prints each case; exits non-zero on the first
# surprise.
import socket
import ssl
import struct
import sys
import time

import nbd_raw
from nbd_raw import option, recv_exact, reply

port, certdir = int(sys.argv[1]), sys.argv[2]
OPT_STARTTLS, REP_ACK = 5, 1
REQ_MAGIC, SIMPLE_REPLY = 0x25609513, 0x67446698
CMD_READ, CMD_WRITE = 0, 1


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


s = socket.create_connection(("127.0.0.1", port), timeout=20)
nbd_raw.greet(s)
option(s, OPT_STARTTLS)
if reply(s)[1] != REP_ACK:
    fail("STARTTLS refused")
ctx = ssl.create_default_context(cafile=certdir + "/ca-cert.pem")
ctx.load_cert_chain(certdir + "/client-cert.pem", certdir + "/client-key.pem")
t = ctx.wrap_socket(s, server_hostname="localhost")
nbd_raw.go(t)

handle = 0


def request(cmd, off, length):
    global handle
    handle += 1
    return struct.pack(">IHHQQI", REQ_MAGIC, 0, cmd, handle, off, length)


def simple_reply(what):
    magic, err, h = struct.unpack(">IIQ", recv_exact(t, 16))
    if magic != SIMPLE_REPLY or h != handle or err != 0:
        fail("%s: reply magic 0x%x error %d handle %d (wanted %d)" %
             (what, magic, err, h, handle))


# (payload size, bytes held back, record size of the late bytes)
cases = [
    (1 << 20, 1, 1),
    (1 << 20, 40000, 1000),
    ((1 << 20) + 1, 300 * 1024, 16384),
    (160 * 1024, 20 * 1024, 512),
    (129 * 1024 + 7, 1, 1),
    ((2 << 20) + 3, 70000, 7),
    (600 * 1024, 600 * 1024 - 5, 4096),
]
off = 0
for size, late, piece in cases:
    data = (bytes((off + i * 7) & 0xff for i in range(251)) *
            (size // 251 + 1))[:size]
    assert len(data) == size
    start = time.time()
    t.sendall(request(CMD_WRITE, off, size) + data[:size - late])
    time.sleep(0.3)
    for n, i in enumerate(range(size - late, size, piece)):
        t.sendall(data[i:i + piece])
        if n % 64 == 63:
            time.sleep(0.01)
    try:
        simple_reply("write of %d" % size)
    except socket.timeout:
        fail("write of %d bytes (%d late): no reply in 20 s" % (size, late))
    t.sendall(request(CMD_READ, off, size))
    simple_reply("read of %d" % size)
    if recv_exact(t, size) != data:
        fail("write of %d bytes (%d late): read back different" % (size, late))
    print("%d bytes, the last %d late in %d-byte records: ok (%.1f s)" %
          (size, late, piece, time.time() - start))
    off += size + 4096
