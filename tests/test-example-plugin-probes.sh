#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A plugin's own probes (NBDKIT_PROBE from <nbdkit-probe.h>) work, shown
# with the example plugin: readelf finds its example_* notes under the
# provider nbdkit; `perf buildid-cache --add' then `perf list' shows them
# as sdt_nbdkit:example_*; and a client doing exactly $nr_reads reads at
# known offsets makes example_read fire exactly that often, with those
# offsets and counts, under `perf record' and under bpftrace.  The
# config probe passes strings, checked under bpftrace; the flush probe
# has a costly argument computed only when traced (blocks holding data).
source "$(dirname "$0")/functions.sh"
requires_cmd readelf perf bpftrace nbdsh timeout
requires_root
# The plugin's probes need only <sys/sdt.h>, not the server's dtrace.
requires grep -Eq '^#define (HAVE_SYS_SDT_H|ENABLE_PROBES) 1' \
  "$abs_top_builddir/config.h"
tracing_lock

# A private build-id cache ($HOME/.debug): other builds of the server
# cached there offer sdt_nbdkit events too, and perf probe would try to
# add theirs as well.
export HOME="$tmpdir/home"
mkdir -p "$HOME"

so="$abs_top_builddir/plugins/example/.libs/nbdkit-example-plugin.so"
[ -f "$so" ] || fail "$so not built"
probes="example_config example_read example_write example_zero example_flush"

