#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=multi-conn: for each multi-conn-mode and track-dirty level,
# three clients write, read, flush and write with FUA in a fixed order,
# and after each step we print what reached the plugin (Debian's log
# filter under ours: which connection flushed, read, wrote, with which
# flags).  All of it, with can_multi_conn and can_fua, must be the same
# as Debian's nbdkit with its own multi-conn filter; also with
# multi-conn-exportname over two exports, and bad values must exit 1.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"

log="$tmpdir/plugin.log"
logfilter="--filter=$debian_filterdir/nbdkit-log-filter.so"

cat > "$tmpdir/steps.py" <<'PY'
import json, os, re, sys
uri, log = os.environ["URI"], os.environ["LOG"]
names = os.environ.get("NAMES", ",,").split(",")
pos = 0
conns = {}
def plugin_saw():
    # New calls in the log since the last step; connections renamed in
    # order of appearance (the two servers number them differently).
    global pos
    with open(log) as f:
        f.seek(pos)
        text = f.read()
        pos = f.tell()
    for line in text.splitlines():
        m = re.search(r"connection=(\d+) (Flush|Write|Read|Zero|Trim) (.*)", line)
        if not m:
            continue
        c = conns.setdefault(m.group(1), "c%d" % len(conns))
        rest = re.sub(r"id=\d+ ?", "", m.group(3))
        print("   ", c, m.group(2), rest)
hs = []
for n in names:
    x = nbd.NBD()
    # Debian's nbdkit gives nbd+unix://?socket=..., ours nbd+unix:///?...
    x.connect_uri("nbd+unix:///" + n + "?" + uri.split("?", 1)[1])
    hs.append(x)
a, b, c = hs
print("can_multi_conn", a.can_multi_conn(), "can_fua", a.can_fua())
plugin_saw()
F = nbd.CMD_FLAG_FUA if c.can_fua() else 0
steps = [
    ("a write", lambda: a.pwrite(b"1" * 512, 0)),
    ("b read", lambda: b.pread(512, 0)),
    ("a flush", lambda: a.flush()),
    ("b flush", lambda: b.flush()),
    ("c write fua", lambda: c.pwrite(b"2" * 512, 512, F)),
    ("c flush", lambda: c.flush()),
    ("a read", lambda: a.pread(512, 512)),
    ("b write", lambda: b.pwrite(b"3" * 512, 1024)),
    ("b zero", lambda: b.zero(512, 2048)),
    ("c flush", lambda: c.flush()),
    ("a flush", lambda: a.flush()),
    ("c trim fua", lambda: c.trim(512, 4096, F)),
    ("b flush", lambda: b.flush()),
]
for name, fn in steps:
    try:
        fn()
        print(name)
    except nbd.Error as e:
        print(name, "error", e.errno)
    plugin_saw()
for x in hs:
    x.shutdown()
PY
cat > "$tmpdir/steps" <<EOF
#!/bin/sh
URI="\$1" LOG="$log" NAMES="\${NAMES:-,,}" nbdsh -c "exec(open('$tmpdir/steps.py').read())"
EOF
chmod +x "$tmpdir/steps"

for m in auto emulate plugin disable unsafe; do
  for td in connection fast off; do
    compare_own "multi-conn-$m-$td" "$tmpdir/steps" --filter=multi-conn \
      "$logfilter" memory 1M logfile="$log" \
      multi-conn-mode=$m multi-conn-track-dirty=$td
    cp "$ours" "$tmpdir/mc-$m-$td"
  done
done
# The fan-out the comparison holds, spelled out: under emulate, a's
# flush reaches a (it wrote) and b (it read), not c (clean).
awk '/^a flush$/ && !done { f = 1; next }
     f && /^[a-z]/ { f = 0; done = 1 }
     f' "$tmpdir/mc-emulate-connection" > "$tmpdir/fanout"
[ "$(grep -c Flush "$tmpdir/fanout")" -eq 2 ] &&
  grep -q 'c0 Flush' "$tmpdir/fanout" && grep -q 'c1 Flush' "$tmpdir/fanout" ||
  note_failure multi-conn-fanout "a's flush: $(cat "$tmpdir/fanout")"

# A plugin that is multi-conn itself: auto means plugin; serialised
# connections: auto means disable.
compare_own multi-conn-auto-noparallel "$tmpdir/steps" --filter=multi-conn \
  --filter=noparallel "$logfilter" memory 1M logfile="$log" \
  serialize=all-requests
# Export names: two clients on export "x", one on "y" (the memory
# plugin serves the same data under every name).
for byname in false true; do
  NAMES=x,x,y compare_own "multi-conn-exportname-$byname" \
    "$tmpdir/steps" --filter=multi-conn "$logfilter" memory 1M \
    logfile="$log" multi-conn-mode=emulate multi-conn-exportname=$byname
  cp "$ours" "$tmpdir/mc-exportname-$byname"
done
# By name, c's flush (export "y") leaves a and b (export "x") alone,
# and a's flush leaves c alone.
awk '/^c flush$/ { n++ } n == 2 && /^    / { print }
     n == 2 && /^a flush$/ { exit }' \
  "$tmpdir/mc-exportname-true" > "$tmpdir/byname"
[ -s "$tmpdir/byname" ] &&
  note_failure multi-conn-byname "c's flush reached a or b: $(cat "$tmpdir/byname")"
awk '/^c flush$/ { n++ } n == 2 && /^    / { print }
     n == 2 && /^a flush$/ { exit }' \
  "$tmpdir/mc-exportname-false" > "$tmpdir/notbyname"
[ "$(grep -c Flush "$tmpdir/notbyname")" -eq 2 ] ||
  note_failure multi-conn-notbyname "c's flush: $(cat "$tmpdir/notbyname")"
NAMES=x,x,y compare_own multi-conn-export-name "$tmpdir/steps" \
  --filter=multi-conn "$logfilter" memory 1M logfile="$log" \
  multi-conn-mode=emulate multi-conn-export-name=1

# Bytes through the filter with nbdcopy's several connections.
disk="$tmpdir/disk.img"
make_pattern "$disk" $((4 * 1024 * 1024))
cp "$disk" "$disk.orig"
compare_own multi-conn-read read --filter=multi-conn file "$disk"
state_files=("$disk")
compare_own multi-conn-write write --filter=multi-conn file "$disk" \
  multi-conn-mode=emulate
state_files=()

# --- Bad parameters: exit 1, one line naming the key ----------------------
bad ()
{
  refuses "$1" --filter=multi-conn null 1M "${@:2}" ||
    fail "${*:2}: not refused with /$1/"
}
bad "^nbdkit: multi-conn: error: multi-conn-mode: unknown mode 'on'" \
  multi-conn-mode=on
bad "^nbdkit: multi-conn: error: multi-conn-track-dirty: unknown level 'x'" \
  multi-conn-track-dirty=x
bad "^nbdkit: multi-conn: error: multi-conn-exportname: .*maybe" \
  multi-conn-exportname=maybe

finish
