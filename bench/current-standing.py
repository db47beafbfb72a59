#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# bench/current-standing.py RESULTS.md: print the "## Current standing"
# section that opens bench/RESULTS.md: one table with every row of the
# last full bench/compare.sh run (both transports, every peer), each
# peer's median and ours ÷ that peer, with the run's date, commit and
# versions.  It reads the run's raw samples from the "## Peers" section,
# so it always agrees with that section; compare.sh --write-results
# calls it after writing "## Peers".  Exits 1 when there is no Peers
# section with raw samples.
import collections
import re
import statistics
import sys

NAMES = [
    ("randread-4k", "4K random read QD32", "IOPS"),
    ("randwrite-4k", "4K random write QD32", "IOPS"),
    ("randread-4k-4conn", "4K random read, 4 conn x QD8", "IOPS"),
    ("seqread-1m", "1M sequential read QD8", "MiB/s"),
    ("seqwrite-1m", "1M sequential write QD8", "MiB/s"),
    ("copy-out", "nbdcopy export → null:", "MiB/s"),
    ("copy-in", "nbdcopy file → export", "MiB/s"),
    ("lat-4k-qd1-p50", "4K read QD1, p50 latency", "µs"),
    ("lat-4k-qd1-p99", "4K read QD1, p99 latency", "µs"),
]
PEERS = ["nbdkit", "qemu-nbd", "nbd-server"]


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: current-standing.py bench/RESULTS.md")
    text = open(sys.argv[1]).read()
    m = re.search(r"^## Peers\n(.*?)(?=^## (?!#)|\Z)", text, re.S | re.M)
    if not m:
        sys.exit("current-standing.py: no \"## Peers\" section in " + sys.argv[1])
    peers = m.group(1)
    date = re.search(r"^Date: ([^;]*); git HEAD: ([^;]*);", peers, re.M)
    versions = re.search(r"^Versions: (.*)$", peers, re.M)
    raw = re.search(r"^Raw samples[^\n]*\n\n```\n(.*?)```", peers, re.S | re.M)
    if not (date and raw):
        sys.exit("current-standing.py: the Peers section has no date or raw samples")
    g = collections.defaultdict(list)
    for line in raw.group(1).splitlines():
        f = line.split()
        if len(f) >= 10 and f[0] == "main":
            g[(f[1], f[2], f[3])].append((float(f[5]), float(f[7])))

    def med(k, i=0):
        return statistics.median(x[i] for x in g[k])

    def num(x):
        return "%.1f" % x if x < 100 else "%.0f" % x

    peers_seen = [p for p in PEERS if any(k[0] == p for k in g)]
    out = []
    out.append("## Current standing")
    out.append("")
    out.append("From the last full `bench/compare.sh --write-results` run: "
               "%s, commit %s (details, commands and raw samples under "
               "\"Peers\" below)." % (date.group(1), date.group(2)))
    if versions:
        out.append("Versions: %s." % versions.group(1).rstrip("."))
    out.append("Memory plugin (or a tmpfs file for qemu-nbd and nbd-server), "
               "medians of the rounds; \"÷\" is ours ÷ the peer: above 1 "
               "ours is faster, except for latency, where below 1 is.  CPU "
               "is the server's µs per request.")
    out.append("")
    head = "| transport | workload | ours | ours CPU |"
    rule = "|---|---|---:|---:|"
    for p in peers_seen:
        head += " %s | ÷ | %s CPU |" % (p, p)
        rule += "---:|---:|---:|"
    out.append(head)
    out.append(rule)
    behind = []
    for tr, title in (("unix", "Unix"), ("tcp", "TCP")):
        for wl, name, unit in NAMES:
            ours = ("ours", tr, wl)
            if ours not in g:
                continue
            row = "| %s | %s | %s %s | %.1f |" % (
                title, name, num(med(ours)), unit, med(ours, 1))
            for p in peers_seen:
                k = (p, tr, wl)
                if k not in g or not med(k):
                    row += " | | |"
                    continue
                r = med(ours) / med(k)
                worse = r > 1 if wl.startswith("lat-") else r < 1
                if worse:
                    behind.append("%s %s vs %s (%.2f)" % (title, name, p, r))
                row += " %s | %s%.2f%s | %.1f |" % (
                    num(med(k)), "**" if worse else "", r,
                    "**" if worse else "", med(k, 1))
            out.append(row)
    out.append("")
    if behind:
        out.append("Rows where ours is behind (in bold above): "
                   + "; ".join(behind) + ".")
    else:
        out.append("Ours is ahead of every peer on every row.")
    out.append("")
    out.append("Other current tables below: \"Probe overhead\", \"Filters\", "
               "\"Plugins\" and the remote backends and language hosts.  "
               "Dated experiments (kept and rejected) are in "
               "bench/HISTORY.md.")
    print("\n".join(out))


main()
