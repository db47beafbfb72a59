#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# nbdkit_metrics.py: reading a server's --metrics endpoint
# (nbdkit-metrics(1)) without root, for the tools.
#
# As a module, imported by nbdkit-top (its view without root): the
# endpoint (Endpoint, found from a server's command line by
# endpoint_of_pid), its page parsed into a Scrape (parse_metrics), the
# latency buckets of an interval (bucket_diffs) and their percentiles.
# As a program, nbdkit-trace's latency view without root:
#
#   nbdkit_metrics.py latency [--json] [--seconds N] SERVER...
#
# where SERVER is an endpoint (unix:PATH, HOST:PORT, http://...) or
# pid:PID (the endpoint from that server's command line).  It scrapes
# each endpoint, again after N seconds or at ^C, and prints the
# difference per server, export and command: the latency histogram in
# the layout of nbdkit-latency.bt's (its log2 buckets are the page's,
# in seconds), the requests and the errors by errno; with --json, one
# object with the buckets, counts, p50 and p99.
# It is installed beside nbdkit-trace's bpftrace scripts, where
# nbdkit-top and nbdkit-trace look for it.

import argparse
import http.client
import json
import os
import re
import signal
import socket
import sys
import time
import urllib.parse

COMMANDS = {0: "read", 1: "write", 2: "disc", 3: "flush", 4: "trim",
            5: "cache", 6: "write_zeroes", 7: "block_status"}
# The metrics endpoint's "other" command (no NBD type is this wide).
OTHER_COMMAND = 0x10000
COMMANDS[OTHER_COMMAND] = "other"


def percentile (buckets, q):
  """buckets: list of (lo, hi, count), sorted; hi exclusive.  -> ns"""
  total = sum (c for _, _, c in buckets)
  if total == 0:
    return None
  want = q * total
  seen = 0
  for lo, hi, c in buckets:
    if c and seen + c >= want:
      return lo + (hi - lo) * (want - seen) / c
    seen += c
  return buckets[-1][1]



# ---- Without root: the server's --metrics endpoint ----
#
# A scrape is the Prometheus text page of nbdkit-metrics(1).  Its
# counters are cumulative over the server's life; each interval shows
# the difference from the scrape before (the first scrape is the
# baseline).  Per export and command there are requests, bytes, errors
# and the latency histogram (log2 buckets, cumulative); per open
# connection only requests and bytes; in flight only per server.  What
# a row cannot have from this (a connection's errors and latency, the
# client's pid, cache hits, retries) shows "-".

METRIC_COMMANDS = {"read": 0, "write": 1, "flush": 3, "trim": 4, "cache": 5,
                   "zero": 6, "block_status": 7, "other": OTHER_COMMAND}
SAMPLE = re.compile (r'^([A-Za-z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)')
LABEL = re.compile (r'(\w+)="((?:[^"\\]|\\.)*)"')
UNESCAPE = {"\\\\": "\\", "\\\"": "\"", "\\n": "\n"}


class Scrape:
  """One page of counters, parsed."""
  def __init__ (self):
    self.exp = {}        # (export, cmd) -> [requests, bytes, errors, {le: n}]
    self.conns = {}      # id -> [export, peer, requests, bytes]
    self.errno = {}      # (export, cmd, errno name) -> errors
    self.in_flight = 0
    self.start = None    # nbdkit_start_time_seconds: a restart changes it


