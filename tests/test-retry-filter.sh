#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=retry over a plugin that fails its first N calls (flaky
# plugin): a failed request is retried after reopening the plugin, the
# client sees success once the plugin recovers, waits are at least
# retry-delay (doubling with retry-exponential), retries= bounds the
# attempts, and retry-readonly reopens read-only.  Without faults the
# bytes are the plugin's (same as Debian's nbdkit).  Bad values exit 1.
source "$(dirname "$0")/functions.sh"
source "$srcdir/debian-filters.sh"
requires_cmd nbdsh
flaky="$abs_builddir/.libs/flaky-plugin.so"
[ -f "$flaky" ] || fail "$flaky was not built"

pattern_disk $((2 * 1024 * 1024))
compare_own "retry read" read --filter=retry file "$disk"
compare_own "retry write" write --filter=retry file "$disk" retries=1
finish

log="$tmpdir/log"

# --- Two failures, then success: two reopens, 1 s apart ---------------------
rm -f "$log"
start_server --filter=retry "$flaky" fail=2 log="$log" retry-delay=1 \
  retry-exponential=no
t nbdsh -u "$uri" -c - <<'PY'
import time
t0 = time.monotonic()
h.pwrite(b"survived", 4096)
d = time.monotonic() - t0
assert d >= 2, "two retries at 1 s took %g s" % d
assert h.pread(8, 4096) == b"survived"
PY
stop_server
cat "$log"
printf '%s\n' "open ro=0" "fail pwrite" "open ro=0" "fail pwrite" \
  "open ro=0" "pwrite" "pread" > "$tmpdir/expected"
diff -u "$tmpdir/expected" "$log" || fail "unexpected plugin calls"

# --- Exponential back-off: 1 s then 2 s -------------------------------------
rm -f "$log"
start_server --filter=retry "$flaky" fail=2 log="$log" retry-delay=1
t nbdsh -u "$uri" -c - <<'PY'
import time
t0 = time.monotonic()
h.flush()
d = time.monotonic() - t0
assert d >= 3, "retries at 1 s and 2 s took %g s" % d
PY
stop_server

# --- retries= bounds the attempts of one request ----------------------------
rm -f "$log"
start_server --filter=retry "$flaky" fail=3 log="$log" retries=1 \
  retry-delay=1
t nbdsh -u "$uri" -c - <<'PY'
try:
    h.pread(512, 0)
except nbd.Error as e:
    assert e.errno == "EIO", e.errno
else:
    raise AssertionError("read succeeded with 3 failures and 1 retry")
# The next request gets its own retry: fails once more, then works.
assert h.pread(512, 0) == bytes(512)
PY
stop_server
[ "$(grep -c '^open' "$log")" -eq 3 ] || fail "expected 3 opens: $(cat "$log")"

# --- retries=0: no retry at all ---------------------------------------------
rm -f "$log"
start_server --filter=retry "$flaky" fail=1 log="$log" retries=0
t nbdsh -u "$uri" -c - <<'PY'
try:
    h.trim(4096, 0)
except nbd.Error as e:
    assert e.errno == "EIO", e.errno
else:
    raise AssertionError("trim succeeded")
h.trim(4096, 0)
PY
stop_server
[ "$(grep -c '^open' "$log")" -eq 1 ] || fail "retries=0 reopened"

# --- retry-readonly: after a failure the plugin is reopened read-only -------
rm -f "$log"
start_server --filter=retry "$flaky" fail=1 log="$log" retry-delay=1 \
  retry-readonly=yes
t nbdsh -u "$uri" -c - <<'PY'
try:
    h.pwrite(b"x" * 512, 0)
except nbd.Error as e:
    assert e.errno == "EPERM", e.errno  # EROFS travels as EPERM
else:
    raise AssertionError("write succeeded after the switch to read-only")
assert h.pread(512, 0) == bytes(512)
# A new connection opens read-write again.
h2 = nbd.NBD()
h2.connect_uri(h.get_uri())
h2.pwrite(b"y" * 512, 0)
h2.shutdown()
PY
stop_server
cat "$log"
printf '%s\n' "open ro=0" "fail pwrite" "open ro=1" "pread" "open ro=0" \
  "pwrite" > "$tmpdir/expected"
diff -u "$tmpdir/expected" "$log" || fail "unexpected plugin calls"

# --- Bad parameters: exit 1, one line naming the parameter -------------------
bad ()
{
  refuses "${1%%=*}" --filter=retry memory 1M "$@" ||
    fail "$*: not refused with one line naming ${1%%=*}"
}
bad retries=-1
bad retries=many
bad retry-delay=0
bad retry-delay=1.5
bad retry-exponential=maybe
bad retry-readonly=2
bad retry-count=3
