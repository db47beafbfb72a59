#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# nbdkit-trace -p PID latency --svg FILE --seconds N: a server whose
# reads wait 20 ms (the delay filter) and whose writes do not; a client
# makes 60 reads and 120 writes in three bursts over about 2 s.  The
# heatmap must be valid XML with a plot, both axes, a colour bar and a
# cell per non-empty (slice, bucket), each with a tooltip; the counts in
# the tooltips add up to the 180 requests (NBD_CMD_DISC is not one),
# 60 of them reads, every read at 2^24 ns (16.8 ms) or more and most in
# the 2^24-2^25 row, the writes below it.  Headless Chromium renders it
# to a PNG that is not blank and shows the cells' colours.
source "$(dirname "$0")/functions.sh"
trace="$abs_top_srcdir/tools/nbdkit-trace"

requires_tracer nbdsh chromium
requires_cmd timeout

start_server --filter=delay memory 64M rdelay=20ms
svg="$tmpdir/latency.svg"
out="$tmpdir/out"
start_tool "$out" '^Tracing' \
  "$trace" -p "$server_pid" latency --svg "$svg" --seconds 5

t timeout 30 nbdsh -u "$uri" -c '
import time
for burst in range(3):
    for i in range(20):
        h.pread(4096, i * 4096)
    for i in range(40):
        h.pwrite(b"w" * 4096, 1048576 + i * 4096)
    time.sleep(0.3)
'
# --seconds ends it (start_tool's timeout is the bound).
wait "$tool" || { cat "$out" "$out.err"; fail "nbdkit-trace failed"; }
cat "$out"
[ -s "$svg" ] || fail "no SVG written"

t /usr/bin/python3 - "$svg" "$server_pid" <<'EOF'
import re, sys
import xml.etree.ElementTree as ET
svg, pid = sys.argv[1], sys.argv[2]
ns = {"s": "http://www.w3.org/2000/svg"}
root = ET.parse(svg).getroot()
assert root.tag == "{http://www.w3.org/2000/svg}svg", root.tag
def group(name):
    g = root.find(".//s:g[@id='%s']" % name, ns)
    assert g is not None, "no group " + name
    return g
title = root.find("s:title", ns).text
assert "pid " + pid in title, title
assert len(group("x-axis").findall("s:text", ns)) >= 3, "x-axis labels"
ylabels = [t.text for t in group("y-axis").findall("s:text", ns)]
assert any(l.endswith(" ms") for l in ylabels), ylabels
assert any(l.endswith(" µs") for l in ylabels), ylabels
legend = group("legend")
assert legend.find("s:rect[@fill='url(#ramp)']", ns) is not None
assert root.find(".//s:linearGradient[@id='ramp']", ns) is not None
cells = group("cells").findall("s:rect[@class='cell']", ns)
assert cells, "no cells"
total = reads = writes = 0
reads_row24 = slow_writes = 0
for c in cells:
    tip = c.find("s:title", ns).text
    m = re.search(r"\(2\^(\d+)–2\^\d+ ns\) · (\d+) requests?: (.*)", tip)
    assert m, tip
    b, n = int(m.group(1)), int(m.group(2))
    by_cmd = dict((k, int(v)) for k, v in re.findall(r"(\w+) (\d+)",
                                                      m.group(3)))
    assert sum(by_cmd.values()) == n, tip
    assert float(c.get("width")) > 0 and float(c.get("height")) > 0
    total += n
    r = by_cmd.get("read", 0)
    reads += r
    writes += by_cmd.get("write", 0)
    assert r == 0 or b >= 24, "a 20 ms read below 2^24 ns: " + tip
    if b == 24:
        reads_row24 += r
    if b >= 24:
        slow_writes += by_cmd.get("write", 0)
print("cells %d: requests %d, reads %d (%d at 2^24), writes %d (%d slow)"
      % (len(cells), total, reads, reads_row24, writes, slow_writes))
assert total == 180, "requests in the cells: %d, the client made 180" % total
assert reads == 60 and writes == 120, (reads, writes)
# A loaded machine may stretch a few.
assert reads_row24 >= 55, "reads in the 16.8-33.6 ms row: %d" % reads_row24
assert slow_writes <= 5, "writes at 16.8 ms or more: %d" % slow_writes
EOF

# Render it.  Chromium's profile and cache go to the test directory.
png="$tmpdir/latency.png"
HOME="$tmpdir" t timeout -k 5 60 chromium --headless --no-sandbox \
  --disable-gpu --force-color-profile=srgb \
  --user-data-dir="$tmpdir/chromium" --screenshot="$png" \
  --window-size=1000,700 "file://$svg" 2> "$tmpdir/chromium.err" ||
  { cat "$tmpdir/chromium.err"; fail "chromium could not render the SVG"; }

t /usr/bin/python3 - "$png" "$svg" <<'EOF'
# Decode the PNG (8-bit RGB or RGBA, what Chromium writes) with zlib.
import re, struct, sys, zlib
png, svg = sys.argv[1], sys.argv[2]
data = open(png, "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat = 8, b""
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
    elif kind == b"IDAT":
        idat += body
    pos += 12 + n
assert depth == 8 and ctype in (2, 6), (depth, ctype)
bpp = 3 if ctype == 2 else 4
raw = zlib.decompress(idat)
stride = w * bpp
prev = bytearray(stride)
colours = {}
for y in range(h):
    f = raw[y * (stride + 1)]
    line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
        a = line[i - bpp] if i >= bpp else 0
        b = prev[i]
        c = prev[i - bpp] if i >= bpp else 0
        if f == 1: line[i] = (line[i] + a) & 255
        elif f == 2: line[i] = (line[i] + b) & 255
        elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            pr = a if pa <= pb and pa <= pc else b if pb <= pc else c
            line[i] = (line[i] + pr) & 255
    for x in range(0, stride, bpp):
        px = bytes(line[x:x + 3])
        colours[px] = colours.get(px, 0) + 1
    prev = line
white = colours.get(b"\xff\xff\xff", 0)
print("%dx%d: %d colours, %d%% white" % (w, h, len(colours),
                                        100 * white // (w * h)))
assert len(colours) >= 20, "only %d colours: blank?" % len(colours)
assert white < w * h * 0.9, "mostly white"
fills = set(re.findall(r'class="cell"[^>]*fill="#([0-9a-f]{6})"',
                       open(svg).read()))
seen = [f for f in fills if bytes.fromhex(f) in colours]
print("cell colours drawn: %d of %d" % (len(seen), len(fills)))
assert seen, "none of the cells' colours is in the picture"
EOF
