#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The example1 plugin: a fixed 100 MiB read-only disk whose first sector
# is an MBR with one Linux partition.  Same size, flags, map and bytes
# as Debian's nbdkit example1; writes are refused; parameters refused.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo nbdcopy
source "$srcdir/debian-filters.sh"

t "$NBDKIT" -U - example1 --run 'nbdsh -u "$uri" -c -' <<'PY'
assert h.get_size() == 100 * 1024 * 1024
assert h.is_read_only()
s = h.pread(512, 0)
assert s[510:512] == b"\x55\xaa", s[510:512]
# Partition 1: type 0x83, start LBA 128, 204545 sectors.
e = s[0x1be:0x1ce]
assert e[4] == 0x83
assert int.from_bytes(e[8:12], "little") == 128
assert int.from_bytes(e[12:16], "little") == 204545
# An unaligned read across the end of the MBR, and the last bytes.
assert h.pread(4, 510) == b"\x55\xaa\0\0"
assert h.pread(4096, h.get_size() - 4096) == bytes(4096)
try:
    h.pwrite(b"x", 0)
    assert False, "write to a read-only disk succeeded"
except nbd.Error:
    pass
PY

# The partition table as other tools see it.
t "$NBDKIT" -U - example1 --run 'nbdinfo --content "$uri"' > "$tmpdir/content"
grep -q 'ID=0x83.*startsector 128, 204545 sectors' "$tmpdir/content" ||
  fail "unexpected content: $(cat "$tmpdir/content")"

# Debian's nbdkit 1.32.5 package ships no example plugins: where it has
# none, both servers load ours by path (the same comparison of what each
# server makes of one plugin).
ex1=example1
[ -f "$debian_plugindir/nbdkit-example1-plugin.so" ] ||
  ex1="$abs_top_builddir/plugins/example1/.libs/nbdkit-example1-plugin.so"
compare "example1" read "$ex1"

# No parameters are accepted.
expect_fail "$NBDKIT" -U - example1 foo=bar --run true 2> "$tmpdir/err"
grep -q "foo" "$tmpdir/err" || fail "no error naming foo: $(cat "$tmpdir/err")"

finish
