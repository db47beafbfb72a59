#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The concurrent model checker (reliability/model-stripes.py) over a
# matrix of filter stacks: four writer processes, each with its own
# connection and up to 8 requests in flight, own disjoint odd-sized
# stripes at odd offsets (some of them touching, so that stripes of
# different writers share the blocks of any layer that works in
# blocks) and do random writes, FUA writes, zeroes, trim-then-rewrite,
# flushes and read-and-compare against their own model; then one
# reader compares the whole export with the merged model, where every
# byte nobody wrote must still be the plugin's initial content.  Where
# the plugin is a file, the file itself is checked too: after the
# reader's flush it holds exactly the model inside the export, and
# outside the export (the partition table, the bytes before the
# offset and after the truncation) not one byte changed; under cow the
# file does not change at all.
#
# A layer that reads a block, patches it and writes it back (blocksize,
# cow, cache) loses a neighbour's write if two such cycles on one block
# interleave; against memory or a local file that window lasts
# microseconds, so those stacks put the delay filter (1 ms per read or
# write) under the layer, which stretches the window to where a missing
# lock shows in every run.
#
# The cache filter with writeback and reclaim has a test of its own
# (test-model-cache-reclaim.sh), which traces its evictions.
#
# The seed is printed; MODEL_SEED=N repeats a run.
source "$(dirname "$0")/../functions.sh"
requires test -x /usr/bin/python3
requires /usr/bin/python3 -c 'import nbd'
requires_cmd sfdisk cmp sha256sum

# This folder (by hand, functions.sh's $srcdir is the script's folder;
# under make it is tests/).
here="$(cd "$(dirname "$0")" && pwd)"
model="$here/model-stripes.py"
seed="${MODEL_SEED:-$(( $(date +%s%N) / 1000 % 1000000000 ))}"
echo "seed: $seed (MODEL_SEED=$seed repeats this run)"

failed=0
stacks=0
summaries=()

# run_model NAME [--initial-file F --initial-offset N] -- SERVER ARGS...:
# start the server, run the model against it, stop it.  A failure is
# counted and the next stack still runs.
run_model ()
{
  local name="$1" opts=()
  shift
  while [ "$1" != -- ]; do opts+=("$1"); shift; done
  shift
  stacks=$((stacks + 1))
  echo
  echo "=== $name: nbdkit $*"
  start_server "$@" 2>"$tmpdir/$name.log"
  if ! t /usr/bin/python3 "$model" "$uri" --label "$name" \
       --workdir "$tmpdir/$name" --seed "$seed" \
       --expected "$tmpdir/$name.expected" "${opts[@]}" \
       > "$tmpdir/$name.out" 2>&1; then
    echo "FAIL: the model found mismatches or errors on $name"
    failed=$((failed + 1))
  fi
  cat "$tmpdir/$name.out"
  summaries+=("$(tail -n1 "$tmpdir/$name.out")")
  if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "FAIL: the server of $name died"
    failed=$((failed + 1))
  fi
  stop_server
  if grep -E 'ASAN|runtime error|assertion' "$tmpdir/$name.log"; then
    echo "FAIL: the server of $name reported errors"
    failed=$((failed + 1))
  fi
}

# same_bytes FILE OFF LEN WANT WANT_OFF WHAT: LEN bytes of FILE from OFF
# are those of WANT from WANT_OFF.
same_bytes ()
{
  if ! cmp -n "$3" -i "$2:$5" "$1" "$4"; then
    echo "FAIL: $6"
    failed=$((failed + 1))
  fi
}

# A disk of random bytes, for the stacks whose plugin is a file: a
# layer that merges partial blocks with the plugin's data must get the
# plugin's bytes right, not zeroes.
random_disk ()
{
  head -c "$2" /dev/urandom > "$1"
}

# cow: the overlay on top of a read-only view of a random file.  The
# file must not change.
random_disk "$tmpdir/cow.img" 8M
cp "$tmpdir/cow.img" "$tmpdir/cow.orig"
run_model cow --initial-file "$tmpdir/cow.orig" -- \
  --filter=cow --filter=delay file "$tmpdir/cow.img" rdelay=1ms
