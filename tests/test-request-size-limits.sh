#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The server's limits on request sizes are nbdkit's: a read or write of
# up to 64 MiB is served; a longer one gets ENOMEM and the connection
# goes on (a write's payload is read and thrown away), except a write
# payload over 128 MiB, after which the server hangs up without a
# reply; trim, write zeroes, cache and block status of 200 MiB are
# served.  A read above the maximum block size a filter advertises
# reaches the filter: blocksize-policy's error policy answers EINVAL,
# its allow policy lets it through.  The same client runs against
# Debian's nbdkit, which must print the same.  (The server used to
# refuse everything over 32 MiB, or over the advertised maximum, with
# EOVERFLOW.)
source "$(dirname "$0")/functions.sh"
requires test -x /usr/bin/python3
requires_cmd nbdsh

cat > "$tmpdir/client.py" <<'PY'
# client.py HOSTILE-CLIENT SOCKET: one line per request, what came back.
import importlib.util, random, sys
spec = importlib.util.spec_from_file_location("hc", sys.argv[1])
hc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hc)
MiB = hc.MiB
head = random.Random(1).randbytes(MiB)

def conn():
    return hc.Conn(sys.argv[2], 20).open("structured", meta=True)

c = conn()
c.write(0, head)
for typ, n in ((hc.CMD_READ, 64 * MiB), (hc.CMD_READ, 64 * MiB + 1),
               (hc.CMD_WRITE, 64 * MiB + 1), (hc.CMD_WRITE, 128 * MiB),
               (hc.CMD_WRITE, 128 * MiB + 1), (hc.CMD_TRIM, 200 * MiB),
               (hc.CMD_ZERO, 200 * MiB), (hc.CMD_CACHE, 200 * MiB),
               (hc.CMD_BS, 200 * MiB)):
    what = "%s %d:" % (hc.CMD_NAMES[typ], n)
    try:
        if typ == hc.CMD_WRITE:
            c.send(c.header(typ, 0, n, 0, 7))
            c.try_send(b"\xee" * n)
        else:
            c.request(typ, 0 if typ != hc.CMD_TRIM else 2 * MiB, n, 0, 7)
        r = c.reply(hc.Req(typ, 0, n))
    except hc.ServerClosed:
        print(what, "the server hung up without a reply")
        c.close()
        c = conn()
        continue
    print(what, hc.err_name(r.error))
    if r.error:
        kept = c.read(0, MiB) == head
        print(what, "connection kept, data intact" if kept else "DATA CHANGED")
c.disc()
PY

run_client ()
{
  start_server memory 256M
  t /usr/bin/python3 "$tmpdir/client.py" "$srcdir/hostile-client.py" "$sock" \
    > "$1" || fail "the client failed against $NBDKIT"
  stop_server
  cat "$1"
}

cat > "$tmpdir/expected" <<'EOF'
read 67108864: success
read 67108865: ENOMEM
read 67108865: connection kept, data intact
write 67108865: ENOMEM
write 67108865: connection kept, data intact
write 134217728: ENOMEM
write 134217728: connection kept, data intact
write 134217729: the server hung up without a reply
trim 209715200: success
zero 209715200: success
cache 209715200: success
block_status 209715200: success
EOF
run_client "$tmpdir/ours"
diff -u "$tmpdir/expected" "$tmpdir/ours" || fail "request size limits differ"

# The error policy of blocksize-policy sees a read above its maximum.
policy ()
{
  t "$1" -U - --filter=blocksize-policy memory 16M blocksize-maximum=1M \
    blocksize-error-policy="$2" --run 'nbdsh -u "$uri" -c "
h.set_strict_mode(0)
try:
    h.pread(2 * 1024 * 1024, 0)
    print(\"2M read: ok\")
except nbd.Error as e:
    print(\"2M read:\", e.errno)
"'
}
[ "$(policy "$NBDKIT" error)" = "2M read: EINVAL" ] ||
  fail "blocksize-policy's error policy did not refuse a read over its maximum"
[ "$(policy "$NBDKIT" allow)" = "2M read: ok" ] ||
  fail "a read over the advertised maximum did not reach the plugin"
# The issue's example: a 64 MiB read is served.
[ "$(t "$NBDKIT" -U - memory 128M --run \
      'nbdsh -u "$uri" -c "h.pread(64*1024*1024, 0); print(\"ok\")"')" = ok ] ||
  fail "a 64 MiB read was refused"

# Debian's nbdkit answers the same.
if [ -x /usr/bin/nbdkit ]; then
  NBDKIT=/usr/bin/nbdkit run_client "$tmpdir/ref"
  diff -u "$tmpdir/ref" "$tmpdir/ours" || fail "ours differs from nbdkit"
  [ "$(policy /usr/bin/nbdkit error)" = "2M read: EINVAL" ] ||
    fail "Debian's nbdkit answers the error policy otherwise (fix the test)"
fi
