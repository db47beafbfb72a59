#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The nbd plugin's asynchronous path gives the client the same bytes,
# sends the upstream the same commands with the same flags, and shows
# the same block status as its synchronous path (-D nbdkit.async=0)
# and as Debian's nbdkit 1.32 nbd plugin, all three in front of one
# upstream (our memory plugin, with the log filter recording what it
# is asked):
#  - a random image copied in through each proxy in turn reads back
#    equal through every proxy and directly;
#  - a fixed sequence of writes with FUA, zeroes with and without
#    may-trim and fast-zero, trims and flushes reaches the upstream as
#    the same list of commands and flags through each proxy;
#  - nbdinfo --map then gives the same extents through each.
# Catches: a flag lost or added on the asynchronous path (FUA, NO_HOLE,
# FAST_ZERO), a buffer completed before libnbd filled it, data written
# at the wrong offset.
source "$(dirname "$0")/functions.sh"
source "$srcdir/nbd-plugin-functions.sh"
requires_cmd nbdcopy nbdinfo nbdsh
[ -x /usr/bin/nbdkit ] && [ -e "$debian_plugindir/nbdkit-nbd-plugin.so" ] ||
  { echo "$0: Debian's nbdkit nbd plugin is not installed"; exit 77; }

start_upstream --filter=log memory 16M logfile="$tmpdir/up.log"

# proxy NAME SERVER ARGS...: SERVER ARGS nbd socket=UPSTREAM on
# $tmpdir/NAME.sock, stopped at exit; sets uri_NAME.
proxy ()
{
  local name="$1" server="$2"
  shift 2
  rm -f "$tmpdir/$name.pid"
  "$server" -f -U "$tmpdir/$name.sock" -P "$tmpdir/$name.pid" "$@" \
    nbd socket="$up_sock" 9>&- &
  cleanup_fn _kill_pid $!
  wait_for 20 -s "$tmpdir/$name.pid" || fail "proxy $name did not start"
  printf -v "uri_$name" 'nbd+unix:///?socket=%s' "$tmpdir/$name.sock"
}
proxy async "$NBDKIT"
proxy sync "$NBDKIT" -D nbdkit.async=0
proxy debian /usr/bin/nbdkit
names=(async sync debian)

for writer in "${names[@]}"; do
  head -c 16M /dev/urandom > "$tmpdir/img"
  w="uri_$writer"
  t nbdcopy --requests=32 "$tmpdir/img" "${!w}" ||
    fail "copying in through $writer failed"
  for reader in "${names[@]}" up; do
    r="uri_$reader"
    [ "$reader" = up ] && r=up_uri
    cmp <(t nbdcopy --requests=32 "${!r}" -) "$tmpdir/img" ||
      fail "written through $writer, read through $reader: wrong bytes"
  done
done

# The upstream's log of one command sequence, without the times and
# ids that differ from run to run.
cat > "$tmpdir/seq.py" <<'PY'
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.pwrite(b"a" * 65536, 0)
h.pwrite(b"b" * 4096, 65536, nbd.CMD_FLAG_FUA)
h.zero(65536, 1048576)
h.zero(65536, 2097152, nbd.CMD_FLAG_NO_HOLE)
h.zero(65536, 3145728, nbd.CMD_FLAG_FUA | nbd.CMD_FLAG_NO_HOLE)
if h.can_fast_zero():
    h.zero(65536, 4194304, nbd.CMD_FLAG_FAST_ZERO)
h.trim(131072, 5242880)
h.trim(65536, 6291456, nbd.CMD_FLAG_FUA)
h.flush()
assert h.pread(4096, 65536) == b"b" * 4096
h.shutdown()
PY
for name in "${names[@]}"; do
  u="uri_$name"
  t nbdcopy "$tmpdir/img" "${!u}"
  n=$(wc -l < "$tmpdir/up.log")
  t python3 "$tmpdir/seq.py" "${!u}" || fail "the sequence failed through $name"
  tail -n +$(( n + 1 )) "$tmpdir/up.log" |
    grep -aE ' (Write|Zero|Trim|Flush|Read) ' |
    grep -v '\.\.\.[A-Z]' |
    sed -E 's/^[0-9-]+ [0-9:.]+ connection=[0-9]+ //; s/ id=[0-9]+//' \
    > "$tmpdir/cmds.$name"
  t nbdinfo --map "${!u}" > "$tmpdir/map.$name"
done
cat "$tmpdir/cmds.async"
[ "$(wc -l < "$tmpdir/cmds.async")" -ge 8 ] ||
  fail "the upstream saw too few commands"
grep -q 'Write offset=0x10000 count=0x1000 fua=1' "$tmpdir/cmds.async" ||
  fail "FUA did not reach the upstream"
grep -q 'Zero offset=0x200000 count=0x10000 trim=0 fua=0' "$tmpdir/cmds.async" ||
  fail "NO_HOLE did not reach the upstream"
for name in sync debian; do
  diff -u "$tmpdir/cmds.$name" "$tmpdir/cmds.async" ||
    fail "the upstream saw other commands through async than through $name"
done
cat "$tmpdir/map.async"
t nbdinfo --map "$up_uri" > "$tmpdir/map.up"
for name in sync debian up; do
  diff -u "$tmpdir/map.$name" "$tmpdir/map.async" ||
    fail "block status through async differs from $name"
done
