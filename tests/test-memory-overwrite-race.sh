#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The memory plugin replaces a stored page with the page a 1 MiB
# overwrite was received into; the page it replaced may still be in a
# reader's hands, so it must not be lent to another write until no
# reader can hold it.  Three clients for a few seconds: one overwrites
# region A (4 MiB) with bytes from a-t, one overwrites region B (the
# next 4 MiB) with bytes from B-U, and one reads region A in 1 MiB reads
# (sent straight from the stored pages).  Every byte the reader gets
# must be one of A's: a byte of B's in A would be B's write landing in a
# page A's reader was still sending.  Then the regions read back as
# their last writes, page by page uniform.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

secs=3
start_server memory 64M

t nbdsh -u "$uri" -c '
MiB = 1 << 20
h.pwrite(b"a" * (4 * MiB), 0)
h.pwrite(b"B" * (4 * MiB), 4 * MiB)
'

# writer BASE FIRST: overwrite the 4 MiB at BASE MiB for $secs seconds,
# pass I writing byte FIRST + I % 20; prints the last pass's byte.
writer ()
{
  t nbdsh -u "$uri" -c "
import time
MiB = 1 << 20
end = time.monotonic() + $secs
i = 0
while time.monotonic() < end and i < 100000:
    for k in range(4):
        h.pwrite(bytes([$2 + i % 20]) * MiB, ($1 + k) * MiB)
    i += 1
print($2 + (i - 1) % 20)
"
}

writer 0 "ord('a')" > "$tmpdir/a.last" &
wa=$!
writer 4 "ord('B')" > "$tmpdir/b.last" &
wb=$!
t nbdsh -u "$uri" -c "
import time
MiB = 1 << 20
alpha = bytes(range(ord('a'), ord('a') + 20))
end = time.monotonic() + $secs
reads = bad = 0
while time.monotonic() < end and reads < 100000:
    k = reads % 4
    d = h.pread(MiB, k * MiB)
    reads += 1
    if d.translate(None, alpha):
        for p in range(0, MiB, 4096):
            if d[p:p + 4096].translate(None, alpha):
                bad += 1
                if bad <= 4:
                    print('page at', k * MiB + p, 'holds', sorted(set(d[p:p + 4096])))
print(reads, 'reads of region A,', bad, 'pages with bytes not from its writer')
assert bad == 0
" || fail "a reader of region A got bytes written to region B"
wait "$wa" || fail "the writer of region A failed"
wait "$wb" || fail "the writer of region B failed"

a_last="$(cat "$tmpdir/a.last")"
b_last="$(cat "$tmpdir/b.last")"
t nbdsh -u "$uri" -c "
MiB = 1 << 20
assert h.pread(4 * MiB, 0) == bytes([$a_last]) * (4 * MiB), 'region A'
assert h.pread(4 * MiB, 4 * MiB) == bytes([$b_last]) * (4 * MiB), 'region B'
" || fail "the regions do not hold their last writes"
echo "region A held only its own bytes; both regions hold their last writes"
