#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=retry-request over a plugin that fails its first N calls
# (flaky plugin): a failed request is sent again after the delay,
# without reopening the plugin; retries are bounded; opens are retried
# unless retry-request-open=false.  Without faults the bytes are the
# plugin's (same as Debian's nbdkit).  Bad values exit 1.
source "$(dirname "$0")/functions.sh"
source "$srcdir/debian-filters.sh"
requires_cmd nbdsh nbdinfo
flaky="$abs_builddir/.libs/flaky-plugin.so"
[ -f "$flaky" ] || fail "$flaky was not built"

pattern_disk $((2 * 1024 * 1024))
compare_own "retry-request read" read --filter=retry-request file "$disk"
compare_own "retry-request write" write --filter=retry-request file "$disk"
finish

log="$tmpdir/log"

# --- Two failures, then success, without a reopen ---------------------------
rm -f "$log"
start_server --filter=retry-request "$flaky" fail=2 log="$log" \
  retry-request-delay=1
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
printf '%s\n' "open ro=0" "fail pwrite" "fail pwrite" "pwrite" "pread" \
  > "$tmpdir/expected"
diff -u "$tmpdir/expected" "$log" || fail "unexpected plugin calls"

# --- Retries are bounded per request ----------------------------------------
rm -f "$log"
start_server --filter=retry-request "$flaky" fail=3 log="$log" \
  retry-request-retries=1 retry-request-delay=1
t nbdsh -u "$uri" -c - <<'PY'
try:
    h.flush()
except nbd.Error as e:
    assert e.errno == "EIO", e.errno
else:
    raise AssertionError("flush succeeded with 3 failures and 1 retry")
h.zero(4096, 0)                   # fails once more, then works
PY
stop_server
[ "$(grep -c '^fail' "$log")" -eq 3 ] || fail "expected 3 failures"

# --- Open is retried, unless retry-request-open=false -----------------------
rm -f "$log"
start_server --filter=retry-request "$flaky" fail-open=1 log="$log" \
  retry-request-delay=1
t nbdinfo --size "$uri" > "$tmpdir/size"
stop_server
[ "$(cat "$tmpdir/size")" -eq 1048576 ] || fail "nbdinfo: $(cat "$tmpdir/size")"
printf '%s\n' "fail open" "open ro=0" > "$tmpdir/expected"
diff -u "$tmpdir/expected" "$log" || fail "open was not retried"

rm -f "$log"
start_server --filter=retry-request "$flaky" fail-open=1 log="$log" \
  retry-request-delay=1 retry-request-open=false
expect_fail t nbdinfo --size "$uri"
t nbdinfo --size "$uri"
stop_server
diff -u "$tmpdir/expected" "$log" || fail "unexpected opens"

# --- Bad parameters: exit 1, one line naming the parameter -------------------
bad ()
{
  refuses "${1%%=*}" --filter=retry-request memory 1M "$@" ||
    fail "$*: not refused with one line naming ${1%%=*}"
}
bad retry-request-retries=-1
bad retry-request-retries=1001
bad retry-request-delay=0
bad retry-request-delay=soon
bad retry-request-open=maybe
bad retry-request=1
