#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Probes are cheap while nobody traces: a probe's _ENABLED() test reads a
# 2-byte semaphore that the kernel raises only while a tracer is attached.
#  1. In a running server (no -v) the semaphores of request_done and log
#     read 0, and stay 0 while a client reads; the server prints nothing.
#  2. With bpftrace on nbdkit:request_done, request_done's semaphore
#     becomes non-zero (log's stays 0); after bpftrace exits, 0 again.
#  3. The consequence: with bpftrace on nbdkit:log, the server's debug
#     message "accepted connection" is formatted and reaches the tracer,
#     still without -v and still not on stderr.
# The semaphore's "Semaphore:" address in `readelf -n' is a link-time
# address; its runtime address is read from /proc/PID/maps, computed two
# ways (PIE load bias, and the segment's file offset) that must agree.
# The server runs from a private copy of the binary, so that tracers of
# other tests (attached to the build's binary) cannot touch its counters.
source "$(dirname "$0")/functions.sh"
requires_tracer readelf nbdinfo dd od

bin="$tmpdir/nbdkit"
cp "$server_binary" "$bin"
cat > "$tmpdir/nbdkit-wrapper" <<EOF
#!/bin/sh
NBDKIT_PLUGINDIR='$abs_top_builddir/plugins'
NBDKIT_FILTERDIR='$abs_top_builddir/filters'
export NBDKIT_PLUGINDIR NBDKIT_FILTERDIR
exec '$bin' "\$@"
EOF
chmod +x "$tmpdir/nbdkit-wrapper"
NBDKIT="$tmpdir/nbdkit-wrapper"

# --- The semaphore's runtime address ----------------------------------------

# note_field PROBE FIELD: Base or Semaphore of the nbdkit:PROBE note.
note_field ()
{
  readelf -n "$bin" | awk -v p="$1" -v f="$2:" '
    $1 == "Provider:" { prov = $2 }
    $1 == "Name:" { name = $2 }
    $1 == "Location:" && prov == "nbdkit" && name == p {
      gsub(",", ""); for (i = 1; i < NF; i++) if ($i == f) print $(i + 1)
      exit }'
}

# sem_addr PID PROBE: runtime address of PROBE's semaphore in process PID.
sem_addr ()
{
  local pid="$1" probe="$2" sem base stapsdt_base
  local first_vaddr bias1 addr1 addr2 seg_off seg_vaddr seg_memsz file_off
  local range perms off rest start end

  sem="$(note_field "$probe" Semaphore)"
  base="$(note_field "$probe" Base)"
  [ -n "$sem" ] && [ "$(( sem ))" -ne 0 ] ||
    fail "nbdkit:$probe has no semaphore in $bin"
  # If the file was prelinked, .stapsdt.base moved and the note did not:
  # the difference applies to the semaphore too (0 on a normal build).
  stapsdt_base="0x$(readelf -S -W "$bin" |
    sed -n 's/.*\.stapsdt\.base *[A-Z]* *\([0-9a-f]*\) .*/\1/p')"
  sem=$(( sem + stapsdt_base - base ))

  # Way 1: load bias = where the first PT_LOAD (file offset 0) is mapped
  # minus its page-aligned link-time address (0 for a PIE).
  first_vaddr="$(readelf -l -W "$bin" | awk '$1 == "LOAD" { print $3; exit }')"
  bias1=""
  while read -r range perms off rest; do
    if [ "${rest##* }" = "$bin" ] && [ "$(( 0x$off ))" -eq 0 ]; then
      bias1=$(( 0x${range%-*} - (first_vaddr & ~0xfff) ))
      break
    fi
  done < "/proc/$pid/maps"
  [ -n "$bias1" ] || fail "$bin is not mapped at offset 0 in process $pid"
  addr1=$(( bias1 + sem ))

  # Way 2: the PT_LOAD segment holding the semaphore gives its file
  # offset; the mapping of that file offset gives its address.
  read -r seg_off seg_vaddr seg_memsz < <(readelf -l -W "$bin" | awk '
    $1 == "LOAD" { print $2, $3, $6 }' | while read -r o v m; do
      if (( v <= sem && sem < v + m )); then echo "$o $v $m"; fi
    done)
  [ -n "${seg_off:-}" ] || fail "semaphore $sem is in no PT_LOAD segment"
  file_off=$(( sem - seg_vaddr + seg_off ))
  addr2=""
  while read -r range perms off rest; do
    [ "${rest##* }" = "$bin" ] || continue
    start=$(( 0x${range%-*} )) end=$(( 0x${range#*-} ))
    if (( 0x$off <= file_off && file_off < 0x$off + end - start )); then
      [[ "$perms" = rw* ]] ||
        fail "the semaphore's mapping is not writable: $range $perms"
      addr2=$(( start + file_off - 0x$off ))
      break
    fi
  done < "/proc/$pid/maps"
  [ -n "$addr2" ] || fail "file offset $file_off of $bin is not mapped"

  [ "$addr1" -eq "$addr2" ] ||
    fail "$(printf 'semaphore address: load bias gives 0x%x, segment gives 0x%x' \
            "$addr1" "$addr2")"
  echo "$addr1"
}

# sem_value PID ADDR: the 2-byte semaphore (unsigned short) at ADDR.
sem_value ()
{
  local v
  v="$(dd if="/proc/$1/mem" bs=2 count=1 skip="$2" iflag=skip_bytes \
         status=none | od -An -tu2 | tr -d ' ')"
  [ -n "$v" ] || fail "cannot read 2 bytes at $2 in /proc/$1/mem"
  echo "$v"
}

# wait_value PID ADDR zero|nonzero: poll for up to 30 s.
wait_value ()
{
  local i v
  for (( i = 0; i < 300; i++ )); do
    v="$(sem_value "$1" "$2")"
    case "$3" in
      zero) [ "$v" -eq 0 ] && return 0 ;;
      nonzero) [ "$v" -ne 0 ] && return 0 ;;
    esac
    sleep 0.1
  done
  return 1
}

