#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The lzip filter's probes under bpftrace, with the arguments lzip
# --list -vv gives: lzip_member_decompress (member, compressed size,
# uncompressed size) for each member a read decompresses, lzip_cache_hit
# (member, uncompressed size) for each found in the cache, in the order
# a client's reads need them, a two-member cache evicting the least
# recently used member.
# The probes that fire during a request carry its connection id and
# cookie first: the tracer prints only the lines where both are set.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/compress-filters.sh"
requires_tracer nbdsh lzip

so="$(filter_so lzip)"
make_sample "$tmpdir/data" 1000000 6
lzip -c -b 100KiB "$tmpdir/data" > "$tmpdir/data.lz"
# member data_pos data_size member_pos member_size, one line a member.
lzip --list -vv "$tmpdir/data.lz" |
  awk 'NF == 5 && $1 ~ /^[0-9]+$/' > "$tmpdir/members"
[ "$(wc -l < "$tmpdir/members")" -ge 4 ] || fail "too few members"
field () { awk -v m="$1" -v c="$2" '$1 == m { print $c }' "$tmpdir/members"; }
u1=$(field 1 3) u2=$(field 2 3) u4=$(field 4 3)
c1=$(field 1 5) c2=$(field 2 5) c4=$(field 4 5)
p4=$(field 4 2)

start_server --filter=lzip file "$tmpdir/data.lz" lzip-max-depth=2
trace_start "$tmpdir/trace" "
usdt:$so:nbdkit:lzip_member_decompress /arg0 > 0 && arg1 > 0/ {
  printf(\"dec %d %d %d\\n\", arg2, arg3, arg4); }
usdt:$so:nbdkit:lzip_cache_hit /arg0 > 0 && arg1 > 0/ {
  printf(\"hit %d %d\\n\", arg2, arg3); }"
t nbdsh -u "$uri" -c - <<PY
data = open("$tmpdir/data", "rb").read()
for off, n in [(0, 512), (1000, 512), ($u1 - 50, 100), (0, 10),
               ($p4, 10), (5, 10), ($u1 + 5, 10), ($p4 + 5, 10)]:
    assert h.pread(n, off) == data[off:off + n], off
PY
trace_stop

cat > "$tmpdir/expected" <<EOF2
dec 1 $c1 $u1
hit 1 $u1
hit 1 $u1
dec 2 $c2 $u2
hit 1 $u1
dec 4 $c4 $u4
hit 1 $u1
dec 2 $c2 $u2
dec 4 $c4 $u4
EOF2
grep -E '^(dec|hit) ' "$tmpdir/trace" > "$tmpdir/got" || :
diff -u "$tmpdir/expected" "$tmpdir/got" ||
  fail "lzip probes: unexpected sequence" \
    "(trace errors: $(cat "$tmpdir/trace.err"))"
