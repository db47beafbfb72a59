#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# An error a plugin completes a request with (nbdkit_async_complete,
# nbdkit-async(3)) reaches the client as the matching NBD error, for
# reads, writes, trims and zeroes, with structured and simple replies,
# and the connection goes on: the requests around it succeed.
source "$(dirname "$0")/functions.sh"
requires_cmd python3

cat > "$tmpdir/err.py" <<'PY'
import errno, nbd, sys
want = getattr(errno, sys.argv[2])
for structured in (True, False):
    h = nbd.NBD()
    h.set_request_structured_replies(structured)
    h.connect_uri(sys.argv[1])
    def fails(what, f):
        try:
            f()
        except nbd.Error as e:
            assert e.errno == sys.argv[2], "%s: %s, not %s" % (what, e, want)
            return
        raise AssertionError("%s succeeded" % what)
    fails("pread", lambda: h.pread(4096, 65536))
    fails("pwrite", lambda: h.pwrite(b"a" * 512, 65536 - 100))
    fails("trim", lambda: h.trim(65536 * 2, 0))
    fails("zero", lambda: h.zero(512, 65536 - 511))
    # Around it, the connection serves on.
    h.pwrite(b"b" * 4096, 0)
    assert h.pread(4096, 0) == b"b" * 4096
    # An error among requests in flight goes to that request alone.
    ok, bad = nbd.Buffer(512), nbd.Buffer(512)
    res = {}
    def done(name):
        def cb(err):
            res[name] = err.value
            return 1
        return cb
    h.aio_pread(ok, 0, completion=done("ok"))
    h.aio_pread(bad, 65536, completion=done("bad"))
    while h.aio_in_flight() > 0:
        h.poll(-1)
    assert res == {"ok": 0, "bad": want}, res
    h.shutdown()
print("ok")
PY

for e in EIO ENOSPC EPERM; do
  out=$(t "$NBDKIT" -U - example-async size=1M delay=5 fail=65536 \
          fail-errno=$e --run 'python3 "'"$tmpdir"'/err.py" "$uri" '$e 2>&1) ||
    fail "$e: $out"
  [ "$out" = ok ] || fail "$e: $out"
done
