#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tests/curl-range-server.py FILE PORTFILE [SKEW [DELAY]]: a small web
# server for the curl plugin's write test.  It serves FILE with byte ranges (HEAD,
# GET with "Range: bytes=A-B", answered 206) and takes partial writes
# (PUT with "Content-Range: bytes A-B/SIZE", SIZE the file's, written
# into FILE at A, answered 204; anything else 400), which nginx does
# not.  It listens on a free port of
# 127.0.0.1 and writes the port to PORTFILE.  Each request is printed
# on stderr.
import os
import re
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

path, portfile = sys.argv[1], sys.argv[2]
# A third argument SKEW answers each ranged GET with the range SKEW bytes
# later than asked, and says so in its Content-Range (a broken server).
skew = int(sys.argv[3]) if len(sys.argv) > 3 else 0
# A fourth, DELAY, waits DELAY milliseconds before answering each GET (a
# slow server, for the asynchronous path's tests).
delay = int(sys.argv[4]) / 1000 if len(sys.argv) > 4 else 0


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def head_or_get(self, body):
        size = os.path.getsize(path)
        m = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
        if m:
            a, b = int(m.group(1)), min(int(m.group(2)), size - 1)
            if body and skew:
                a, b = a + skew, min(b + skew, size - 1)
            self.send_response(206)
            self.send_header("Content-Range", "bytes %d-%d/%d" % (a, b, size))
        else:
            a, b = 0, size - 1
            self.send_response(200)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(b - a + 1))
        self.end_headers()
        if body:
            with open(path, "rb") as f:
                f.seek(a)
                self.wfile.write(f.read(b - a + 1))

    def do_HEAD(self):
        # With HEAD=405 in the environment, HEAD is refused (some web
        # servers and object stores do), with HEAD=nolength answered
        # without a Content-Length.
        if os.environ.get("HEAD") == "405":
            self.send_response(405)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if os.environ.get("HEAD") == "nolength":
            self.send_response(200)
            self.send_header("Accept-Ranges", "bytes")
            self.end_headers()
            self.close_connection = True
            return
        self.head_or_get(False)

    def do_GET(self):
        if delay:
            time.sleep(delay)
        print("GET %s" % self.headers.get("Range", "whole"), file=sys.stderr,
              flush=True)
        self.head_or_get(True)

    def do_PUT(self):
        n = int(self.headers.get("Content-Length", "0"))
        data = self.rfile.read(n)
        m = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+)",
                         self.headers.get("Content-Range", ""))
        if (not m or int(m.group(2)) - int(m.group(1)) + 1 != n or
                int(m.group(3)) != os.path.getsize(path)):
            self.send_response(400)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        with open(path, "r+b") as f:
            f.seek(int(m.group(1)))
            f.write(data)
        self.send_response(204)
        self.end_headers()


class Server(ThreadingHTTPServer):
    # Many connections may arrive at once (connections=N).
    request_queue_size = 128
    daemon_threads = True


srv = Server(("127.0.0.1", 0), Handler)
with open(portfile + ".tmp", "w") as f:
    f.write("%d\n" % srv.server_address[1])
os.rename(portfile + ".tmp", portfile)
srv.serve_forever()