# What the client does: one write of 5000 bytes at 4096 (blocks 1 and 2
# then hold data), then these reads, (offset count) pairs, in order.
reads=(0 512  4096 1024  12288 4096  65536 512  1048064 512  3 7)
nr_reads=$(( ${#reads[@]} / 2 ))
expected="$tmpdir/expected"
for (( i = 0; i < ${#reads[@]}; i += 2 )); do
  echo "${reads[i]} ${reads[i+1]}"
done > "$expected"
py="h.pwrite(b'x' * 5000, 4096)"
for (( i = 0; i < ${#reads[@]}; i += 2 )); do
  py="$py; h.pread(${reads[i+1]}, ${reads[i]})"
done
py="$py; h.flush()"
# The --run command is a child of the server: $PPID there is the
# server's pid, which picks our events out of system-wide traces.
run="echo \$PPID > $tmpdir/server-pid; nbdsh -u \"\$uri\" -c \"$py\""

# --- readelf: the notes ---------------------------------------------------
readelf -n "$so" > "$tmpdir/notes"
for p in $probes; do
  awk -v p="$p" '
    /Provider:/ { prov = $2 }
    /Name:/ && $2 == p && prov == "nbdkit" { found = 1 }
    END { exit !found }' "$tmpdir/notes" ||
    fail "readelf -n: no note nbdkit:$p in $so"
done
echo "readelf: $(grep -c 'Name: example_' "$tmpdir/notes") example_* notes"

# --- perf: list, then record ---------------------------------------------
export PERF_PAGER=cat
t perf buildid-cache --add "$so" || fail "perf buildid-cache --add failed"
cleanup_fn perf buildid-cache --remove "$so"
t perf list 'sdt_nbdkit:*' > "$tmpdir/list" 2>&1
for p in $probes; do
  grep -q "sdt_nbdkit:$p " "$tmpdir/list" ||
    fail "perf list 'sdt_nbdkit:*' has no sdt_nbdkit:$p"
done

# Probes left by an earlier run would make `perf probe' fail.
perf probe -q -d 'sdt_nbdkit:example_*' 2>/dev/null || :
cleanup_fn perf probe -q -d 'sdt_nbdkit:example_*'
for p in example_read example_write example_flush; do
  t perf probe -q -x "$so" "sdt_nbdkit:$p" || fail "perf probe sdt_nbdkit:$p"
done

t perf record -q -aR -o "$tmpdir/perf.data" \
  -e sdt_nbdkit:example_read -e sdt_nbdkit:example_write \
  -e sdt_nbdkit:example_flush -- \
  "$NBDKIT" -U - example 1M --run "$run" ||
  fail "perf record around the server failed"
perf script -i "$tmpdir/perf.data" -F pid,event,trace > "$tmpdir/script" 2>&1
pid="$(cat "$tmpdir/server-pid")"
# Lines look like:
# "  PID sdt_nbdkit:example_read: (ADDR) arg1=ID arg2=COOKIE arg3=OFF arg4=COUNT".
awk -v pid="$pid" '$1 == pid' "$tmpdir/script" > "$tmpdir/ours"
cat "$tmpdir/ours"

sed -n 's/.*sdt_nbdkit:example_read: .* arg1=[1-9][0-9]* arg2=[1-9][0-9]* arg3=\([0-9]*\) arg4=\([0-9]*\).*/\1 \2/p' \
  "$tmpdir/ours" > "$tmpdir/perf-reads"
n="$(wc -l < "$tmpdir/perf-reads")"
[ "$n" -eq "$nr_reads" ] ||
  fail "perf: $n example_read events from server $pid, expected $nr_reads"
diff -u "$expected" "$tmpdir/perf-reads" ||
  fail "perf: example_read offsets and counts differ from the reads made"
grep -Eq 'sdt_nbdkit:example_write: .* arg3=4096 arg4=5000( |$)' \
  "$tmpdir/ours" || fail "perf: no example_write at 4096 for 5000 bytes"
# Flush: its id and cookie, 6 reads and 1 write served so far, 2
# blocks holding data.
grep -Eq 'sdt_nbdkit:example_flush: .* arg1=[1-9][0-9]* arg2=[1-9][0-9]* arg3=6 arg4=1 arg5=2( |$)' \
  "$tmpdir/ours" ||
  fail "perf: no example_flush (id, cookie, reads 6, writes 1, blocks 2)"
echo "perf: $n example_read events, as expected"

# --- bpftrace: count them, and read the strings ---------------------------
cat > "$tmpdir/trace.bt" <<BT
usdt:$so:nbdkit:example_read {
  @reads[pid] = count();
  printf("%llu read %d %d %d\n", nsecs, pid, arg2, arg3);
}
usdt:$so:nbdkit:example_config {
  printf("config %d %s %s\n", pid, str(arg0), str(arg1));
}
BT
start_bpftrace 60 "$tmpdir/bt.out" "$tmpdir/bt.err" "$tmpdir/trace.bt"

t "$NBDKIT" -U - example size=1M --run "$run" ||
  fail "the server under bpftrace failed"
sleep 1
interrupt_tracer "$bt"
pid="$(cat "$tmpdir/server-pid")"
cat "$tmpdir/bt.out"
# Reads are stamped with their time: bpftrace prints each CPU's events
# in turn, so sort them into the order they fired in.
grep -E '^[0-9]+ read ' "$tmpdir/bt.out" | sort -n -k1,1 | cut -d' ' -f2- \
  > "$tmpdir/bt-reads-sorted"

grep -q "^config $pid size 1M\$" "$tmpdir/bt.out" ||
  fail "bpftrace: no example_config (size, 1M) from server $pid"
awk -v pid="$pid" '$1 == "read" && $2 == pid { print $3, $4 }' \
  "$tmpdir/bt-reads-sorted" > "$tmpdir/bt-reads"
n="$(wc -l < "$tmpdir/bt-reads")"
[ "$n" -eq "$nr_reads" ] ||
  fail "bpftrace: $n example_read events from server $pid, expected $nr_reads"
grep -q "^@reads\[$pid\]: $nr_reads\$" "$tmpdir/bt.out" ||
  fail "bpftrace: count() for server $pid is not $nr_reads"
diff -u "$expected" "$tmpdir/bt-reads" ||
  fail "bpftrace: example_read offsets and counts differ from the reads made"
echo "bpftrace: $n example_read events, as expected"
