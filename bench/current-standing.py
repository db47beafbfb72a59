#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# bench/current-standing.py RESULTS.md: print the "## Current standing"
# section that opens bench/RESULTS.md: one table with every row of the
# last full bench/compare.sh runs (both transports, every peer; plain,
# then over TLS with PSK and with X.509 where those sections exist),
# each peer's median and ours ÷ that peer, with each run's date and
# commit.  It reads the raw samples of the "## Peers" and "## Peers over
# TLS (...)" sections, so it always agrees with them; compare.sh
# --write-results calls it after writing one of them.  Exits 1 when
# there is no Peers section with raw samples.
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


SECTIONS = [("Peers", ""), ("Peers over TLS (PSK)", "TLS PSK, "),
            ("Peers over TLS (X.509)", "TLS X.509, ")]


def section(text, title):
    """The raw samples, date and versions of the section TITLE, or None."""
    m = re.search(r"^## " + re.escape(title) + r"\n(.*?)(?=^## (?!#)|\Z)",
                  text, re.S | re.M)
    if not m:
        return None
    body = m.group(1)
    date = re.search(r"^Date: ([^;]*); git HEAD: ([^;]*);", body, re.M)
    versions = re.search(r"^Versions: (.*)$", body, re.M)
    raw = re.search(r"^Raw samples[^\n]*\n\n```\n(.*?)```", body, re.S | re.M)
    if not (date and raw):
        return None
    g = collections.defaultdict(list)
    for line in raw.group(1).splitlines():
        f = line.split()
        if len(f) >= 10 and f[0] == "main":
            g[(f[1], f[2], f[3])].append((float(f[5]), float(f[7])))
    return g, date, versions


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: current-standing.py bench/RESULTS.md")
    text = open(sys.argv[1]).read()
    found = [(t, prefix, section(text, t)) for t, prefix in SECTIONS]
    found = [(t, prefix, s) for t, prefix, s in found if s]
    if not found or found[0][0] != "Peers":
        sys.exit("current-standing.py: no \"## Peers\" section with a date and raw samples in " + sys.argv[1])

    def med(g, k, i=0):
        return statistics.median(x[i] for x in g[k])

    def num(x):
        return "%.1f" % x if x < 100 else "%.0f" % x

    peers_seen = [p for p in PEERS
                  if any(k[0] == p for _, _, (g, _, _) in found for k in g)]
    out = []
    out.append("## Current standing")
    out.append("")
    out.append("From the last full `bench/compare.sh --write-results` runs "
               "(details, commands and raw samples in the sections named):")
    out.append("")
    for t, prefix, (g, date, versions) in found:
        out.append("- \"%s\": %s, commit %s." % (t, date.group(1), date.group(2)))
    versions = found[0][2][2]
    if versions:
        out.append("")
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
    for t, prefix, (g, _, _) in found:
        for tr, title in (("unix", "Unix"), ("tcp", "TCP")):
            for wl, name, unit in NAMES:
                ours = ("ours", tr, wl)
                if ours not in g:
                    continue
                label = prefix + title
                row = "| %s | %s | %s %s | %.1f |" % (
                    label, name, num(med(g, ours)), unit, med(g, ours, 1))
                for p in peers_seen:
                    k = (p, tr, wl)
                    if k not in g or not med(g, k):
                        row += " | | |"
                        continue
                    r = med(g, ours) / med(g, k)
                    worse = r > 1 if wl.startswith("lat-") else r < 1
                    if worse:
                        behind.append("%s %s vs %s (%.2f)" % (label, name, p, r))
                    row += " %s | %s%.2f%s | %.1f |" % (
                        num(med(g, k)), "**" if worse else "", r,
                        "**" if worse else "", med(g, k, 1))
                out.append(row)
    out.append("")
    if behind:
        out.append("Rows where ours is behind (in bold above): "
                   + "; ".join(behind) + ".")
    else:
        out.append("Ours is ahead of every peer on every row.")
    out.append("")
    out.append("Other current tables below: \"Probe overhead\", \"Filters\", "
               "\"Plugins\", \"Remote backends\" and \"Language hosts\".  "
               "Dated experiments (kept and rejected) are in "
               "bench/HISTORY.md.")
    print("\n".join(out))

main()