def parse_metrics (text):
  sc = Scrape ()
  for line in text.splitlines ():
    m = SAMPLE.match (line)
    if not m:
      continue
    name, labels, value = m.groups ()
    lab = {k: re.sub (r'\\.', lambda e: UNESCAPE.get (e.group (0),
                                                     e.group (0)), v)
           for k, v in LABEL.findall (labels or "")}
    try:
      v = float (value)
    except ValueError:
      continue
    if name == "nbdkit_requests_in_flight":
      sc.in_flight = int (v)
    elif name == "nbdkit_start_time_seconds":
      sc.start = v
    elif name in ("nbdkit_connection_requests_total",
                  "nbdkit_connection_bytes_total") and "id" in lab:
      c = sc.conns.setdefault (int (lab["id"]), [lab.get ("export", ""),
                                                lab.get ("peer", "?"), 0, 0])
      c[2 if name.endswith ("requests_total") else 3] = int (v)
    elif "export" in lab and lab.get ("command") in METRIC_COMMANDS:
      e = sc.exp.setdefault ((lab["export"],
                              METRIC_COMMANDS[lab["command"]]),
                             [0, 0, 0, {}])
      if name == "nbdkit_requests_total":
        e[0] = int (v)
      elif name == "nbdkit_request_bytes_total":
        e[1] = int (v)
      elif name == "nbdkit_request_errors_total":
        e[2] += int (v)            # summed over errno
        sc.errno[(lab["export"], METRIC_COMMANDS[lab["command"]],
                  lab.get ("errno", "errno"))] = int (v)
      elif name == "nbdkit_request_duration_seconds_bucket" and "le" in lab:
        e[3][float (lab["le"])] = int (v)
  return sc


def bucket_diffs (cur, prev, empty=False):
  """The interval's latency buckets [(lo_ns, hi_ns, n)] from two
  cumulative histograms {le seconds: count}; with EMPTY, the buckets
  with no request in it too."""
  out = []
  lo, below, pbelow = 0, 0, 0
  for le in sorted (cur):
    n = cur[le] - below - (prev.get (le, 0) - pbelow)
    below, pbelow = cur[le], prev.get (le, 0)
    # +Inf: as wide again as the bucket below it.
    hi = lo * 2 if le == float ("inf") else le * 1e9
    if n > 0 or empty:
      out.append ((lo, hi, n))
    lo = hi
  return out


class UnixHTTPConnection (http.client.HTTPConnection):
  """HTTP over a Unix socket."""
  def __init__ (self, path, timeout):
    super ().__init__ ("localhost", timeout=timeout)
    self.unix_path = path

  def connect (self):
    self.sock = socket.socket (socket.AF_UNIX, socket.SOCK_STREAM)
    self.sock.settimeout (self.timeout)
    self.sock.connect (self.unix_path)


class Endpoint:
  """ENDPOINT as --metrics takes it: unix:PATH, HOST:PORT ([V6]:PORT,
  :PORT for 127.0.0.1) or an http:// URL."""
  def __init__ (self, spec):
    self.spec = spec
    self.path = "/metrics"
    if spec.startswith ("unix:"):
      self.unix = spec[5:]
      if not self.unix:
        raise ValueError ("no socket path")
      return
    self.unix = None
    if spec.startswith ("http://"):
      u = urllib.parse.urlsplit (spec)
      self.host, self.port = u.hostname, u.port or 80
      self.path = u.path or "/metrics"
      if u.query:
        self.path += "?" + u.query
      if not self.host:
        raise ValueError ("no host")
      return
    host, sep, port = spec.rpartition (":")
    if not sep or not port.isdigit () or not 0 < int (port) < 65536:
      raise ValueError ("expected unix:PATH, HOST:PORT or http://...")
    self.host = host.strip ("[]") or "127.0.0.1"
    self.port = int (port)

  def scrape (self, timeout):
    """The page as text; OSError, http.client.HTTPException or
    ValueError if there is none."""
    if self.unix is not None:
      c = UnixHTTPConnection (self.unix, timeout)
    else:
      c = http.client.HTTPConnection (self.host, self.port, timeout=timeout)
    try:
      c.request ("GET", self.path)
      r = c.getresponse ()
      body = r.read ().decode ("utf-8", "replace")
      if r.status != 200:
        raise ValueError ("HTTP status %d" % r.status)
      return body
    finally:
      c.close ()


