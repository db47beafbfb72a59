# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The client of the python plugin's "same script, same bytes" tests:
# run by nbdsh (-u URI -c 'exec(open(...).read())') against a server
# serving a script, it prints what a client can see of the export, one
# fact per line, so that two servers' outputs compare with diff: the
# size and flags, then (on a writable export) the effect of a fixed
# series of writes, zeroes, trims and flushes, the extents map, and a
# digest of every byte.
import hashlib

size = h.get_size()
print("size", size)
for f in ("is_read_only", "can_flush", "can_fua", "can_trim", "can_zero",
          "can_fast_zero", "can_cache", "can_multi_conn", "is_rotational",
          "can_df"):
    print(f, getattr(h, f)())
print("base:allocation", h.can_meta_context(nbd.CONTEXT_BASE_ALLOCATION))

def pattern(n, seed):
    return bytes((seed * 7 + i * 13) % 251 for i in range(n))

if not h.is_read_only() and size >= 1 << 20:
    # Aligned and unaligned writes, one straddling 64 KiB blocks.
    h.pwrite(pattern(4096, 1), 0)
    h.pwrite(pattern(100000, 2), 70000)
    h.pwrite(pattern(513, 3), size - 513)
    if h.can_fua():
        h.pwrite(pattern(8192, 4), 262144, nbd.CMD_FLAG_FUA)
    if h.can_zero():
        h.zero(65536, 131072)                      # may trim
        h.zero(1000, 80000, nbd.CMD_FLAG_NO_HOLE)  # in place
    if h.can_trim():
        h.trim(65536, 196608)
    if h.can_flush():
        h.flush()
    if h.can_cache():
        h.cache(4096, 0)
    print("writes done")

# The map, merged into runs of the same flags.
if h.can_meta_context(nbd.CONTEXT_BASE_ALLOCATION):
    runs = []
    def cb(metacontext, offset, entries, err):
        pos = offset
        for i in range(0, len(entries), 2):
            n, fl = entries[i], entries[i + 1]
            if runs and runs[-1][2] == fl and runs[-1][0] + runs[-1][1] == pos:
                runs[-1][1] += n
            else:
                runs.append([pos, n, fl])
            pos += n
    off = 0
    while off < size:
        before = runs[-1][0] + runs[-1][1] if runs else 0
        h.block_status(min(size - off, 1 << 30), off, cb)
        after = runs[-1][0] + runs[-1][1] if runs else 0
        assert after > before, "block_status made no progress"
        off = after
    for r in runs:
        print("extent", r[0], r[1], r[2])

md5 = hashlib.md5()
off = 0
while off < size:
    n = min(size - off, 1 << 20)
    md5.update(h.pread(n, off))
    off += n
print("md5", md5.hexdigest())