# --- Tracers ------------------------------------------------------------------

# start_bpftrace NAME PROGRAM: run bpftrace in the background (bounded by
# the program itself: bpftrace needs several seconds to detach, more than
# timeout -k allows) and wait until BEGIN says every probe is attached.
# Sets $bt_pid and $bt_out.
start_bpftrace ()
{
  local i
  bt_out="$tmpdir/$1.out"
  { echo 'BEGIN { printf("ready\n"); }'
    echo 'interval:s:60 { exit(); }'
    echo "$2"; } > "$tmpdir/$1.bt"
  bpftrace "$tmpdir/$1.bt" > "$bt_out" 2>"$tmpdir/$1.err" &
  bt_pid=$!
  cleanup_fn _kill_pid "$bt_pid"
  for (( i = 0; i < 600; i++ )); do
    grep -q '^ready$' "$bt_out" && return 0
    kill -0 "$bt_pid" 2>/dev/null || break
    sleep 0.1
  done
  cat "$tmpdir/$1.err" >&2
  fail "bpftrace ($1) did not attach within 60 s"
}

# stop_bpftrace: SIGINT, repeated (interrupt_tracer), then whatever
# is left is killed.
stop_bpftrace ()
{
  interrupt_tracer "$bt_pid"
  _kill_pid "$bt_pid"
  wait "$bt_pid" 2>/dev/null || :
}

# --- 1. Nobody traces ---------------------------------------------------------

start_server memory 1M 2>"$tmpdir/server.err"
pid="$(cat "$pidfile")"
[ "$(readlink -f "/proc/$pid/exe")" = "$(readlink -f "$bin")" ] ||
  fail "process $pid is not $bin"
bin="$(readlink -f "$bin")"             # the name /proc/PID/maps shows

done_sem="$(sem_addr "$pid" request_done)"
log_sem="$(sem_addr "$pid" log)"
printf 'request_done semaphore at 0x%x, log semaphore at 0x%x\n' \
  "$done_sem" "$log_sem"

v="$(sem_value "$pid" "$done_sem")"
echo "untraced: request_done semaphore = $v"
[ "$v" -eq 0 ] || fail "request_done semaphore is $v while nobody traces"
t nbdinfo --size "$uri" >/dev/null
v="$(sem_value "$pid" "$done_sem")"
[ "$v" -eq 0 ] || fail "request_done semaphore is $v after a client, untraced"
v="$(sem_value "$pid" "$log_sem")"
[ "$v" -eq 0 ] || fail "log semaphore is $v while nobody traces"
if [ -s "$tmpdir/server.err" ]; then
  cat "$tmpdir/server.err"
  fail "the server printed messages without -v and without a tracer"
fi

# --- 2. A tracer on request_done raises its semaphore, and only its own ----

start_bpftrace done "usdt:$bin:nbdkit:request_done { @n = count(); }"
wait_value "$pid" "$done_sem" nonzero ||
  fail "request_done semaphore stayed 0 with bpftrace attached"
v="$(sem_value "$pid" "$done_sem")"
echo "traced: request_done semaphore = $v"
w="$(sem_value "$pid" "$log_sem")"
[ "$w" -eq 0 ] || fail "log semaphore is $w, but only request_done is traced"
t nbdinfo --size "$uri" >/dev/null
stop_bpftrace
wait_value "$pid" "$done_sem" zero ||
  fail "request_done semaphore is $(sem_value "$pid" "$done_sem") after bpftrace exited"
echo "detached: request_done semaphore = 0"

# --- 3. Debug messages are formatted only for a tracer -----------------------

start_bpftrace log "usdt:$bin:nbdkit:log {
  printf(\"log %s %s %s\n\", str(arg0), str(arg1), str(arg2)); }"
wait_value "$pid" "$log_sem" nonzero ||
  fail "log semaphore stayed 0 with bpftrace attached to nbdkit:log"
t nbdinfo --size "$uri" >/dev/null
for (( i = 0; i < 100; i++ )); do
  grep -q '^log debug nbdkit accepted connection' "$bt_out" && break
  sleep 0.1
done
stop_bpftrace
cat "$bt_out"
grep -q '^log debug nbdkit accepted connection [0-9]' "$bt_out" ||
  fail "bpftrace on nbdkit:log did not see \"accepted connection\""
wait_value "$pid" "$log_sem" zero ||
  fail "log semaphore is $(sem_value "$pid" "$log_sem") after bpftrace exited"
t nbdinfo --size "$uri" >/dev/null       # untraced again
stop_server
if grep -q 'accepted connection' "$tmpdir/server.err"; then
  cat "$tmpdir/server.err"
  fail "the server printed debug messages without -v"
fi
echo "debug messages reached the tracer only"
