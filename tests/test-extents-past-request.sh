#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Block status keeps the last extent whole: when the plugin describes an
# extent that runs past the end of the request, the reply's last
# descriptor goes on to the end of that extent (never past the end of
# the export), as Debian's nbdkit 1.32 answers, so a client need not
# ask again about what the plugin already said.  What the NBD protocol
# requires still holds: every descriptor but the last ends before
# offset+count, with REQ_ONE the one descriptor stays within the
# request, and compact (32-bit) descriptors never carry more than
# 4294967295 bytes while extended (64-bit) ones may.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh
client="${abs_builddir:-$PWD}/nbd-raw-client"
[ -x "$client" ] || fail "$client not built (make check builds it)"

# 64K: a 32K hole, then 32K of allocated zeroes.  The plugin always
# describes the whole disk, wherever it is asked.
plugin=(eval get_size='echo 65536' pread='exit 1' can_extents='exit 0'
        extents='echo 0 32768 hole,zero; echo 32768 32768 zero')

# status SERVER: the extent lists nbdsh prints for the queries on stdin.
status ()
{
  cat > "$tmpdir/q.py"
  t "$1" -U - "${plugin[@]}" --run "nbdsh --base-allocation -u \"\$uri\" \
    -c 'def show(c, o, e, err): print(e)' -c - < '$tmpdir/q.py'"
}

queries='
h.block_status(1024, 32256, show)       # as in the issue
h.block_status(1024, 0, show)
h.block_status(1, 65535, show)
h.block_status(65535, 1, show)
h.block_status(1024, 0, show, nbd.CMD_FLAG_REQ_ONE)
h.block_status(1024, 32256, show, nbd.CMD_FLAG_REQ_ONE)
'
status "$NBDKIT" <<< "$queries" > "$tmpdir/ours"
cat > "$tmpdir/expected" <<'EOF'
[512, 3, 32768, 2]
[32768, 3]
[1, 2]
[32767, 3, 32768, 2]
[1024, 3]
[512, 3]
EOF
diff -u "$tmpdir/expected" "$tmpdir/ours" ||
  fail "block status does not keep the last extent whole"
if [ -x /usr/bin/nbdkit ]; then
  status /usr/bin/nbdkit <<< "$queries" > "$tmpdir/debian"
  diff -u "$tmpdir/debian" "$tmpdir/ours" ||
    fail "block status differs from Debian's nbdkit"
fi

# A request that ends exactly where an extent ends gets that extent
# alone: the protocol wants every descriptor but the last to end before
# offset+count.  (Debian's nbdkit 1.32 adds the next extent here,
# [32768, 3, 32768, 2], which breaks that rule; this is not compared.)
out=$(status "$NBDKIT" <<< 'h.block_status(32768, 0, show)')
[ "$out" = "[32768, 3]" ] ||
  fail "a request ending on an extent boundary got $out"

# Never past the end of the export, whatever the plugin says.
out=$(t "$NBDKIT" -U - eval get_size='echo 65536' pread='exit 1' \
        extents='echo 0 1048576' --run 'nbdsh --base-allocation -u "$uri" \
        -c "h.block_status(512, 1024, lambda c, o, e, err: print(e))"')
[ "$out" = "[64512, 0]" ] || fail "an extent past the export's end: $out"

# 8G with extents longer than 32 bits: [0, 5G) hole, [5G, 8G) zero.
big=(eval get_size='echo 8G' pread='exit 1' can_extents='exit 0'
     extents='echo 0 5G hole,zero; echo 5G 3G zero')
descs ()
{
  t "$NBDKIT" -U - "${big[@]}" --run "$client \"\$unixsocket\" status $*" |
    sed -n 's/^desc //p' | tr '\n' ' '
}
# Compact descriptors: cut to 32 bits, and the cut one is the last.
# (From offset 1G, Debian's nbdkit 1.32 fails an assertion and dies.)
[ "$(descs structured 0 1024)" = "4294967295 3 " ] ||
  fail "compact: $(descs structured 0 1024)"
[ "$(descs structured 1073741824 4294967295)" = "4294967295 3 " ] ||
  fail "compact from 1G: $(descs structured 1073741824 4294967295)"
# 64-bit descriptors: the whole 5G extent, or the request with REQ_ONE.
[ "$(descs extended 0 1024)" = "5368709120 3 " ] ||
  fail "extended: $(descs extended 0 1024)"
[ "$(descs extended 1073741824 4294967295)" = "4294967296 3 " ] ||
  fail "extended from 1G: $(descs extended 1073741824 4294967295)"
[ "$(descs extended 0 1024 one)" = "1024 3 " ] ||
  fail "extended, REQ_ONE: $(descs extended 0 1024 one)"
[ "$(descs extended 5368709119 2)" = "1 3 3221225472 2 " ] ||
  fail "extended, across the boundary: $(descs extended 5368709119 2)"
echo "the last extent runs past the request, within the rules"
