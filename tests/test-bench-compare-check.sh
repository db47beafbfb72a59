#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# bench/compare.sh's regression mode and its current-standing table.
# --check PERCENT must exit 3 when ours falls behind a peer by more than
# the margin: our server is slowed on purpose with the delay filter
# (--ours-args, --ours-params: 5 ms per read, so at QD32 it cannot pass 6400 IOPS,
# far below nbdkit's), and the row must say BEHIND.  The same row
# without the delay and with a wide margin must pass (exit 0, "ok").
# Bad choices are refused with exit 2; --write-results is refused in a
# partial run, so that a partial table never replaces the full one.
# bench/current-standing.py must turn a Peers section's raw samples
# (and the TLS sections', when there) into the table that opens
# RESULTS.md, with both transports, each peer's ratio, the date and
# commit; write_section ... top must put a
# new section before the first "## " one.
source "$(dirname "$0")/functions.sh"
requires_cmd fio python3
[ -x /usr/bin/nbdkit ] || { echo "$0: SKIP: Debian's nbdkit (the peer) is not installed"; exit 77; }

bench="$abs_top_srcdir/bench/compare.sh"
tracing_lock        # it loads both cores: run it alone
common=(--rounds 1 --runtime 1 --workloads randread-4k --transports unix
        --servers ours,nbdkit --build "$abs_top_builddir")

status=0
TMPDIR="$tmpdir" timeout -k 5 90 "$bench" --check 10 "${common[@]}" \
  --ours-args --filter=delay --ours-params rdelay=5ms >"$tmpdir/slow.out" \
  2>"$tmpdir/slow.err" || status=$?
cat "$tmpdir/slow.out"
[ "$status" -eq 3 ] || { cat "$tmpdir/slow.err"; fail "a slowed server: exit $status, not 3"; }
grep -Eq '^\| unix \| 4K randread QD32 \| nbdkit \| .* \| \*\*BEHIND\*\* \|$' \
  "$tmpdir/slow.out" || fail "no BEHIND verdict for the slowed row"
grep -q "row(s) fell more than 10% behind" "$tmpdir/slow.err" ||
  fail "no message saying why it failed"
grep -q 'ours: BUILD/nbdkit .*--filter=delay memory [0-9]*[MG] rdelay=5ms' "$tmpdir/slow.out" ||
  fail "the report does not show our extra arguments"

status=0
TMPDIR="$tmpdir" timeout -k 5 90 "$bench" --check 99 "${common[@]}" \
  >"$tmpdir/fast.out" 2>"$tmpdir/fast.err" || status=$?
[ "$status" -eq 0 ] || { cat "$tmpdir/fast.out" "$tmpdir/fast.err"; fail "an unslowed server failed the 99% check: exit $status"; }
grep -Eq '^\| unix \| 4K randread QD32 \| nbdkit \| .* \| ok \|$' \
  "$tmpdir/fast.out" || fail "no ok verdict"

expect_status ()
{
  local want="$1" got=0
  shift
  TMPDIR="$tmpdir" timeout 30 "$bench" "$@" >/dev/null 2>"$tmpdir/err" || got=$?
  [ "$got" -eq "$want" ] || fail "compare.sh $*: exit $got, not $want"
  cat "$tmpdir/err"
}
expect_status 2 --check 5 --workloads nosuch --build "$abs_top_builddir"
grep -q 'unknown or unavailable "nosuch"' "$tmpdir/err" || fail "no reason for --workloads nosuch"
expect_status 2 --transports udp --build "$abs_top_builddir"
expect_status 1 --check 5 --write-results --build "$abs_top_builddir"
grep -q -- '--write-results needs a full run' "$tmpdir/err" || fail "no reason for a partial --write-results"
expect_status 1 --check 100 --build "$abs_top_builddir"

# The current standing, from a Peers section (the one in RESULTS.md).
python3 "$abs_top_srcdir/bench/current-standing.py" \
  "$abs_top_srcdir/bench/RESULTS.md" >"$tmpdir/current.md" ||
  fail "current-standing.py failed on bench/RESULTS.md"
head -1 "$tmpdir/current.md" | grep -qx '## Current standing' || fail "no title"
grep -Eq '^- "Peers": [0-9-]+ [0-9:]+ UTC, commit [0-9a-f]{7}' \
  "$tmpdir/current.md" || fail "no date and commit"
for tr in Unix TCP; do
  grep -Eq "^\| $tr \| 4K random read QD32 \| [0-9]+ IOPS \| [0-9.]+ \| [0-9]+ \| (\*\*)?[0-9]+\.[0-9]{2}" \
    "$tmpdir/current.md" || fail "no $tr 4K random read row with nbdkit's ratio"
done
# The TLS sections' rows follow, where RESULTS.md has them.
for t in PSK X.509; do
  if grep -qF "## Peers over TLS ($t)" "$abs_top_srcdir/bench/RESULTS.md"; then
    grep -Eq "^\| TLS $t, (Unix|TCP) \| 1M sequential read QD8 \| [0-9]+ MiB/s \|" \
      "$tmpdir/current.md" || fail "no TLS $t rows in the current standing"
  fi
done
# It must agree with the Peers table: recompute one ratio from the
# Peers section's own medians.
ours="$(grep -m1 -E '^\| ours \| 4K randread QD32 \|' "$abs_top_srcdir/bench/RESULTS.md" | awk -F'|' '{ split($4, a, " "); print a[1] }')"
theirs="$(grep -m1 -E '^\| nbdkit \| 4K randread QD32 \|' "$abs_top_srcdir/bench/RESULTS.md" | awk -F'|' '{ split($4, a, " "); print a[1] }')"
want="$(python3 -c "print('%.2f' % ($ours / $theirs))")"
grep -Eq "^\| Unix \| 4K random read QD32 \| $ours IOPS \| [0-9.]+ \| $theirs \| (\*\*)?$want" \
  "$tmpdir/current.md" || fail "Unix 4K row does not match the Peers table ($ours / $theirs = $want)"
# No Peers section: a clear failure.
printf '# Benchmark results\n\n## Filters\n\nx\n' >"$tmpdir/empty.md"
expect_fail python3 "$abs_top_srcdir/bench/current-standing.py" "$tmpdir/empty.md" 2>/dev/null

# write_section ... top puts a new section first, replaces it in place.
cp "$tmpdir/empty.md" "$tmpdir/RESULTS.md"
printf '## Current standing\n\none\n' >"$tmpdir/s1.md"
printf '## Current standing\n\ntwo\n' >"$tmpdir/s2.md"
( mkdir -p "$tmpdir/tree/bench"; cp "$tmpdir/RESULTS.md" "$tmpdir/tree/bench/"
  srcdir="$tmpdir/tree"
  source "$abs_top_srcdir/bench/lib.sh"
  write_section "Current standing" "$tmpdir/s1.md" top 2>/dev/null
  write_section "Current standing" "$tmpdir/s2.md" top 2>/dev/null )
printf '# Benchmark results\n\n## Current standing\n\ntwo\n\n## Filters\n\nx\n' >"$tmpdir/want.md"
cmp "$tmpdir/want.md" "$tmpdir/tree/bench/RESULTS.md" ||
  { cat "$tmpdir/tree/bench/RESULTS.md"; fail "write_section top put the section in the wrong place"; }