def endpoint_of_pid (pid):
  """The --metrics endpoint server PID was started with, from its
  command line: (spec, None), or (None, why not)."""
  try:
    with open ("/proc/%d/cmdline" % pid, "rb") as f:
      argv = [x.decode ("utf-8", "surrogateescape")
              for x in f.read ().split (b"\0")[:-1]]
  except OSError as e:
    return None, "pid %d: %s" % (pid, e.strerror)
  if not argv or "nbdkit" not in os.path.basename (argv[0]):
    return None, "pid %d is not an nbdkit server" % pid
  spec = None
  i = 1
  while i < len (argv):
    if argv[i] == "--":
      break
    if argv[i].startswith ("--metrics="):
      spec = argv[i][10:]          # the last one wins, as in the server
    elif argv[i] == "--metrics" and i + 1 < len (argv):
      i += 1
      spec = argv[i]
    i += 1
  if spec is None:
    return None, "pid %d was started without --metrics" % pid
  if spec.startswith ("unix:"):
    path = spec[5:]
    if not path.startswith ("/"):
      # The server keeps the cwd it bound the socket in unless it
      # daemonised (chdir ("/")); it then knows the path as absolute,
      # but its command line does not.
      try:
        cwd = os.readlink ("/proc/%d/cwd" % pid)
      except OSError as e:
        return None, "pid %d: --metrics=%s is relative, and its " \
          "directory: %s" % (pid, spec, e.strerror)
      if cwd == "/":
        return None, "pid %d: --metrics=%s is relative to a directory " \
          "it has left" % (pid, spec)
      path = os.path.join (cwd, path)
    return "unix:" + path, None
  # [ADDR]:PORT, ADDR defaulting to 127.0.0.1; an address that means
  # every interface is reached on loopback.
  host, _, port = spec.rpartition (":")
  host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "[::]": "[::1]"}.get (
    host, host)
  return "%s:%s" % (host, port), None



# ---- nbdkit-trace's latency view, from the endpoints ----

def time_label (ns):
  """A bucket bound in ns as people read it: 954ns, 15.6ms, 2s."""
  for unit, f in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
    if ns >= f:
      return "%.3g%s" % (ns / f, unit)
  return "%.3gns" % ns


