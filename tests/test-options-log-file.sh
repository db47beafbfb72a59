#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --log=FILE (nbdkit 1.44): messages go to FILE, created (0644 less the
# umask) or appended to; errors while starting go to stderr too, errors
# while serving only to the file.  --name=NAME (1.46) heads every line.
# -D nbdkit.environ=1 (1.36) logs the environment with -v.  A file that
# cannot be opened, an unknown --log word and a bad --name are clean
# one-line errors.  Debian's nbdkit 1.32.5 has none of these options,
# so there is nothing to compare against.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

log="$tmpdir/logs/server.log"
mkdir "$tmpdir/logs"
# Run 1: serving, with a read the error filter fails.  The client sees
# EIO; the message is in the file only; stderr stays empty.
(umask 022; t "$NBDKIT" --log="$log" --name=disk7 -v -D nbdkit.environ=1 \
   --filter=error memory 1M error-pread=EIO error-pread-rate=1 \
   --run 'nbdsh -u "$uri" -c "
import errno
try:
    h.pread(512, 0)
except nbd.Error as e:
    print(e.errnum == errno.EIO)"' \
   > "$tmpdir/out" 2> "$tmpdir/err") || fail "run 1 failed"
[ "$(cat "$tmpdir/out")" = True ] || fail "the client did not get EIO"
[ ! -s "$tmpdir/err" ] || { cat "$tmpdir/err"; fail "run 1 wrote to stderr"; }
[ "$(stat -c %a "$log")" = 644 ] || fail "log mode $(stat -c %a "$log")"
grep -q '^disk7: error\[1\]: error: injecting EIO error into pread' "$log" ||
  fail "no pread error in the log"
grep -q '^disk7: debug: handshake done' "$log" || fail "no -v lines in the log"
grep -vq '^disk7: ' "$log" && fail "a line without the --name prefix"
# -D nbdkit.environ=1 shows the environment (MARKER only in run 1).
grep -qx 'disk7: debug: environ: MARKER_146=hello' "$log" &&
  fail "MARKER_146 logged before it was set"
grep -q '^disk7: debug: environ: PATH=' "$log" || fail "no environ lines"
lines1="$(wc -l < "$log")"

# Run 2 appends; without -D nbdkit.environ the environment stays out,
# and with it (in run 3) a variable set for the server shows.
t "$NBDKIT" --log="$log" --name=disk7 -v memory 1M --run true ||
  fail "run 2 failed"
lines2="$(wc -l < "$log")"
[ "$lines2" -gt "$lines1" ] || fail "run 2 did not append"
[ "$(grep -c 'environ: PATH=' "$log")" = 1 ] ||
  fail "environ logged without -D nbdkit.environ=1"
MARKER_146=hello t "$NBDKIT" --log="$log" -v -D nbdkit.environ=1 \
  memory 1M --run true || fail "run 3 failed"
grep -qx 'nbdkit: debug: environ: MARKER_146=hello' "$log" ||
  fail "MARKER_146 not in the environ lines (default name nbdkit)"

# An error while starting: on stderr (with the name) and in the file.
"$NBDKIT" --log="$log" --name=disk7 memory 1M nokey=1 --run true \
  2> "$tmpdir/err" && fail "a bad parameter was accepted"
grep -q '^disk7: memory: error: .*nokey' "$tmpdir/err" ||
  { cat "$tmpdir/err"; fail "start-up error not on stderr"; }
[ "$(grep -c 'error: .*nokey' "$log")" = 1 ] ||
  fail "start-up error not in the file"

# A relative path (with a /) is a file too; a bare word is not.
(cd "$tmpdir" && t "$NBDKIT" --log=./rel.log -v memory 1M --run true) ||
  fail "--log=./rel.log failed"
grep -q '^nbdkit: debug:' "$tmpdir/rel.log" || fail "./rel.log is empty"
t "$NBDKIT" --log=default memory 1M --run true || fail "--log=default"

refuses "^nbdkit: --log: $tmpdir/nosuch/x: No such file or directory$" \
  --log="$tmpdir/nosuch/x" memory 1M || fail "--log to a missing directory"
[ ! -e "$tmpdir/nosuch" ] || fail "the missing directory was made"
refuses '^nbdkit: --log: "logfile" must be default, stderr, syslog, null or the path' \
  --log=logfile memory 1M || fail "--log=logfile"
refuses '^nbdkit: --name: "" must be 1 to 64 characters$' --name= memory 1M ||
  fail "--name="
refuses '^nbdkit: --name: "a b" may not contain spaces' --name='a b' \
  memory 1M || fail "--name with a space"
exit 0
