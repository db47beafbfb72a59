#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Filter ABI: Debian's prebuilt filters that change what the export
# offers or how requests fail (nocache, noextents, nozero, fua,
# multi-conn, nofilter, noparallel, checkwrite, ddrescue, error, retry,
# retry-request, exportname), loaded by path into OUR server over our
# file plugin, give the same flags, map, bytes, errors and file
# contents as Debian's nbdkit running the same command
# (tests/debian-filters.sh).
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"

disk="$tmpdir/disk.img"
make_pattern "$disk.orig" $((4 * 1024 * 1024))
state_files=("$disk")

for mode in none emulate nop; do
  compare nocache-$mode read --filter=nocache file "$disk" cachemode=$mode
done

# noextents: the whole export is data, so nbdcopy reads all of it.
compare noextents read --filter=noextents file "$disk"
expect_in noextents-map "$ours" '^ +0 +4194304 +0 +data$'

for mode in none emulate notrim plugin; do
  compare nozero-$mode write --filter=nozero file "$disk" zeromode=$mode
done
compare nozero-fastzero write --filter=nozero file "$disk" \
  zeromode=plugin fastzeromode=none

for mode in discard emulate native force pass; do
  compare fua-$mode write --filter=fua file "$disk" fuamode=$mode
done

for mode in auto disable emulate plugin unsafe; do
  compare multi-conn-$mode read --filter=multi-conn file "$disk" \
    multi-conn-mode=$mode
done
compare multi-conn-write write --filter=multi-conn file "$disk" \
  multi-conn-mode=emulate multi-conn-track-dirty=fast

compare nofilter read --filter=nofilter file "$disk"
compare nofilter-write write --filter=nofilter file "$disk"
compare noparallel read --filter=noparallel file "$disk"
compare noparallel-connections read --filter=noparallel file "$disk" \
  serialize=connections

# checkwrite: reads as the plugin; a write of other bytes fails (EIO),
# a write of the same bytes succeeds; the file is never written.
compare checkwrite read --filter=checkwrite file "$disk"
compare checkwrite-write write --filter=checkwrite file "$disk"
expect_in checkwrite-refused "$ours" '^pwrite error EIO$'

# Reads in 256 KiB steps (or only the first with "reads one"), each
# one's outcome printed.
cat > "$tmpdir/reads" <<'EOF'
#!/bin/sh
for uri; do :; done
nbdsh -u "$uri" -c '
import hashlib
size = 262144 if '$#' > 1 else h.get_size()
for off in range(0, size, 262144):
    try:
        print(off, "ok", hashlib.sha256(h.pread(262144, off)).hexdigest())
    except nbd.Error as e:
        print(off, "error", e.errno)
'
EOF
chmod +x "$tmpdir/reads"

# ddrescue: the parts a map file marks bad read as EIO.
cat > "$tmpdir/rescue.map" <<'EOF'
# Mapfile. Created by GNU ddrescue version 1.27
# current_pos  current_status  current_pass
0x00000000     +               1
#      pos        size  status
0x00000000  0x00100000  +
0x00100000  0x00080000  -
0x00180000  0x00280000  +
EOF
compare ddrescue "$tmpdir/reads" -r --filter=ddrescue file "$disk" \
  ddrescue-mapfile="$tmpdir/rescue.map"
expect_in ddrescue-bad "$ours" '^1048576 error EIO$'

# error: every read fails with the chosen errno; with error-file the
# errors start only once the file exists.
compare error-pread "$tmpdir/reads" --filter=error file "$disk" \
  error-pread=ENOSPC error-pread-rate=100%
expect_in error-pread-errno "$ours" '^0 error ENOSPC$'
compare error-file "$tmpdir/reads" --filter=error file "$disk" \
  error=EIO error-rate=1 error-file="$tmpdir/no-such-trigger"
expect_in error-file-off "$ours" '^0 ok '
compare error-pwrite write --filter=error file "$disk" \
  error-pwrite=EPERM error-pwrite-rate=1

# retry and retry-request over a plugin that does not fail: they serve.
compare retry read --filter=retry file "$disk" retries=2 retry-delay=1
compare retry-write write --filter=retry file "$disk" retry-readonly=yes
compare retry-request read --filter=retry-request file "$disk" \
  retry-request-retries=2 retry-request-delay=1
# Over reads that always fail, retry-request gives up after its
# retries with the errno of the layer below.
compare retry-request-fail "$tmpdir/reads one" --filter=retry-request \
  --filter=error file "$disk" retry-request-retries=1 \
  retry-request-delay=1 error-pread=EIO error-pread-rate=1
expect_in retry-request-gives-up "$ours" '^0 error EIO$'

# exportname: the list of exports a client sees, and which one it gets.
cat > "$tmpdir/list" <<'EOF'
#!/bin/sh
nbdinfo --list --json "$1" | /usr/bin/python3 -c '
import json, sys
for e in json.load(sys.stdin)["exports"]:
    print(e["export-name"], e.get("description"), e["export-size"])
'
nbdsh -u "$1" -c 'print("default", h.get_canonical_export_name())' 2>&1 |
  sed 's/socket=[^ ]*//'
EOF
chmod +x "$tmpdir/list"
compare exportname-list "$tmpdir/list" --filter=exportname file "$disk" \
  exportname=alpha exportname=beta exportname-list=explicit \
  default-export=alpha exportdesc=fixed:described
expect_in exportname-listed "$ours" '^beta described 4194304$'
compare exportname-strict "$tmpdir/list" --filter=exportname file "$disk" \
  exportname=alpha exportname-strict=true exportname-list=explicit \
  default-export=alpha

finish
