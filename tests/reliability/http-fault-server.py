#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tests/reliability/http-fault-server.py: a web server for the curl
# plugin's fault tests.  It serves one file with byte ranges (HEAD, and
# GET with "Range: bytes=A-B" answered 206) and spoils GETs on demand:
#
#   http-fault-server.py FILE PORTFILE [--port N] [--pidfile F]
#                        [--control F] [--faults N:KIND,...]
#
#   500    answer "500 Internal Server Error" (with a short body)
#   short  206 for the range asked, but a Content-Length and a body of
#          half of it: a complete answer that is too short
#   cut    206 with the full Content-Length, half the body, then close
#          the connection: a transfer broken off
#   kill   send half the body, then die of SIGKILL (as if killed from
#          outside while answering); only with --faults
#
# With --control, each GET reads the fault from that file (a word:
# "ok" or one of the kinds above but kill); with --faults, the Nth GET
# since the start (counting from 1) gets KIND.  HEAD is always
# answered right, so the curl plugin can start.  It listens on
# 127.0.0.1, on port N or a free one, and writes the port to PORTFILE
# (and its pid to F) once it listens.  Each GET is logged on stderr
# with its number and fault.
import argparse
import os
import re
import signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ap = argparse.ArgumentParser()
ap.add_argument("file")
ap.add_argument("portfile")
ap.add_argument("--port", type=int, default=0)
ap.add_argument("--pidfile")
ap.add_argument("--control")
ap.add_argument("--faults", default="")
args = ap.parse_args()

faults = {}
for item in filter(None, args.faults.split(",")):
    n, kind = item.split(":")
    faults[int(n)] = kind
data = open(args.file, "rb").read()
lock = threading.Lock()
gets = 0


def fault_for_this_get():
    global gets
    with lock:
        gets += 1
        n = gets
    kind = faults.get(n, "ok")
    if args.control:
        try:
            with open(args.control) as f:
                kind = f.read().strip() or "ok"
        except FileNotFoundError:
            pass
    return n, kind


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *a):
        pass

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()

    def do_GET(self):
        n, kind = fault_for_this_get()
        m = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
        if not m:
            a, b = 0, len(data) - 1
        else:
            a, b = int(m.group(1)), min(int(m.group(2)), len(data) - 1)
        # One write per line: the handlers run in threads.
        os.write(2, b"GET %d bytes=%d-%d %s\n" % (n, a, b, kind.encode()))
        body = data[a:b + 1]
        if kind == "500":
            msg = b"injected failure\n"
            self.send_response(500)
            self.send_header("Content-Length", str(len(msg)))
            self.end_headers()
            self.wfile.write(msg)
            return
        self.send_response(206)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Range", "bytes %d-%d/%d" % (a, b, len(data)))
        half = body[:len(body) // 2]
        if kind == "short":
            self.send_header("Content-Length", str(len(half)))
            self.end_headers()
            self.wfile.write(half)
            return
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if kind in ("cut", "kill"):
            self.wfile.write(half)
            self.wfile.flush()
            if kind == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            self.close_connection = True
            return
        self.wfile.write(body)


class Server(ThreadingHTTPServer):
    allow_reuse_address = True
    daemon_threads = True


srv = Server(("127.0.0.1", args.port), Handler)
if args.pidfile:
    with open(args.pidfile + ".tmp", "w") as f:
        f.write("%d\n" % os.getpid())
    os.rename(args.pidfile + ".tmp", args.pidfile)
with open(args.portfile + ".tmp", "w") as f:
    f.write("%d\n" % srv.server_address[1])
os.rename(args.portfile + ".tmp", args.portfile)
srv.serve_forever()
