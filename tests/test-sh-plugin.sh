#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The sh plugin against Debian's: one script implementing every method
# (a file-backed disk with handles, exports, flags, extents, block
# size) runs under our nbdkit and Debian's, and the size, flags, map,
# export list, bytes copied and bytes written must be the same.  The
# script checks its own arguments (the handle it printed, counts and
# offsets, flags), so a wrong argument shows as an error.  The same
# script is also given inline (script=-), and an inline script without
# "#!" runs under /bin/sh.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"

disk="$tmpdir/disk.img"
make_pattern "$disk.orig" $((4 << 20))
state_files=("$disk")

script="$tmpdir/disk.sh"
cat > "$script" <<'SH'
#!/bin/bash
# A file-backed disk; state in $tmpdir, handle checked on every call.
m="$1"
case "$m" in
  load|unload|get_ready|after_fork|config_complete) exit 0 ;;
  magic_config_key) echo file ;;
  config)
    [ "$2" = file ] || { echo "EINVAL unknown key $2" >&2; exit 1; }
    ln -sf "$3" "$tmpdir/file" ;;
  thread_model) echo parallel ;;
  preconnect) [ "$2" = false ] || exit 1 ;;
  list_exports) printf 'INTERLEAVED\ndisk\nthe disk\nother\nanother name\n' ;;
  default_export) printf 'NAMES\ndisk\nother\n' ;;
  open)
    [ "$2" = false ] && [ "$4" = false ] || exit 1
    echo "$3" > "$tmpdir/exportname"
    echo "handle-$3" ;;
  dump_plugin) echo "disk_sh_dump=yes" ;;
  *)
    # Every other method gets the handle open printed.
    [ "$2" = "handle-$(cat "$tmpdir/exportname")" ] ||
      { echo "EBADF $m: bad handle '$2'" >&2; exit 1; }
    f="$tmpdir/file"
    case "$m" in
      close) ;;
      export_description) echo "export $(cat "$tmpdir/exportname")" ;;
      get_size) stat -L -c %s "$f" ;;
      block_size) echo 1 4K 32M ;;
      can_write|can_flush|can_trim|can_zero|can_extents|can_multi_conn) ;;
      is_rotational) exit 3 ;;
      can_fast_zero) exit 3 ;;
      can_fua) echo native ;;
      can_cache) echo native ;;
      pread) dd if="$f" skip=$4 count=$3 iflag=skip_bytes,count_bytes \
               status=none ;;
      pwrite)
        case "$5" in ""|fua) ;; *) echo "EINVAL flags '$5'" >&2; exit 1 ;; esac
        dd of="$f" seek=$4 conv=notrunc oflag=seek_bytes status=none ;;
      flush|cache) ;;
      trim) fallocate -p -o $4 -l $3 "$f" ;;
      zero)
        head -c $3 /dev/zero |
          dd of="$f" seek=$4 conv=notrunc oflag=seek_bytes status=none ;;
      extents)
        # 64K of data then holes in each 256K, as make_pattern lays out.
        end=$(( $4 + $3 )); b=$(( $4 / 262144 * 262144 ))
        while [ $b -lt $end ]; do
          echo $b 64K
          echo $((b + 65536)) 192K hole,zero
          b=$((b + 262144))
        done ;;
      *) exit 2 ;;
    esac ;;
esac
SH
chmod +x "$script"

cat > "$probedir/exports" <<EOF
#!/bin/sh
set -e
nbdinfo --list --json "\$1" | /usr/bin/python3 -c '
import json, sys
for e in json.load(sys.stdin)["exports"]:
    print(e["export-name"], "|", e.get("description"), "|", e["export-size"])'
nbdinfo --json "\$1" | /usr/bin/python3 -c '
import json, sys
e = json.load(sys.stdin)["exports"][0]
print(e["export-name"], "|", e.get("description"), "|", e["is_rotational"],
      e["can_fast_zero"], e["block_size_minimum"], e["block_size_preferred"],
      e["block_size_maximum"])'
EOF
chmod +x "$probedir/exports"

compare "sh read" read sh "$script" "$disk"
compare "sh write" write sh "$script" file="$disk"
compare "sh exports" "$probedir/exports" sh "$script" "$disk"
cat "$ours"

# The same, inline: script=- reads the script from stdin.
t "$NBDKIT" -U - sh - "$disk" --run "$probedir/read \"\$uri\"" \
  < "$script" > "$tmpdir/inline.out"
grep -v '^exit status' "$tmpdir/out/sh_read.ours" | grep -v '^state' |
  diff - "$tmpdir/inline.out" || fail "script=- differs from the script file"

# No "#!": the script runs under /bin/sh.
py='print(bytes(h.pread(4, 0)))'
out="$(t "$NBDKIT" -U - sh - --run "nbdsh -u \"\$uri\" -c '$py'" <<'SH'
case "$1" in
  get_size) echo 512 ;;
  pread) printf 'abcd'; head -c $(($3 - 4)) /dev/zero ;;
  *) exit 2 ;;
esac
SH
)"
[ "$out" = "b'abcd'" ] || fail "inline script without #!: got '$out'"

# --dump-plugin: the parameters are passed on first, as nbdkit 1.32
# does, so the script's own dump_plugin lines and its thread model show;
# every line but the paths and versions is Debian's.
cat > "$tmpdir/dump.sh" <<'SH'
#!/bin/bash
case "$1" in
  dump_plugin) echo "myscript=yes" ;;
  thread_model) echo serialize_all_requests ;;
  get_size) echo 1M ;;
  pread) dd if=/dev/zero count=$3 iflag=count_bytes status=none ;;
  *) exit 2 ;;
esac
SH
chmod +x "$tmpdir/dump.sh"
dump ()
{
  "$1" --dump-plugin sh "$tmpdir/dump.sh" |
    grep -Ev '^(path|version|version_major|version_minor|host_cpu|host_os|binary|name|struct_size)='
}
dump "$NBDKIT" > "$tmpdir/dump.ours"
dump /usr/bin/nbdkit > "$tmpdir/dump.ref"
diff -u "$tmpdir/dump.ref" "$tmpdir/dump.ours" ||
  fail "--dump-plugin differs from Debian's"
grep -qx 'myscript=yes' "$tmpdir/dump.ours" || fail "no dump_plugin line"
grep -qx 'thread_model=serialize_all_requests' "$tmpdir/dump.ours" ||
  fail "not the script's thread model"

finish
