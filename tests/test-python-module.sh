#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The nbdkit module of the python plugin: every name of Debian's nbdkit
# 1.32 module is there with the same value (constants), and each helper
# answers right inside a connection: export_name (with bytes that are
# not UTF-8), is_tls, peer_name over TCP and over a Unix socket,
# peer_pid/uid/gid, parse_size (and ValueError), set_error, debug,
# probe's argument checking, and shutdown, which makes the server exit;
# then disconnect, parse_probability and parse_delay through
# tests/lang/server-calls.sh.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh
[ -f "$abs_top_builddir/plugins/python/.libs/nbdkit-python-plugin.so" ] ||
  { echo "$0: SKIP: the python plugin is not built"; exit 77; }

# --- the names and constants, against Debian's module -----------------
cat > "$tmpdir/names.py" <<'PY'
import os
import nbdkit
with open(os.environ["OUT"], "w") as f:
    for name in sorted(dir(nbdkit)):
        if not name.startswith("_"):
            v = getattr(nbdkit, name)
            f.write("%s %s\n" % (name, v if isinstance(v, int) else "function"))
def open(r): return 1
def get_size(h): return 0
def pread(h, b, o, f): pass
API_VERSION = 2
PY
OUT="$tmpdir/names.ours" t "$NBDKIT" python "$tmpdir/names.py" --dump-plugin \
  > /dev/null
if [ -x /usr/bin/nbdkit ] &&
   [ -f "$debian_plugindir/nbdkit-python-plugin.so" ]; then
  OUT="$tmpdir/names.debian" t /usr/bin/nbdkit python "$tmpdir/names.py" \
    --dump-plugin > /dev/null
  # Every line of Debian's (name and value) is in ours.
  missing="$(comm -23 "$tmpdir/names.debian" "$tmpdir/names.ours")"
  [ -z "$missing" ] || fail "names of Debian's nbdkit module missing: $missing"
fi
for n in is_tls peer_name peer_pid peer_uid peer_gid disconnect probe \
  parse_probability parse_delay; do
  grep -qx "$n function" "$tmpdir/names.ours" || fail "no nbdkit.$n"
done

# --- the helpers, in a connection ---------------------------------------
cat > "$tmpdir/module.py" <<'PY'
import errno
import os
import nbdkit

API_VERSION = 2
out = open(os.environ["OUT"], "a", buffering=1)

def note(*w):
    out.write(" ".join(str(x) for x in w) + "\n")

def open(readonly):
    note("export_name", ascii(nbdkit.export_name()))
    note("is_tls", nbdkit.is_tls())
    note("peer_name", nbdkit.peer_name())
    for f in (nbdkit.peer_pid, nbdkit.peer_uid, nbdkit.peer_gid):
        try:
            note(f.__name__, f())
        except RuntimeError as e:
            note(f.__name__, "RuntimeError")
    note("parse_size", nbdkit.parse_size("1M"), nbdkit.parse_size("4k"))
    try:
        nbdkit.parse_size("lots")
    except ValueError as e:
        note("parse_size ValueError")
    try:
        nbdkit.probe(1, 2, 3)
    except TypeError:
        note("probe TypeError")
    nbdkit.probe("ok", 1, 2)
    nbdkit.probe("ok", text="t")
    nbdkit.debug("debug from the script")
    return 1

def get_size(h):
    return 1024 * 1024

def pread(h, buf, offset, flags):
    buf[:] = bytes(len(buf))

def close(h):
    if nbdkit.export_name() == "stop":
        note("shutdown")
        nbdkit.shutdown()
PY

export OUT="$tmpdir/module.out"
start_server -v python "$tmpdir/module.py" 2> "$tmpdir/server.err"
t nbdsh -u "nbd+unix:///%C3%A9t%C3%A9%FF?socket=$sock" -c 'h.pread(512, 0)'
client_uid="$(id -u)"
cat "$OUT"
grep -qx "export_name '\\\\xe9t\\\\xe9\\\\udcff'" "$OUT" ||
  fail "export_name: not the name sent (with its non-UTF-8 byte)"
grep -qx "is_tls False" "$OUT" || fail "is_tls"
grep -qx "peer_name " "$OUT" || fail "peer_name over a Unix socket: not ''"
grep -qE "^peer_pid [1-9][0-9]*\$" "$OUT" || fail "peer_pid"
grep -qx "peer_uid $client_uid" "$OUT" || fail "peer_uid"
grep -qx "parse_size 1048576 4096" "$OUT" || fail "parse_size"
grep -qx "parse_size ValueError" "$OUT" || fail "parse_size: no ValueError"
grep -qx "probe TypeError" "$OUT" || fail "probe: no TypeError"
grep -q "debug: debug from the script" "$tmpdir/server.err" ||
  fail "nbdkit.debug: not in the -v log"

# shutdown() from close: the server exits by itself.
t nbdsh -u "nbd+unix:///stop?socket=$sock" -c 'h.pread(512, 0)'
grep -qx shutdown "$OUT" || fail "close did not run"
wait_for 10 ! -S "$sock" || fail "nbdkit.shutdown: the server did not exit"
server_pid=

# peer_name over TCP.
: > "$OUT"
start_tcp_server python "$tmpdir/module.py"
t nbdsh -u "nbd://127.0.0.1:$port" -c 'h.pread(512, 0)'
grep -qE "^peer_name \('127\.0\.0\.1', [0-9]+\)\$" "$OUT" ||
  fail "peer_name over TCP: $(grep peer_name "$OUT")"
stop_server

# disconnect, parse_probability and parse_delay (nbdkit 1.34..1.40), as
# tests/lang/server-calls.sh drives them.
source "$(dirname "$0")/lang/server-calls.sh"
cat > "$tmpdir/calls.py" <<'PY'
import nbdkit

API_VERSION = 2
THREAD_MODEL = nbdkit.THREAD_MODEL_PARALLEL
p, delay = 0.0, (0, 0)

def config(key, value):
    global p, delay
    if key == "prob":
        p = nbdkit.parse_probability("prob", value)
    elif key == "delay":
        delay = nbdkit.parse_delay("delay", value)
    else:
        raise ValueError("unknown parameter " + key)

def open(readonly):
    return 1

def get_size(h):
    return 65536

def pread(h, buf, offset, flags):
    if offset == 4096:
        nbdkit.disconnect(True)
    elif offset == 8192:
        nbdkit.disconnect(False)
    line = b""
    if offset == 12288:
        line = b"%d %d %d" % (round(p * 1000000), delay[0], delay[1])
    buf[:] = line.ljust(len(buf))[:len(buf)]
PY
server_calls_check python "$tmpdir/calls.py"
