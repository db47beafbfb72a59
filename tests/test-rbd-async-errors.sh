#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Errors that librbd reports in a completion reach the client as the
# same NBD error on the asynchronous path as on the synchronous one
# (-D nbdkit.async=0): the image shrinks under the server (rbd resize)
# and the client, which still has the old size, then reads, writes,
# trims and zeroes past the new end (EINVAL from librbd), reads across
# it (a short read: EIO), and a FUA write past it fails before its
# flush; each failure is logged in one line naming the image, the call
# and the offset.  And a missing image or snapshot fails the connection
# on both paths.  Would catch: an error completed as success, a short
# read passed off as whole, a negative errno passed on unnegated, a FUA
# flush run after a failed write hiding its error, a log line lost.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo
source "$srcdir/rbd-functions.sh"

M=$((1024 * 1024))
img=$(new_image shrink 8M)
export img RBD_POOL

cat > "$tmpdir/shrink.py" <<'PY'
import nbd, os, subprocess, sys, time
M = 1024 * 1024
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.pwrite(b"x" * 8192, 4 * M - 4096)
h.flush()
subprocess.run(["timeout", "60", "rbd", "resize", "--allow-shrink",
                "--no-progress", "--size", "4M",
                os.environ["RBD_POOL"] + "/" + os.environ["img"]],
               check=True)
h.set_strict_mode(0)
def run(what, op):
    try:
        op()
        print(what, "ok")
    except nbd.Error as e:
        print(what, e.errno)
# librbd learns of the new size from the image's header watch: wait
# (bounded) until a read past the end fails.
for i in range(100):
    try:
        h.pread(4096, 6 * M)
        time.sleep(0.1)
    except nbd.Error:
        break
run("read past", lambda: h.pread(4096, 6 * M))
run("read across", lambda: h.pread(8192, 4 * M - 4096))
run("read before", lambda: h.pread(4096, 4 * M - 4096) == b"x" * 4096)
run("write past", lambda: h.pwrite(b"y" * 4096, 6 * M))
run("write fua past", lambda: h.pwrite(b"y" * 4096, 6 * M, nbd.CMD_FLAG_FUA))
run("trim past", lambda: h.trim(4096, 6 * M))
run("zero past", lambda: h.zero(4096, 6 * M))
run("zero fua past", lambda: h.zero(4096, 6 * M, nbd.CMD_FLAG_FUA))
run("flush", lambda: h.flush())
h.shutdown()
PY

for path in async sync; do
  flags=()
  [ $path = sync ] && flags=(-D nbdkit.async=0)
  # Back to 8 MiB (rbd resize fails on the first pass: the same size).
  rbdc resize --no-progress --size 8M "$RBD_POOL/$img" 2>/dev/null || :
  t "$NBDKIT" "${flags[@]}" -U - rbd "${rbd_args[@]}" image="$img" \
    --run 'python3 "'"$tmpdir"'/shrink.py" "$uri"' \
    > "$tmpdir/$path.answers" 2> "$tmpdir/$path.log" ||
    { cat "$tmpdir/$path.log"; fail "$path: the script failed"; }
  cat "$tmpdir/$path.log"
done
paste "$tmpdir/async.answers" "$tmpdir/sync.answers"
cat > "$tmpdir/want" <<EOT
read past EINVAL
read across EIO
read before ok
write past EINVAL
write fua past EINVAL
trim past EINVAL
zero past EINVAL
zero fua past EINVAL
flush ok
EOT
diff -u "$tmpdir/want" "$tmpdir/async.answers" ||
  fail "the asynchronous path gave the wrong errors"
diff -u "$tmpdir/async.answers" "$tmpdir/sync.answers" ||
  fail "the two paths gave different errors"

# One line per failure, the same on both paths but for the prefix: the
# synchronous path logs on the connection's thread ("rbd[1]:"), the
# asynchronous one on librbd's, which the server still names after the
# plugin whose code logged ("rbd:").
grep -q '^nbdkit: rbd: error: ' "$tmpdir/async.log" ||
  fail "the asynchronous path's errors are not logged as the plugin's"
for path in async sync; do
  sed -E 's/^nbdkit: rbd(\[[0-9]+\])?: error: //' "$tmpdir/$path.log" |
    grep -v '^nbdkit: ' > "$tmpdir/$path.lines" || :
done
cat > "$tmpdir/want" <<EOT
$img: read at $((6 * M)) (4096 bytes): Invalid argument
$img: read at $((4 * M - 4096)): 4096 of 8192 bytes (did the image shrink?)
$img: write at $((6 * M)) (4096 bytes): Invalid argument
$img: write at $((6 * M)) (4096 bytes): Invalid argument
$img: discard at $((6 * M)) (4096 bytes): Invalid argument
$img: write_zeroes at $((6 * M)) (4096 bytes): Invalid argument
$img: write_zeroes at $((6 * M)) (4096 bytes): Invalid argument
EOT
# The waiting loop's reads past the end log too: drop repeats of the
# first line.
for path in async sync; do
  awk -v past="read at $((6 * M)) " \
    '!(NR > 1 && $0 == prev && index($0, past)) { print } { prev = $0 }' \
    "$tmpdir/$path.lines" > "$tmpdir/$path.uniq"
  diff -u "$tmpdir/want" "$tmpdir/$path.uniq" ||
    fail "$path: the log lines are not the expected ones"
done

# A missing image, a missing snapshot: the connection fails on both
# paths, the server says why.
for flags in "" "-D nbdkit.async=0"; do
  # shellcheck disable=SC2086
  start_server $flags rbd "${rbd_args[@]}"
  expect_fail t nbdinfo --size "nbd+unix:///nosuchimage?socket=$sock" \
    2> "$tmpdir/missing.err" || fail "a missing image was served"
  grep -q "nosuchimage" "$tmpdir/missing.err" ||
    { cat "$tmpdir/missing.err"; fail "the client was not told why"; }
  t nbdinfo --size "nbd+unix:///$img?socket=$sock" > /dev/null ||
    fail "the server stopped serving after a missing image"
  stop_server
done
