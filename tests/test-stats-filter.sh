#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The stats filter's summary matches Debian's nbdkit 1.32 line for line
# for the same client (times and rates aside): counts, bytes, the order
# of kinds, size groups, alignment lines, the "N+ bit-aligned" cut and
# statsthreshold.  One known difference: Debian's "other sizes" line
# gives the bytes of all requests, not of the other sizes (its read
# line below says 448.00 KiB for a 1-byte read); ours gives the bytes
# of the requests it counts, checked apart.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo
ref_nbdkit=/usr/bin/nbdkit
requires test -x "$ref_nbdkit"

cat > "$tmpdir/mixed" <<'SH'
#!/bin/sh
set -e
nbdinfo --map "$1" > /dev/null
nbdsh -u "$1" -c '
for i in range(10):
    h.pwrite(b"x" * 4096, i * 8192)
for i in range(7):
    h.pread(65536, i * 65536 + 512)
h.pread(1, 3)
h.zero(1 << 20, 0)
h.trim(4096, 4 << 20)
h.flush()
h.cache(4096, 0)
'
SH
cat > "$tmpdir/aligned" <<'SH'
#!/bin/sh
set -e
nbdsh -u "$1" -c '
for i in range(40):
    h.pwrite(b"x" * 4096, (i + 1) << 12)
'
SH
chmod +x "$tmpdir/mixed" "$tmpdir/aligned"

# Times and rates vary from run to run; Debian's "other sizes" bytes
# are wrong (see above).
normalize ()
{
  sed -E 's/[0-9]+\.[0-9]{6} s/T s/
          s/, [^,]*\/s op, [^,]*\/s total$/, RATES/
          s/, [^,]*\/s$/, RATE/
          s/^(    other sizes: .* reqs), .* total\)$/\1, BYTES)/' "$1"
}

failures=0
same ()
{
  local label="$1" client="$2" s n
  shift 2
  for s in "$NBDKIT" "$ref_nbdkit"; do
    n=ours; [ "$s" = "$ref_nbdkit" ] && n=ref
    rm -f "$tmpdir/stats"
    t "$s" -U - --filter=stats memory 64M statsfile="$tmpdir/stats" "$@" \
      --run "$tmpdir/$client \"\$uri\"" > /dev/null ||
      fail "$label: $n server failed (status $?)"
    cp "$tmpdir/stats" "$tmpdir/$label.$n.raw"
    normalize "$tmpdir/stats" > "$tmpdir/$label.$n"
  done
  if ! diff -u "$tmpdir/$label.ref" "$tmpdir/$label.ours"; then
    echo "$0: $label: our summary differs from Debian's (above); as written:" >&2
    head -n 60 "$tmpdir/$label.ref.raw" "$tmpdir/$label.ours.raw" >&2
    failures=$((failures + 1))
  fi
}

same default mixed
same all mixed statsthreshold=100
same none mixed statsthreshold=0
same aligned aligned
same aligned-50 aligned statsthreshold=50
[ "$failures" -eq 0 ] || fail "$failures summaries differ from Debian's"
cat "$tmpdir/default.ours.raw"

# What the comparison leaves out: our own numbers.
grep -qx 'total: 22 ops, [0-9.]* s, 1.48 MiB, .*/s' "$tmpdir/default.ours.raw" ||
  fail "wrong total line"
grep -qx '    other sizes: 12.5% (1 reqs, 1 bytes total)' \
  "$tmpdir/default.ours.raw" || fail "other sizes: wrong bytes"
grep -qx '         17+ bit-aligned:  2.5% (1)' "$tmpdir/aligned.ours.raw" ||
  fail "no 17+ line"

# statsappend keeps what was there.
echo "earlier" > "$tmpdir/kept"
t "$NBDKIT" -U - --filter=stats memory 1M statsfile="$tmpdir/kept" \
  statsappend=true --run true || fail "statsappend run failed"
[ "$(head -1 "$tmpdir/kept")" = earlier ] && grep -q '^total: 0 ops' "$tmpdir/kept" ||
  { cat "$tmpdir/kept"; fail "statsappend=true did not append"; }

# Bad parameters: exit 1 and one line naming the parameter.
bad ()
{
  refuses "$1" --filter=stats memory 1M "${@:2}" ||
    fail "${*:2}: not refused with /$1/"
}
bad '^nbdkit: stats: error: statsfile=FILE is required$'
bad '^nbdkit: stats: error: statsthreshold: must be a percentage' \
  statsfile="$tmpdir/s" statsthreshold=101
bad '^nbdkit: stats: error: statsthreshold: could not parse number' \
  statsfile="$tmpdir/s" statsthreshold=lots
bad '^nbdkit: stats: error: statsfile: open: .*/no/dir/s: No such file' \
  statsfile="$tmpdir/no/dir/s"
