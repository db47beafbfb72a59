#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tests/curl-stall-server.py MODE PORTFILE: a web server that stalls,
# for the curl plugin's timeout test.  It listens on a free port of
# 127.0.0.1, writes the port to PORTFILE, and for each connection:
#   MODE=all   reads the request and never answers;
#   MODE=get   answers HEAD as a server with byte ranges would (a
#              1 MiB file), and never answers GET.
# Stalled connections are held open until the peer closes them.  The
# test runs it under timeout(1) and kills it by pid.
import socket
import sys
import threading

mode, portfile = sys.argv[1], sys.argv[2]
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 0))
srv.listen(16)
with open(portfile + ".tmp", "w") as f:
    f.write("%d\n" % srv.getsockname()[1])
import os
os.rename(portfile + ".tmp", portfile)


def serve(conn):
    buf = b""
    try:
        while True:
            data = conn.recv(65536)
            if not data:
                return
            buf += data
            while b"\r\n\r\n" in buf:
                req, buf = buf.split(b"\r\n\r\n", 1)
                if mode == "get" and req.startswith(b"HEAD "):
                    conn.sendall(b"HTTP/1.1 200 OK\r\n"
                                 b"Content-Length: 1048576\r\n"
                                 b"Accept-Ranges: bytes\r\n\r\n")
                # Anything else: say nothing, keep the connection.
    finally:
        conn.close()


while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