def print_hist (out, buckets):
  """BUCKETS [(lo_ns, hi_ns, n)] as bpftrace prints a hist(), from
  the first bucket with requests to the last; the bounds are the
  page's, (lo, le]."""
  used = [i for i, b in enumerate (buckets) if b[2]]
  top = max (b[2] for b in buckets)
  for lo, hi, n in buckets[used[0]:used[-1] + 1]:
    out.write ("%-18s %8d |%-52s|\n" % (
      "(%s, %s]" % (time_label (lo), time_label (hi)), n,
      "@" * (n * 52 // top)))


def latency_rows (server, spec, cur, prev):
  """The interval's rows of one server: one per export and command
  with requests or errors in it."""
  rows = []
  for (exp, cmd) in sorted (cur.exp):
    c = cur.exp[(exp, cmd)]
    p = prev.exp.get ((exp, cmd), [0, 0, 0, {}])
    ops, err = c[0] - p[0], c[2] - p[2]
    if not (ops or err):
      continue
    b = bucket_diffs (c[3], p[3], empty=True)
    p50, p99 = percentile (b, 0.50), percentile (b, 0.99)
    rows.append ({
      "server": server, "endpoint": spec, "export": exp,
      "command": COMMANDS.get (cmd, str (cmd)), "requests": ops,
      "errors": err,
      "errors_by_errno": {e: n - prev.errno.get ((exp, cmd, e), 0)
                          for (x, k, e), n in sorted (cur.errno.items ())
                          if (x, k) == (exp, cmd) and
                          n > prev.errno.get ((exp, cmd, e), 0)},
      # Prometheus' bounds: lo_s < latency <= le_s (null: +Inf).
      "buckets": [{"lo_s": lo / 1e9,
                   "le_s": None if (i == len (b) - 1 and
                                    float ("inf") in c[3]) else hi / 1e9,
                   "count": n} for i, (lo, hi, n) in enumerate (b) if n],
      "p50_us": None if p50 is None else round (p50 / 1000, 1),
      "p99_us": None if p99 is None else round (p99 / 1000, 1),
      "_hist": b})
  return rows


def print_latency (out, rows, secs):
  out.write ("\nFrom the metrics endpoint, over %.1f s: the time from "
             "reading a request's header to its reply being ready (no "
             "stages: the endpoint has none), in its log2 buckets.\n" % secs)
  groups = {}
  for r in rows:
    groups.setdefault ((str (r["server"]), r["endpoint"], r["export"]),
                       []).append (r)
  for (server, spec, exp), rs in groups.items ():
    who = spec if server == spec else "pid %s (%s)" % (server, spec)
    out.write ("\nexport \"%s\" of %s:\n" % (exp, who))
    for r in rs:
      if r["requests"]:
        out.write ("@total[%s]:\n" % r["command"])
        print_hist (out, r["_hist"])
        out.write ("\n")
    for r in rs:
      out.write ("@requests[%s]: %d\n" % (r["command"], r["requests"]))
    for r in rs:
      for e, n in r["errors_by_errno"].items ():
        out.write ("@errors[%s, %s]: %d\n" % (r["command"], e, n))
  if not rows:
    out.write ("\nNo requests.\n")
  out.flush ()


def latency_main (argv):
  p = argparse.ArgumentParser (
    prog="nbdkit-trace latency",
    description="Per export and command, the latency histogram of the "
    "requests of an interval, from the servers' --metrics endpoints.")
  p.add_argument ("--json", action="store_true",
                  help="one JSON object for scripts")
  p.add_argument ("--seconds", type=float, default=0,
                  help="the interval (default: until ^C)")
  p.add_argument ("servers", nargs="+", metavar="SERVER",
                  help="unix:PATH, HOST:PORT, http://... or pid:PID")
  a = p.parse_args (argv)
  prog = "nbdkit-trace"
  servers = []
  for s in dict.fromkeys (a.servers):
    if s.startswith ("pid:"):
      try:
        pid = int (s[4:])
      except ValueError:
        sys.exit ("%s: %s: not a pid" % (prog, s[4:]))
      spec, why = endpoint_of_pid (pid)
      if spec is None:
        sys.exit ("%s: %s: run it as root for the probes, or start the "
                  "server with --metrics=unix:PATH" % (prog, why))
      server = pid
    else:
      server = spec = s
    try:
      servers.append ((server, spec, Endpoint (spec)))
    except ValueError as e:
      sys.exit ("%s: --metrics %s: %s" % (prog, spec, e))

  def scrape (spec, ep):
    try:
      return parse_metrics (ep.scrape (3.0))
    except (OSError, http.client.HTTPException, ValueError) as e:
      sys.exit ("%s: cannot read the metrics endpoint %s: %s" % (
        prog, spec, str (e) or type (e).__name__))
  base = [scrape (spec, ep) for _, spec, ep in servers]
  t0 = time.monotonic ()

  # ^C (or TERM, or the end of --seconds) ends the interval.
  def stop (*_):
    raise KeyboardInterrupt
  for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal (sig, stop)
  banner = sys.stderr if a.json else sys.stdout
  banner.write ("Reading nbdkit request latency from the metrics endpoint "
                "of %s... %s\n" % (", ".join (
                  spec if server == spec else "pid %s" % server
                  for server, spec, _ in servers),
                  "Hit Ctrl-C to end." if not a.seconds else
                  "%g s (or Ctrl-C)." % a.seconds))
  banner.flush ()
  try:
    if a.seconds:
      time.sleep (a.seconds)
    else:
      while True:
        signal.pause ()
  except KeyboardInterrupt:
    pass
  for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal (sig, signal.SIG_IGN)
  rows = []
  for (server, spec, ep), prev in zip (servers, base):
    cur = scrape (spec, ep)
    if cur.start != prev.start:
      prev = Scrape ()           # restarted: all of it is new
    rows += latency_rows (server, spec, cur, prev)
  secs = time.monotonic () - t0
  if a.json:
    for r in rows:
      del r["_hist"]
    json.dump ({"source": "metrics endpoint", "seconds": round (secs, 3),
                "latency": rows}, sys.stdout)
    sys.stdout.write ("\n")
  else:
    print_latency (sys.stdout, rows, secs)
  return 0


if __name__ == "__main__":
  if sys.argv[1:2] != ["latency"]:
    sys.exit ("usage: nbdkit_metrics.py latency [--json] [--seconds N] "
              "SERVER...")
  sys.exit (latency_main (sys.argv[2:]))
