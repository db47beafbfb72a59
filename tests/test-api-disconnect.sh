#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# nbdkit_disconnect and nbdkit_debug_hexdump/hexdiff (nbdkit 1.34 and
# 1.46), from a plugin compiled against our headers by the cc plugin.
# A read at 4096 calls nbdkit_disconnect (1): that read gets no reply
# (the client sees the connection drop) and close runs.  A read at 8192
# calls nbdkit_disconnect (0): that read and one already in flight are
# answered with their bytes, every request sent after is refused with
# ESHUTDOWN, and the server keeps serving new connections.  Reads at 0
# dump and diff their buffer in the -v log, under the plugin's name.
source "$(dirname "$0")/functions.sh"
requires_cmd cc gcc nbdsh

cat > "$tmpdir/p.c" <<'C'
#define NBDKIT_API_VERSION 2
#include <string.h>
#include <unistd.h>
#include <nbdkit-plugin.h>
#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL
static void *o (int r) { return NBDKIT_HANDLE_NOT_NEEDED; }
static void c (void *h) { nbdkit_debug ("discotest: close called"); }
static int64_t s (void *h) { return 65536; }
static int
p (void *h, void *b, uint32_t n, uint64_t off, uint32_t f)
{
  memset (b, 'a' + (off / 4096) % 26, n);
  if (off == 0) {
    char other[40];
    memcpy (other, "0123456789abcdefGHIJKLMNOPQRSTUVwxyz!?#@", 40);
    nbdkit_debug_hexdump (other, 40, "dump: ", 0x1000);
    memcpy (b, other, n < 40 ? n : 40);
    other[20] = '*';
    nbdkit_debug_hexdiff (b, other, n < 40 ? n : 40, "diff: ", 0);
  }
  if (off == 4096)
    nbdkit_disconnect (1);
  if (off == 8192) {
    usleep (300000);            /* the read at 12288 is in flight by now */
    nbdkit_disconnect (0);
  }
  if (off == 12288)
    usleep (600000);            /* answered after the disconnect */
  return 0;
}
static struct nbdkit_plugin plugin = {
  .name = "discotest", .open = o, .close = c, .get_size = s, .pread = p,
};
NBDKIT_REGISTER_PLUGIN (plugin)
C

log="$tmpdir/server.log"
start_server -v cc "$tmpdir/p.c" 2> "$log"

# The dump: rows aligned to 16 from the offset given, under the
# plugin's (the cc plugin's) name; the diff: equal rows once, the differing row twice.
nbdsh -u "$uri" -c 'assert h.pread(40, 0)[:10] == b"0123456789"'
sleep 0.2
grep -q 'cc[^:]*: debug: dump: 00001000: 30 31 32 33 34 35 36 37  38 39 61 62 63 64 65 66  |0123456789abcdef|' "$log" ||
  fail "hexdump: first row missing"
grep -q 'dump: 00001020: 77 78 79 7a 21 3f 23 40  *|wxyz!?#@ *|' "$log" ||
  fail "hexdump: last (short) row missing"
grep -q 'diff:  00000000: 30 31 32' "$log" || fail "hexdiff: equal row"
grep -q 'diff: -00000010: 47 48 49 4a 4b 4c 4d 4e  4f 50 51 52 53 54 55 56  |GHIJKLMNOPQRSTUV|' "$log" ||
  fail "hexdiff: '-' row"
grep -Eq 'diff: \+00000010: {13}2a {36}\|    \* {11}\|' "$log" || fail "hexdiff: '+' row"
[ "$(grep -c 'diff: [-+]00000020' "$log")" -eq 0 ] ||
  fail "hexdiff: an equal row was shown as different"

# Forced: the read gets no reply.
closes=$(grep -c 'discotest: close called' "$log")
cat > "$tmpdir/force.py" <<'PY'
try:
    h.pread(512, 4096)
    print("replied")
except nbd.Error as e:
    print("error", e.errno)
PY
out="$(t nbdsh -u "$uri" -c - < "$tmpdir/force.py")"
case "$out" in
  replied*) fail "forced disconnect: the read was answered" ;;
esac
wait_for_output "$log" 'closing.*nbdkit_disconnect|nbdkit_disconnect: cutting' "$server_pid"

# Gentle: the read that asked, and one in flight, are answered; later
# requests get ESHUTDOWN; the client's own disconnect ends it.
cat > "$tmpdir/soft.py" <<'PY'
import time
b1 = nbd.Buffer(512)
b2 = nbd.Buffer(512)
c1 = h.aio_pread(b1, 8192)
time.sleep(0.1)
c2 = h.aio_pread(b2, 12288)
while h.aio_in_flight() > 0:
    h.poll(-1)
assert b1.to_bytearray() == b"c" * 512, "first read's bytes"
assert b2.to_bytearray() == b"d" * 512, "in-flight read's bytes"
for off in (0, 16384):
    try:
        h.pread(512, off)
        raise SystemExit("request after nbdkit_disconnect(0) answered")
    except nbd.Error as e:
        assert e.errno == "ESHUTDOWN", e
print("ok")
PY
out="$(t nbdsh -u "$uri" -c - < "$tmpdir/soft.py")"
[ "$out" = ok ] || fail "gentle disconnect: $out"

# Each connection ended with close; the server goes on serving.
sleep 0.3
[ "$(grep -c 'discotest: close called' "$log")" -ge $((closes + 2)) ] ||
  fail "close was not called after each disconnect"
out="$(t nbdsh -u "$uri" -c 'print(h.pread(4, 20480))')"
[ "$out" = "bytearray(b'ffff')" ] || fail "server after disconnects: $out"
kill -0 "$server_pid" || fail "server died"
