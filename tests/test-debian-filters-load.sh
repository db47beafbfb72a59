#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Filter ABI: every one of Debian's prebuilt nbdkit 1.32 filters loads
# by path into OUR server and serves an export of the same size as
# under Debian's nbdkit running the same command; and --version lists
# each loaded filter as Debian's nbdkit does.  What each filter does
# is checked by the other tests/test-debian-filters-*.sh.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"
PATH="$PATH:/usr/sbin:/sbin"
requires_cmd gzip xz tar mke2fs qemu-img

# Inputs for the filters that need one.
disk="$tmpdir/disk.img"
make_pattern "$disk" $((1024 * 1024))
gzip -c "$disk" > "$tmpdir/disk.gz"
xz -c -0 --block-size=262144 "$disk" > "$tmpdir/disk.xz"
tar -C "$tmpdir" -cf "$tmpdir/disk.tar" disk.img
mkdir "$tmpdir/tree"
cp "$disk" "$tmpdir/tree/"
mke2fs -q -F -t ext2 -d "$tmpdir/tree" "$tmpdir/fs.img" 4M
echo -n secret > "$tmpdir/pass"
# qemu-img times its key derivation on the CPU clock and gives up now
# and then ("Unable to get accurate CPU usage"), half the time on a
# loaded machine: up to 30 tries, a little apart.
for i in $(seq 30); do
  [ "$i" -eq 1 ] || sleep 0.2
  qemu-img convert -q --object secret,id=s,file="$tmpdir/pass" -O luks \
    -o key-secret=s,iter-time=10 "$disk" "$tmpdir/disk.luks" 2>/dev/null &&
    break
done
printf '0 64K\n' > "$tmpdir/extents"
printf '0x0 0x100000 +\n' > "$tmpdir/rescue.map"
t "$srcdir/make-tls-files.sh" "$tmpdir/tls" >/dev/null

# The command line for each filter: the file plugin and what the
# filter needs to serve.
declare -A args=(
  [blocksize]="file $disk minblock=4k"
  [blocksize-policy]="file $disk blocksize-minimum=512"
  [cache]="file $disk"
  [cacheextents]="file $disk"
  [checkwrite]="file $disk"
  [cow]="file $disk"
  [ddrescue]="-r file $disk ddrescue-mapfile=$tmpdir/rescue.map"
  [delay]="file $disk rdelay=1ms"
  [error]="file $disk error-rate=0"
  [exitlast]="file $disk"
  [exitwhen]="file $disk exit-when-file-created=$tmpdir/never"
  [exportname]="file $disk exportname=a"
  [ext2]="file $tmpdir/fs.img ext2file=/disk.img"
  [extentlist]="-r file $disk extentlist=$tmpdir/extents"
  [fua]="file $disk fuamode=emulate"
  [gzip]="file $tmpdir/disk.gz"
  [ip]="file $disk allow=anyunix"
  [limit]="file $disk limit=2"
  [log]="file $disk logfile=$tmpdir/log"
  [luks]="file $tmpdir/disk.luks passphrase=+$tmpdir/pass"
  [multi-conn]="file $disk"
  [nocache]="file $disk"
  [noextents]="file $disk"
  [nofilter]="file $disk"
  [noparallel]="file $disk"
  [nozero]="file $disk"
  [offset]="file $disk offset=4096"
  [partition]="file $disk partition=1"
  [protect]="file $disk protect=0-511"
  [pause]="file $disk pause-control=$tmpdir/pause.ctl"
  [rate]="file $disk rate=1G"
  [readahead]="file $disk"
  [retry]="file $disk retries=1"
  [retry-request]="file $disk"
  [scan]="file $disk"
  [stats]="file $disk statsfile=$tmpdir/stats"
  [swab]="file $disk"
  [tar]="file $tmpdir/disk.tar tar-entry=disk.img"
  [tls-fallback]="--tls=on --tls-certificates=$tmpdir/tls/server file $disk"
  [truncate]="file $disk truncate=3M"
  [xz]="file $tmpdir/disk.xz"
)
# partition needs a partition table: a one-partition MBR on a copy.
if command -v sfdisk >/dev/null; then
  cp "$disk" "$tmpdir/part.img"
  echo 'start=256, type=83' | sfdisk -q "$tmpdir/part.img" >/dev/null
  args[partition]="file $tmpdir/part.img partition=1"
fi

# The size a client sees, without TLS (tls-fallback then serves its
# readme, a size of its own).
cat > "$tmpdir/size" <<'EOF'
#!/bin/sh
sock="$(echo "$1" | sed 's/.*socket=//; s/&.*//')"
SOCK="$sock" nbdsh -c '
import os
h.set_tls(nbd.TLS_DISABLE)
h.connect_unix(os.environ["SOCK"])
print("size", h.get_size())
'
EOF
chmod +x "$tmpdir/size"

n=0
for so in "$debian_filterdir"/nbdkit-*-filter.so; do
  name="${so##*/nbdkit-}"
  name="${name%-filter.so}"
  n=$((n + 1))
  if [ -z "${args[$name]:-}" ]; then
    note_failure "$name" "no command line in this test for a new filter"
    continue
  fi
  # shellcheck disable=SC2086 # the arguments are split on purpose
  compare "$name" "$tmpdir/size" --filter="$so" ${args[$name]}
  expect_in "$name-served" "$ours" '^size [0-9]+$'
done
[ "$n" -eq 41 ] || note_failure filter-count "expected 41 filters, found $n"

# --version names every filter loaded, one line each, as Debian's does.
all=()
for so in "$debian_filterdir"/nbdkit-*-filter.so; do all+=("--filter=$so"); done
t "$ref_nbdkit" "${all[@]}" memory --version > "$tmpdir/version.ref" 2>&1 ||
  fail "Debian's nbdkit --version with all filters: $(cat "$tmpdir/version.ref")"
t "$NBDKIT" "${all[@]}" memory --version > "$tmpdir/version.ours" 2>&1 ||
  note_failure version "--version with all filters failed:" \
    "$(head -5 "$tmpdir/version.ours")"
grep -Ev '^(nbdkit|memory) ' "$tmpdir/version.ref" | while read -r line; do
  grep -qxF "$line" "$tmpdir/version.ours" || echo "${line%% *}"
done > "$tmpdir/version.missing"
if [ -s "$tmpdir/version.missing" ]; then
  note_failure version "--version does not list:" $(cat "$tmpdir/version.missing")
fi

finish
