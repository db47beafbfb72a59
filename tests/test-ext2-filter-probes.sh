#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The ext2 filter's probe fires under bpftrace with the right arguments:
# ext2_open (file name, size) once per connection that opens a file,
# with the path the client named under ext2file=exportname, and not for
# a connection whose file does not exist.
source "$(dirname "$0")/functions.sh"
requires_root
requires_cmd bpftrace nbdsh mke2fs
tracing_lock

so="$(filter_so ext2)"
dir="$tmpdir/dir"
mkdir -p "$dir/disks"
head -c 123457 /dev/urandom > "$dir/disks/disk.raw"
printf 'hello\n' > "$dir/small"
mke2fs -q -t ext4 -d "$dir" "$tmpdir/fs.img" 16M

start_server --filter=ext2 file "$tmpdir/fs.img" ext2file=exportname
trace_start "$tmpdir/trace" "
usdt:$so:nbdkit:ext2_open { printf(\"open %s %d\\n\", str(arg0), arg1); }"
t nbdsh -c - <<PY
for name in ("/disks/disk.raw", "small", "/missing", "/small"):
    h = nbd.NBD()
    h.set_export_name(name)
    try:
        h.connect_unix("$sock")
    except nbd.Error:
        assert name == "/missing"
        continue
    h.pread(1, 0)
    h.shutdown()
PY
trace_stop

cat > "$tmpdir/expected" <<EOF2
open /disks/disk.raw 123457
open /small 6
open /small 6
EOF2
grep '^open ' "$tmpdir/trace" > "$tmpdir/got" || :
diff -u "$tmpdir/expected" "$tmpdir/got" ||
  fail "ext2_open: unexpected probes (trace errors: $(cat "$tmpdir/trace.err"))"
