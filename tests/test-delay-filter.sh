#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=delay: each delayed command takes at least its delay (no
# upper bound is asserted: the machine may be slow), undelayed ones are
# not held up by others, fast zeroes fail at once when
# delay-fast-zero=false, and the bytes are those of the plugin (same
# as Debian's nbdkit).  Bad values exit 1 naming the parameter.
source "$(dirname "$0")/functions.sh"
source "$srcdir/debian-filters.sh"
requires_cmd nbdsh

pattern_disk $((2 * 1024 * 1024))
compare_own "delay read" read --filter=delay file "$disk" rdelay=5ms \
  delay-extents=1ms
compare_own "delay write" write --filter=delay file "$disk" wdelay=2ms \
  delay-cache=1ms delay-open=10ms delay-close=10ms
finish

# --- Each delay is at least as long as asked --------------------------------
start_server --filter=delay memory 1M rdelay=200ms delay-write=300ms \
  delay-zero=1 delay-fast-zero=false delay-trim=100ms delay-cache=100ms
t nbdsh -u "$uri" -c - <<'PY'
import time
def took(fn):
    t0 = time.monotonic()
    fn()
    return time.monotonic() - t0
d = took(lambda: [h.pread(512, 0) for i in range(3)])
assert d >= 0.6, "3 reads at 200ms took %g s" % d
d = took(lambda: h.pwrite(b"x" * 512, 0))
assert d >= 0.3, "write at 300ms took %g s" % d
d = took(lambda: h.trim(4096, 0))
assert d >= 0.1, "trim at 100ms took %g s" % d
if h.can_cache():
    d = took(lambda: h.cache(4096, 0))
    assert d >= 0.1, "cache at 100ms took %g s" % d
# Flush is never delayed, nor fast zeroes under delay-fast-zero=false:
# they fail at once (well under the 1 s zero delay).
assert h.can_fast_zero()
t0 = time.monotonic()
try:
    h.zero(4096, 0, nbd.CMD_FLAG_FAST_ZERO)
except nbd.Error as e:
    assert e.errno == "ENOTSUP", e.errno
else:
    raise AssertionError("fast zero did not fail")
h.flush()
d = time.monotonic() - t0
assert d < 0.9, "fast zero and flush took %g s" % d
# A plain zero waits its second.
d = took(lambda: h.zero(4096, 0))
assert d >= 1, "zero at 1s took %g s" % d
assert h.pread(1, 0) == b"\0"
PY
stop_server

# --- Open and close ---------------------------------------------------------
start_server --filter=delay memory 1M delay-open=400ms delay-close=300ms
t nbdsh -c - <<PY
import time
t0 = time.monotonic()
h.connect_uri("$uri")
d = time.monotonic() - t0
assert d >= 0.4, "connect with delay-open=400ms took %g s" % d
h.shutdown()
PY
# The close delay is seen by the next client only indirectly; time a
# whole connection instead: open + close >= 0.7 s.
s=$(date +%s%N)
t nbdsh -u "$uri" -c 'h.shutdown()'
e=$(date +%s%N)
ms=$(( (e - s) / 1000000 ))
echo "open+close: $ms ms"
[ "$ms" -ge 400 ] || fail "a connection with delay-open=400ms took $ms ms"
stop_server

# delay-fast-zero=true (the default): fast zeroes wait like other zeroes.
start_server --filter=delay memory 1M delay-zero=300ms
t nbdsh -u "$uri" -c - <<'PY'
import time
t0 = time.monotonic()
try:
    h.zero(4096, 0, nbd.CMD_FLAG_FAST_ZERO)
except nbd.Error as e:
    pass
d = time.monotonic() - t0
assert d >= 0.3, "fast zero under delay-fast-zero=true took %g s" % d
PY
stop_server

# --- Bad parameters: exit 1, one line naming the parameter -------------------
bad ()
{
  refuses "${1%%=*}" --filter=delay memory 1M "$@" ||
    fail "$*: not refused with one line naming ${1%%=*}"
}
bad rdelay=abc
bad delay-read=-1
bad wdelay=10s
bad delay-zero=ms
bad delay-trim=1.5
bad delay-open=5000000
bad delay-close=99999999999ms
bad delay-fast-zero=maybe
bad delay-flush=1
