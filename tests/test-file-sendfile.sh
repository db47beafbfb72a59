#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Reads of more than 64 KiB from the file plugin go out with sendfile,
# from the page cache, never through the server's memory
# (common/zerocopy.h, read_fd).  Every read must return the file's
# bytes: just over 64 KiB up to 32 MiB, unaligned, up to the end of the
# file, after writes through the export, with structured replies and
# without; the server must really call sendfile for them (strace counts
# the calls), also through filters that leave reads alone (nozero,
# nocache), but not through one that reads the data itself (offset) or
# TLS, which turn it off.  A file
# that shrinks under the export: a read past its new end closes that
# connection (the reply had begun), the client gets an error, not
# data, and the server goes on serving.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh strace psktool certtool

disk="$tmpdir/disk.img"
head -c 40M /dev/urandom > "$disk"

cat > "$tmpdir/check.py" <<'PY'
import random
MiB = 1024 * 1024
size = h.get_size()
model = bytearray(open(disk, "rb").read())
assert len(model) == size == 40 * MiB, (len(model), size)
rng = random.Random(5)
# Some writes through the export first: reads must see them.
for n in (4096, 65536 + 5, 3 * MiB + 1):
    off = rng.randrange(0, size - n)
    data = rng.randbytes(n)
    h.pwrite(data, off)
    model[off:off + n] = data
reads = 0
for n in (65536 + 1, 100000, 256 * 1024 + 7, MiB, 4 * MiB + 3, 32 * MiB):
    for off in [size - n, 0] + [rng.randrange(0, size - n) for i in range(4)]:
        got = h.pread(n, off)
        assert got == model[off:off + n], (n, off)
        reads += 1
# Small reads (the copying path) in between and after.
for i in range(50):
    off = rng.randrange(0, size - 4096)
    assert h.pread(4096, off) == model[off:off + 4096], off
print("large reads:", reads)
PY

# strace -f: sendfile calls and their byte counts, from every thread.
# (LeakSanitizer cannot run under ptrace: off for these runs only.)
run_traced ()
{
  local out="$1"
  shift
  t env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
    strace -f -qq -e trace=sendfile -o "$out" "$NBDKIT" -U - "$@" \
    --run "nbdsh -c 'h.set_request_structured_replies($sr)' \
             -c \"h.connect_uri('\$uri')\" \
             -c \"disk = '$disk'\" \
             -c \"exec(open('$tmpdir/check.py').read())\""
}

for sr in True False; do
  run_traced "$tmpdir/strace-$sr" file "$disk" ||
    fail "reads differ from the file (structured replies: $sr)"
  # 36 large reads, each at least one sendfile call, every byte sent.
  calls="$(grep -c 'sendfile(' "$tmpdir/strace-$sr" || :)"
  [ "$calls" -ge 36 ] ||
    fail "only $calls sendfile calls for 36 large reads (sr $sr)"
  grep 'sendfile(' "$tmpdir/strace-$sr" | grep -v '= [0-9]' &&
    fail "a sendfile call failed (sr $sr)"
  echo "structured replies $sr: $calls sendfile calls"
done

sr=True
run_traced "$tmpdir/strace-filter" --filter=offset file "$disk" offset=0 ||
  fail "reads through a filter differ from the file"
if grep -q 'sendfile(' "$tmpdir/strace-filter"; then
  fail "sendfile used under a filter that reads the data itself"
fi
# A filter that leaves reads alone (no pread of its own) keeps the
# plugin's sendfile, stacked too.
run_traced "$tmpdir/strace-nozero" --filter=nozero --filter=nocache \
  file "$disk" || fail "reads through nozero and nocache differ from the file"
calls="$(grep -c 'sendfile(' "$tmpdir/strace-nozero" || :)"
[ "$calls" -ge 36 ] ||
  fail "only $calls sendfile calls through nozero and nocache, for 36 large reads"

# Over TLS the bytes must be encrypted, so they are read and copied as
# before: the same bytes, and no sendfile.
assert_tls_build
t "$srcdir/make-tls-files.sh" "$tmpdir/tls"
t env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
  strace -f -qq -e trace=sendfile -o "$tmpdir/strace-tls" \
  "$NBDKIT" -U - --tls=require --tls-psk="$tmpdir/tls/keys.psk" \
  file "$disk" --run "nbdsh -c 'h.set_uri_allow_local_file(True)' \
    -c \"h.connect_uri('\$uri')\" -c 'assert h.get_tls_negotiated()' \
    -c \"disk = '$disk'\" -c \"exec(open('$tmpdir/check.py').read())\"" ||
  fail "reads over TLS differ from the file"
if grep -q 'sendfile(' "$tmpdir/strace-tls"; then
  fail "sendfile used under TLS"
fi

# The file shrinks under the export.
head -c 40M /dev/urandom > "$disk"
start_server file "$disk"
t nbdsh -u "$uri" -c - <<PY || fail "the shrunken-file client failed"
size = h.get_size()
assert size == 40 * 1024 * 1024
data = open("$disk", "rb").read(1024 * 1024)
assert h.pread(1024 * 1024, 0) == data
import os
os.truncate("$disk", 20 * 1024 * 1024)
try:
    got = h.pread(1024 * 1024, 30 * 1024 * 1024)
    raise Exception("a read past the end of the shrunken file returned data")
except nbd.Error as e:
    print("the read failed as it should:", e)
PY
t nbdsh -u "$uri" -c - <<PY || fail "the server stopped serving after a file shrank"
data = open("$disk", "rb").read(1024 * 1024)
assert h.get_size() == 20 * 1024 * 1024
assert h.pread(1024 * 1024, 0) == data
PY
kill -0 "$server_pid" || fail "the server died"

# Clients that ask for 16 MiB and go away in the middle of the reply:
# the server's sendfile fails (EPIPE), it closes those connections and
# serves the next client.
t nbdsh -u "$uri" -c - <<'PY' || fail "the abandoning clients failed"
import time
for i in range(5):
    g = nbd.NBD()
    g.connect_uri(h.get_uri())
    g.aio_pread(nbd.Buffer(16 * 1024 * 1024), 0)
    time.sleep(0.05)
    del g                       # closes the socket, reply unread
PY
t nbdsh -u "$uri" -c - <<PY || fail "no service after clients left mid-reply"
data = open("$disk", "rb").read(1024 * 1024)
assert h.pread(1024 * 1024, 0) == data
PY
kill -0 "$server_pid" || fail "the server died"
