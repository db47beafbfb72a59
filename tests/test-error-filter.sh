#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=error: rate 0 fails nothing, rate 1 fails every request of
# the chosen command with the chosen errno (and leaves the data alone),
# a rate in between fails a plausible share, and error-file turns
# injection on and off.  Debian's nbdkit gives the same answers at the
# deterministic rates.  Bad values exit 1 naming the parameter.
source "$(dirname "$0")/functions.sh"
source "$srcdir/debian-filters.sh"
requires_cmd nbdsh

pattern_disk $((4 * 1024 * 1024))

# --- Same bytes as Debian's nbdkit at rates 0 and 1 -------------------------
compare_own "error rate 0" read --filter=error file "$disk" error-rate=0
compare_own "error rate 0 write" write --filter=error file "$disk" \
  error-rate=0%
compare_own "error pwrite 100%" write --filter=error file "$disk" \
  error=ENOSPC error-pwrite-rate=100%
expect_in "error pwrite 100% fails" "$ours" '^pwrite error ENOSPC$'
compare_own "error zero+trim 1" write --filter=error file "$disk" \
  error-zero=EPERM error-zero-rate=1 error-trim-rate=1 error-trim=EINVAL
expect_in "error zero fails" "$ours" '^zero error EPERM$'
expect_in "error trim fails" "$ours" '^trim error EINVAL$'
finish

# --- Each command alone, at rate 1 ------------------------------------------
cp "$disk.orig" "$disk"
start_server --filter=error file "$disk" \
  error-pread-rate=1 error-pread=ESHUTDOWN \
  error-extents-rate=100% error-extents=ENOMEM \
  error-cache-rate=1 error-cache=EIO
t nbdsh --base-allocation -u "$uri" -c - <<'PY'
def fails(fn, name):
    try:
        fn()
    except nbd.Error as e:
        assert e.errno == name, (e.errno, name)
    else:
        raise AssertionError("no error, expected " + name)
fails(lambda: h.pread(512, 0), "ESHUTDOWN")
fails(lambda: h.block_status(65536, 0, lambda *a: 0), "ENOMEM")
if h.can_cache():
    fails(lambda: h.cache(4096, 0), "EIO")
h.pwrite(b"still writable", 1000)
h.zero(4096, 8192)
h.trim(4096, 65536)
h.flush()
PY
stop_server
dd if="$disk" bs=1 skip=1000 count=14 status=none | grep -qx 'still writable' ||
  fail "a write at rate 0 did not reach the plugin"

# --- A rate in between: 400 reads at 25% ------------------------------------
# Binomial(400, 0.25): mean 100, sd 8.7; 50..150 is over 5 sd each way.
start_server --filter=error memory 1M error-rate=25%
n="$(t nbdsh -u "$uri" -c - <<'PY'
fails = 0
for i in range(400):
    try:
        h.pread(512, 512 * (i % 2048))
    except nbd.Error as e:
        assert e.errno == "EIO", e.errno
        fails += 1
print(fails)
PY
)"
stop_server
echo "25%: $n of 400 reads failed"
[ "$n" -ge 50 ] && [ "$n" -le 150 ] || fail "25%: $n of 400 reads failed"

# --- error-file turns injection on and off -----------------------------------
trigger="$tmpdir/inject"
rm -f "$trigger"
start_server --filter=error memory 1M error-rate=1 error-file="$trigger"
t nbdsh -u "$uri" -c - <<PY
import os
def reads():
    try:
        h.pread(512, 0)
        return True
    except nbd.Error as e:
        assert e.errno == "EIO", e.errno
        return False
assert reads(), "failed before the trigger file existed"
open("$trigger", "w").close()
assert not reads(), "did not fail while the trigger file existed"
assert not reads()
os.unlink("$trigger")
assert reads(), "still failing after the trigger file was removed"
PY
stop_server

# A per-command file only gates that command.
touch "$trigger"
start_server --filter=error memory 1M error-rate=1 \
  error-pwrite-file="$tmpdir/absent" error-pread-file="$trigger" \
  error-trim-rate=0 error-zero-rate=0 error-extents-rate=0 error-cache-rate=0
t nbdsh -u "$uri" -c - <<'PY'
h.pwrite(b"x" * 512, 0)
try:
    h.pread(512, 0)
except nbd.Error as e:
    assert e.errno == "EIO", e.errno
else:
    raise AssertionError("read did not fail")
PY
stop_server

# --- Bad parameters: exit 1, one line naming the parameter -------------------
bad ()
{
  refuses "${1%%=*}" --filter=error memory 1M "$@" ||
    fail "$*: not refused with one line naming ${1%%=*}"
}
bad error=EFOO
bad error-zero=eio
bad error-rate=2
bad error-rate=101%
bad error-pread-rate=abc
bad error-cache-rate=-1%
bad error-rate=nan
bad error-rate=10%%
# Unknown keys go down to the plugin, which refuses them.
bad error-flush-rate=1
bad error-preadx=EIO
