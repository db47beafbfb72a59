#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Filter ABI: Debian's prebuilt filters that reshape the export (offset,
# partition, truncate, swab, blocksize, blocksize-policy, extentlist,
# protect), loaded by path into OUR server over our file plugin, give
# the same size, flags, map, nbdcopy bytes, and for writes the same
# outcomes and the same bytes in the file, as Debian's nbdkit running
# the same command (tests/debian-filters.sh).
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"
PATH="$PATH:/usr/sbin:/sbin"
requires_cmd sfdisk

disk="$tmpdir/disk.img"
make_pattern "$disk.orig" $((4 * 1024 * 1024))
state_files=("$disk")

compare offset-read read --filter=offset file "$disk" offset=300000 range=2M
compare offset-write write --filter=offset file "$disk" offset=1M range=1M
compare offset-norange read --filter=offset file "$disk" offset=1536K

compare truncate-down read --filter=truncate file "$disk" truncate=3000000
compare truncate-up read --filter=truncate file "$disk" truncate=5M
compare truncate-round-up read --filter=truncate file "$disk" \
  truncate=3000001 round-up=4096
compare truncate-write write --filter=truncate file "$disk" truncate=6M

compare swab-16 read --filter=swab file "$disk"
compare swab-32 read --filter=swab file "$disk" swab-bits=32
compare swab-64-write write --filter=swab file "$disk" swab-bits=64
# The swapped bytes, checked independently of Debian's nbdkit.
t "$NBDKIT" -U - --filter="$debian_filterdir/nbdkit-swab-filter.so" \
  file "$disk.orig" swab-bits=64 --run 'nbdsh -u "$uri" -c "
import struct
assert h.pread(16, 262144) == struct.pack(\"<QQ\", 262144, 262152), \
  h.pread(16, 262144)
"' || note_failure swab-64-bytes "swab-bits=64 did not reverse each word"

compare blocksize-read read --filter=blocksize file "$disk" \
  minblock=4k maxdata=64k maxlen=128k
compare blocksize-write write --filter=blocksize file "$disk" \
  minblock=4k maxdata=32k

# The constraints blocksize-policy advertises (the maximum too: without
# blocksize-maximum= both servers pass on the filter's 4294967295), and
# its error policy: a read above the maximum reaches the filter, which
# refuses it with EINVAL under both.
cat > "$tmpdir/policy" <<'EOF'
#!/bin/sh
# policy URI
nbdinfo "$1" | grep -E "block_size_"
nbdsh -u "$1" -c '
import errno
h.set_strict_mode(0)
for off, n in ((0, 4096), (512, 4096), (0, 1000), (0, 1 << 20)):
    try:
        h.pread(n, off)
        print(off, n, "ok")
    except nbd.Error as e:
        print(off, n, "error", e.errno)
'
EOF
chmod +x "$tmpdir/policy"
compare blocksize-policy "$tmpdir/policy" --filter=blocksize-policy \
  file "$disk" blocksize-minimum=4096 blocksize-preferred=65536 \
  blocksize-maximum=262144 blocksize-error-policy=error
expect_in blocksize-policy-error "$ours" '^512 4096 error EINVAL'
expect_in blocksize-policy-too-big "$ours" '^0 1048576 error EINVAL'
compare blocksize-policy-allow "$tmpdir/policy" --filter=blocksize-policy \
  file "$disk" blocksize-minimum=512 blocksize-preferred=4096
expect_in blocksize-policy-allow "$ours" 'block_size_minimum: 512'
expect_in blocksize-policy-allow-max "$ours" 'block_size_maximum: 4294967295'

# A static extent list replaces the plugin's map.
cat > "$tmpdir/extents" <<'EOF'
0 1M
1M 512K hole
2M 1M hole,zero
3M 64K
EOF
compare extentlist read -r --filter=extentlist file "$disk" \
  extentlist="$tmpdir/extents"
expect_in extentlist-map "$ours" '^ +1048576 +524288 +1 +hole$'

# protect: writes to the protected ranges fail unless they write what
# is there already; elsewhere they land.
compare protect write --filter=protect file "$disk" \
  protect=0-4095 protect=1048576-2097151
expect_in protect-refused "$ours" '^pwrite error EPERM'

# partition: MBR and GPT tables made by sfdisk on the pattern file.
for label in dos gpt; do
  part="$tmpdir/part-$label.img"
  make_pattern "$part.orig" $((8 * 1024 * 1024))
  printf 'label: %s\nstart=2048, size=2048, type=%s\nstart=6144, size=8192, type=%s\n' \
    "$label" "$([ $label = dos ] && echo 83 || echo L)" \
    "$([ $label = dos ] && echo 83 || echo L)" |
    sfdisk -q "$part.orig" >/dev/null
  state_files=("$part")
  compare partition-$label-1 read --filter=partition file "$part" partition=1
  expect_in partition-$label-1-size "$ours" '^export-size=1048576 '
  compare partition-$label-2 write --filter=partition file "$part" partition=2
done

finish