same_bytes "$tmpdir/cow.img" 0 8M "$tmpdir/cow.orig" 0 \
  "cow wrote to the file under it"

# blocksize: odd limits (maxdata 3 blocks, maxlen 5 blocks) over a
# store that is slow to write, so read-modify-write cycles overlap
# (fewer operations: a 64 KiB write is eleven 1 ms pieces).
run_model blocksize --ops 500 -- \
  --filter=blocksize --filter=delay memory 8M \
  minblock=2048 maxdata=6144 maxlen=10240 wdelay=1ms

# partition: the second partition of an MBR disk, starting at an odd
# sector.
part="$tmpdir/part.img"
random_disk "$part" 12M
printf '%s\n' 'label: dos' 'start=2048, size=2048, type=83' \
  'start=6151, size=14001, type=83' | sfdisk -q "$part" >/dev/null
cp "$part" "$tmpdir/part.orig"
p_off=$((6151 * 512))
p_len=$((14001 * 512))
run_model partition \
  --initial-file "$tmpdir/part.orig" --initial-offset "$p_off" -- \
  --filter=partition file "$part" partition=2
same_bytes "$part" 0 "$p_off" "$tmpdir/part.orig" 0 \
  "partition: bytes before the partition changed"
same_bytes "$part" $((p_off + p_len)) $((12 * 1048576 - p_off - p_len)) \
  "$tmpdir/part.orig" $((p_off + p_len)) \
  "partition: bytes after the partition changed"
same_bytes "$part" "$p_off" "$p_len" "$tmpdir/partition.expected" 0 \
  "partition: the file does not hold the model after the flush"

# offset+truncate: a window of a file at an odd offset, cut short at an
# odd size.
ot="$tmpdir/ot.img"
random_disk "$ot" 8M
cp "$ot" "$tmpdir/ot.orig"
o_off=1048583
o_len=5999991
run_model offset-truncate \
  --initial-file "$tmpdir/ot.orig" --initial-offset "$o_off" -- \
  --filter=truncate --filter=offset file "$ot" \
  offset="$o_off" range=6000001 truncate="$o_len"
same_bytes "$ot" 0 "$o_off" "$tmpdir/ot.orig" 0 \
  "offset-truncate: bytes before the offset changed"
same_bytes "$ot" $((o_off + o_len)) $((8 * 1048576 - o_off - o_len)) \
  "$tmpdir/ot.orig" $((o_off + o_len)) \
  "offset-truncate: bytes after the truncated end changed"
same_bytes "$ot" "$o_off" "$o_len" "$tmpdir/offset-truncate.expected" 0 \
  "offset-truncate: the file does not hold the model after the flush"

# readahead: its prefetches (NBD_CMD_CACHE) fill a write-through cache
# from a slow plugin while the writers write the same blocks: a fill
# must never store bytes older than a write it raced with.
run_model readahead -- \
  --filter=readahead --filter=cache --filter=delay memory 8M \
  cache=writethrough rdelay=1ms wdelay=1ms

# retry: one read in fifty fails (EIO) below the retry filter, which
# reopens and repeats it after a second, so every request of the
# writers and of the reader succeeds.  The server's log shows how many
# failed below.  Fewer operations here: each failure stalls its
# connection for the retry delay.
run_model retry --ops 300 -- \
  --filter=retry --filter=error memory 8M \
  error-pread=EIO error-pread-rate=2% retries=8 retry-delay=1 \
  retry-exponential=no
injected=$(grep -c 'injecting' "$tmpdir/retry.log" || :)
echo "retry: $injected reads failed below the retry filter"
if [ "$injected" -eq 0 ]; then
  echo "FAIL: retry: no read failed below the retry filter (error filter?)"
  failed=$((failed + 1))
fi

echo
echo "=== summary (seed $seed)"
printf '%s\n' "${summaries[@]}"
echo "stacks checked: $stacks, failures: $failed"
[ "$failed" -eq 0 ] || fail "$failed failures (seed $seed)"
