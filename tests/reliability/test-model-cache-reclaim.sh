#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The concurrent model checker (reliability/model-stripes.py, see
# test-model-stripes.sh) over the cache filter in writeback mode with a
# cache much smaller than what the writers touch (cache-max-size=1M:
# sixteen 64 KiB blocks, against some forty touched by the writers'
# stripes and the reads that fill the cache), so that blocks, dirty
# ones among them, are evicted and written back while the writers run.
# The plugin is a file of random bytes, so that partial blocks merge
# with real data; a delay filter (1 ms per read and write) under the
# cache stretches its read-modify-write, fill and write-back windows.
# Two passes run on one server, 12000 then 8000 operations: the first
# flushes often, the second seldom, so that most of its evictions write
# dirty blocks back.
#
# Besides the model (every writer's reads, and the final read of the
# whole export after each pass), after the last flush the file must
# hold exactly the merged model: no block written back out of order,
# none lost.  The cache_evict probe, traced with bpftrace, shows that
# the sweep really evicted blocks while the writers ran in each pass,
# dirty ones in the second; without root, bpftrace or probes that count
# is left out (said in the log) and the model still runs.
#
# This caught a read racing an eviction: a read of a cached block
# checked the block's state, then copied its bytes from the store
# without the block's lock, so an eviction in between (which zeroes the
# store first) made the read return zeroes (in 5 runs of 6 before the
# fix in cache_pread).
#
# The seed is printed; MODEL_SEED=N repeats a run.
source "$(dirname "$0")/../functions.sh"
requires test -x /usr/bin/python3
requires /usr/bin/python3 -c 'import nbd'
requires_cmd cmp

here="$(cd "$(dirname "$0")" && pwd)"
model="$here/model-stripes.py"
seed="${MODEL_SEED:-$(( $(date +%s%N) / 1000 % 1000000000 ))}"
echo "seed: $seed (MODEL_SEED=$seed repeats this run)"

trace=yes
if [ "$(id -u)" -ne 0 ] || ! command -v bpftrace >/dev/null ||
   ! grep -q '^#define ENABLE_PROBES 1' "$abs_top_builddir/config.h"; then
  trace=
  echo "evictions not traced: this needs root, bpftrace and a build with probes"
fi
[ -z "$trace" ] || tracing_lock

disk="$tmpdir/disk.img"
head -c 8M /dev/urandom > "$disk"
cp "$disk" "$tmpdir/disk.orig"

start_server --filter=cache --filter=delay file "$disk" \
  cache=writeback cache-max-size=1M cache-on-read=true \
  rdelay=1ms wdelay=1ms 2>"$tmpdir/server.log"
if [ -n "$trace" ]; then
  so="$(filter_so cache)"
  trace_start "$tmpdir/trace" "
usdt:$so:nbdkit:cache_evict {
  printf(\"%lld evict %d %d\\n\", nsecs, arg4, arg5);
}
"
fi

# Two passes on the same server: the first flushes often (a twentieth
# of the operations), the second seldom (one in two hundred), so that
# most blocks evicted then are dirty.  The second starts from what the
# first left: its initial content is the first's merged model.
status=0
t /usr/bin/python3 "$model" "$uri" --label cache-reclaim-1 \
  --workdir "$tmpdir/model1" --seed "$seed" --ops 3000 \
  --initial-file "$tmpdir/disk.orig" --expected "$tmpdir/expected1" \
  --times "$tmpdir/times1" || status=1
t /usr/bin/python3 "$model" "$uri" --label cache-reclaim-2 \
  --workdir "$tmpdir/model2" --seed $((seed + 1)) --ops 2000 \
  --flush-rate 0.005 \
  --initial-file "$tmpdir/expected1" --expected "$tmpdir/expected2" \
  --times "$tmpdir/times2" || status=1
kill -0 "$server_pid" || fail "the server died"
trace_stop
stop_server

if [ -n "$trace" ]; then
  for pass in 1 2; do
    read -r start end < "$tmpdir/times$pass"
    awk -v s="$start" -v e="$end" -v p="$pass" '
      $2 == "evict" && $1 >= s && $1 <= e { run++; if ($4) dirty++ }
      END { printf "pass %d: %d evictions while the writers ran, %d dirty\n",
                   p, run, dirty }' "$tmpdir/trace" | tee "$tmpdir/counts$pass"
    read -r _ _ during _ _ _ _ _ dirty _ < "$tmpdir/counts$pass"
    [ "$during" -gt 0 ] ||
      fail "pass $pass: no block was evicted while the writers ran"
  done
  [ "$dirty" -gt 0 ] ||
    fail "pass 2: no dirty block was evicted while the writers ran"
fi

[ "$status" -eq 0 ] || fail "the model found mismatches or errors (seed $seed)"
cmp "$disk" "$tmpdir/expected2" ||
  fail "the file does not hold the model after the final flush (seed $seed)"
