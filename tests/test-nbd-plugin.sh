#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The nbd plugin in front of three real servers (our own file plugin,
# qemu-nbd and nbd-server), each serving a copy of one sparse disk:
# through the plugin a client reads the same bytes, sees the same map
# (holes and data, where the upstream reports them), the same size,
# flags and block sizes, and its writes land upstream.  Then "same
# command, same bytes": Debian's nbdkit running the same nbd command in
# front of our upstream serves what ours does.
# Catches: a flag or block size not passed through (or invented), block
# status lost or mistranslated, a request sent to the wrong offset.
source "$(dirname "$0")/functions.sh"
source "$srcdir/nbd-plugin-functions.sh"
requires_cmd nbdinfo nbdcopy nbdsh qemu-nbd nbd-server
[ -f "$abs_top_builddir/plugins/nbd/.libs/nbdkit-nbd-plugin.so" ] ||
  fail "the nbd plugin was not built"

disk="$tmpdir/disk"
make_sparse_disk "$disk"
want="$(md5sum < "$disk")"
for f in ours qemu nbds; do cp --sparse=always "$disk" "$tmpdir/$f.img"; done

start_upstream file "$tmpdir/ours.img"
start_qemu_nbd "$tmpdir/qemu.img"
start_nbd_server "$tmpdir/nbds.img"

# check NAME DIRECT-URI IMAGE PLUGIN-ARGS...
check ()
{
  local name="$1" direct="$2" img="$3"
  shift 3
  start_server nbd "$@"
  echo "== $name: nbd $*"

  [ "$(t nbdcopy "$uri" - | md5sum)" = "$want" ] ||
    fail "$name: the bytes through the plugin differ from the disk"

  export_flags "$direct" > "$tmpdir/$name.direct"
  export_flags "$uri" > "$tmpdir/$name.proxy"
  # Block sizes too: a server that sends none gets none passed on.
  diff -u "$tmpdir/$name.direct" "$tmpdir/$name.proxy" ||
    fail "$name: flags or block sizes differ"

  if t nbdinfo --json "$direct" | grep -q base:allocation; then
    t nbdinfo --map "$direct" > "$tmpdir/$name.map.direct"
    t nbdinfo --map "$uri" > "$tmpdir/$name.map.proxy"
    cat "$tmpdir/$name.map.proxy"
    diff -u "$tmpdir/$name.map.direct" "$tmpdir/$name.map.proxy" ||
      fail "$name: the map differs"
    grep -q 'hole,zero' "$tmpdir/$name.map.proxy" ||
      fail "$name: no hole in the map"
  else
    # No block status upstream: the server calls it all data.
    [ "$(t nbdinfo --map "$uri" | awk '{print $3}' | sort -u)" = 0 ] ||
      fail "$name: a map was made up"
  fi

  # A write (with FUA) through the plugin is in the upstream's file.
  t nbdsh -u "$uri" -c '
h.pwrite(b"W" * 8192, 12 * 1024 * 1024 + 512, nbd.CMD_FLAG_FUA)
h.flush()'
  [ "$(dd if="$img" bs=512 skip=$((12 * 2048 + 1)) count=16 status=none |
       tr -d W | wc -c)" = 0 ] || fail "$name: the write did not land"
  cp --sparse=always "$disk" "$img.want"
  printf 'W%.0s' $(seq 8192) |
    dd of="$img.want" bs=512 seek=$((12 * 2048 + 1)) conv=notrunc status=none
  cmp "$img" "$img.want" || fail "$name: bytes outside the write changed"
  rm "$img.want"
  stop_server
  cp --sparse=always "$disk" "$img"
}

check ours "$up_uri" "$tmpdir/ours.img" socket="$up_sock"
check ours-uri "$up_uri" "$tmpdir/ours.img" "$up_uri"
check qemu "nbd+unix:///?socket=$qemu_sock" "$tmpdir/qemu.img" \
  socket="$qemu_sock"
check nbd-server "nbd+unix:///disk?socket=$nbds_sock" "$tmpdir/nbds.img" \
  socket="$nbds_sock" export=disk

# Same command, same bytes: Debian's nbd plugin against ours, in front
# of the same upstream (restored to the plain disk).
cp --sparse=always "$disk" "$tmpdir/ours.img"
start_server nbd socket="$up_sock"
deb_sock="$tmpdir/deb.sock"
debian_nbdkit=/usr/sbin/nbdkit
[ -x "$debian_nbdkit" ] || debian_nbdkit=/usr/bin/nbdkit
"$debian_nbdkit" -f -U "$deb_sock" -P "$tmpdir/deb.pid" \
  nbd socket="$up_sock" 9>&- &
deb_pid=$!
cleanup_fn _kill_pid "$deb_pid"
wait_for 20 -s "$tmpdir/deb.pid" || fail "Debian's nbdkit did not start"
deb_uri="nbd+unix:///?socket=$deb_sock"
[ "$(t nbdcopy "$deb_uri" - | md5sum)" = "$(t nbdcopy "$uri" - | md5sum)" ] ||
  fail "Debian's nbd plugin and ours serve different bytes"
diff -u <(t nbdinfo --map "$deb_uri") <(t nbdinfo --map "$uri") ||
  fail "Debian's nbd plugin and ours serve different maps"
diff -u <(export_flags "$deb_uri") <(export_flags "$uri") ||
  fail "Debian's nbd plugin and ours advertise different flags"
