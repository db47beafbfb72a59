#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The text a plugin gives nbdkit_error reaches the client in the
# structured error reply (as in nbdkit 1.42): libnbd prints it in its
# debug output ("structured error server message").  A message cut in
# the middle of a UTF-8 character, or holding a control character, goes
# out only up to there; an error the server finds itself (a read past
# the end) and one after an earlier failure on the same thread carry no
# stale text; a client without structured replies gets the errno alone.
source "$(dirname "$0")/functions.sh"
requires_cmd cc gcc nbdsh

cat > "$tmpdir/e.c" <<'C'
#define NBDKIT_API_VERSION 2
#include <errno.h>
#include <string.h>
#include <nbdkit-plugin.h>
#define THREAD_MODEL NBDKIT_THREAD_MODEL_SERIALIZE_ALL_REQUESTS
static void *o (int r) { return NBDKIT_HANDLE_NOT_NEEDED; }
static int64_t s (void *h) { return 65536; }
static int
p (void *h, void *b, uint32_t n, uint64_t off, uint32_t f)
{
  if (off == 4096) {
    nbdkit_error ("the disk at %u is on fire", (unsigned) off);
    errno = EIO;
    return -1;
  }
  if (off == 8192) {
    /* 'é' then a control character: the text stops before the tab. */
    nbdkit_error ("caf\xc3\xa9 closed\tfor lunch");
    errno = ENOSPC;
    return -1;
  }
  if (off == 12288) {
    /* 253 'x' then a 3-byte character: cut to 255 bytes, mid-character. */
    char m[300];
    memset (m, 'x', 253);
    strcpy (m + 253, "\xe2\x82\xac tail");
    nbdkit_error ("%s", m);
    errno = EIO;
    return -1;
  }
  memset (b, 0, n);
  return 0;
}
static struct nbdkit_plugin plugin = {
  .name = "errmsg", .open = o, .get_size = s, .pread = p,
  .errno_is_preserved = 1,
};
NBDKIT_REGISTER_PLUGIN (plugin)
C

start_server cc "$tmpdir/e.c" 2> "$tmpdir/server.log"

cat > "$tmpdir/c.py" <<'PY'
import sys
for off in (4096, 8192, 12288, 1 << 20, 0):
    try:
        h.pread(512, off)
        print("ok", off, file=sys.stderr)
    except nbd.Error as e:
        print("err", off, e.errno, file=sys.stderr)
PY
LIBNBD_DEBUG=1 t nbdsh -u "$uri" -c - < "$tmpdir/c.py" 2> "$tmpdir/out" ||
  fail "nbdsh failed"
msgs="$(grep 'structured error server message' "$tmpdir/out" |
        sed 's/.*server message: //')"
printf '%s\n' "$msgs"
[ "$(printf '%s\n' "$msgs" | sed -n 1p)" = "the disk at 4096 is on fire" ] ||
  fail "the plugin's message did not reach the client"
[ "$(printf '%s\n' "$msgs" | sed -n 2p)" = "café closed" ] ||
  fail "message with a control character: not cut before it"
want="$(printf 'x%.0s' $(seq 253))"
[ "$(printf '%s\n' "$msgs" | sed -n 3p)" = "$want" ] ||
  fail "message cut mid-character: not cut to whole characters"
[ "$(printf '%s\n' "$msgs" | wc -l)" -eq 3 ] ||
  fail "a message was sent with an error that had none"
grep -q "err 4096 EIO" "$tmpdir/out" || fail "errno of the first error"
grep -q "err 8192 ENOSPC" "$tmpdir/out" || fail "errno of the second error"
grep -q "err 1048576 EINVAL" "$tmpdir/out" || fail "read past the end"
grep -q "ok 0" "$tmpdir/out" || fail "a good read failed"

# Without structured replies: the errno alone, the connection goes on.
out="$(t nbdsh -c '
h.set_request_structured_replies(False)
h.connect_uri("'"$uri"'")
assert not h.get_structured_replies_negotiated()
try:
    h.pread(512, 4096)
except nbd.Error as e:
    print(e.errno)
print(len(h.pread(512, 0)))')"
[ "$out" = "$(printf 'EIO\n512')" ] || fail "simple replies: $out"
