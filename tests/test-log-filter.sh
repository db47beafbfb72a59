#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The log filter writes the lines Debian's nbdkit 1.32 writes, field for
# field (timestamps aside), for the same client against the same
# command: every action (Ready, Fork, Preconnect, ListExports, Connect,
# Read, Write, Zero, Trim, Flush, Cache, Extents, Disconnect), failed
# calls with their errno name, export names that need shell quoting, and
# a read-only file.  logscript= gets the same fields as shell variables
# (bash arrays for lists), logappend= appends, and bad parameters stop
# the server with one line naming them.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo
ref_nbdkit=/usr/bin/nbdkit
requires test -x "$ref_nbdkit"
debian_filterdir=/usr/lib/x86_64-linux-gnu/nbdkit/filters

cat > "$tmpdir/client" <<'SH'
#!/bin/sh
set -e
uri="$1"
# An export chosen by name (EXPORT=plain), for plugins with no default.
[ -z "${EXPORT:-}" ] || uri="nbd+unix:///$EXPORT?socket=$2"
nbdinfo --list "$uri" > /dev/null
nbdinfo --map "$uri" > /dev/null
nbdsh -u "$uri" -c '
def op(fn):
    try:
        fn()
    except nbd.Error as e:
        pass
if h.is_read_only():
    op(lambda: h.pread(2, 1))
else:
    h.pwrite(b"x" * 512, 0, nbd.CMD_FLAG_FUA)
    op(lambda: h.pread(512, 0))
    h.zero(512, 1024, nbd.CMD_FLAG_NO_HOLE)
    h.zero(4096, 8192, nbd.CMD_FLAG_FAST_ZERO)
    h.trim(512, 4096)
    h.flush()
    h.cache(512, 0)
    h.pwrite(b"y" * 4096, 65536)
    op(lambda: h.pread(512, 131072))
'
SH
chmod +x "$tmpdir/client"

# same LABEL ARGS...: both servers run ARGS (with logfile=) and the
# client; their logs, without the timestamps, must be identical.
failures=0
same ()
{
  local label="$1" s n
  shift
  export EXPORT
  for s in "$NBDKIT" "$ref_nbdkit"; do
    n=ours; [ "$s" = "$ref_nbdkit" ] && n=ref
    rm -f "$tmpdir/log"
    t "$s" -U - "$@" logfile="$tmpdir/log" \
      --run "$tmpdir/client \"\$uri\" \"\$unixsocket\"" > /dev/null 2> "$tmpdir/$label.$n.err" ||
      { cat "$tmpdir/$label.$n.err"; fail "$label: $n server failed"; }
    # Each line starts with a date and a time: both must be there.
    grep -Evq '^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6} ' \
      "$tmpdir/log" && fail "$label: $n: a line without its timestamp"
    cut -d' ' -f3- "$tmpdir/log" > "$tmpdir/$label.$n"
  done
  if ! diff -u "$tmpdir/$label.ref" "$tmpdir/$label.ours"; then
    echo "$0: $label: our log differs from Debian's (above)" >&2
    failures=$((failures + 1))
  fi
}

# Every kind of request, on memory, with an error from Debian's error
# filter underneath on every read.
echo "fail" > "$tmpdir/trigger"
same memory --filter=log memory 1M
same errors --filter=log --filter="$debian_filterdir/nbdkit-error-filter.so" \
  memory 1M error-pread=ENOSPC error-pread-rate=1 \
  error-pread-file="$tmpdir/trigger"
# Export names that need quoting, read-only, and a read past the end.
mkdir "$tmpdir/exports"
echo hi > "$tmpdir/exports/a b"
echo x > "$tmpdir/exports/plain"
echo q > "$tmpdir/exports/it's \$x"
EXPORT=plain same quoting -r --filter=log file dir="$tmpdir/exports"
[ "$failures" -eq 0 ] || fail "$failures logs differ from Debian's"
grep -q '^connection=[0-9]* Read id=[0-9]* offset=0x20000 count=0x200 \.\.\.$' \
  "$tmpdir/errors.ours" || fail "no read at 128 KiB in the log"
grep -q '^connection=[0-9]* \.\.\.Read id=[0-9]* return=-1 error=ENOSPC$' \
  "$tmpdir/errors.ours" || fail "the failed read is not logged with ENOSPC"
grep -q 'exports=("a b" "it'"'"'s \\$x" plain)' "$tmpdir/quoting.ours" ||
  fail "export names not quoted as expected"

# logscript: the same fields, as shell variables; Extents' list is a
# bash array.
script='echo "$type $act id=$id conn=$connection offset=$offset count=$count fua=$fua return=$return error=$error extents0=${extents[0]} n=${#extents[@]}"'
t "$NBDKIT" -U - --filter=log memory 1M logscript="$script" \
  --run "nbdsh -u \"\$uri\" -c 'h.pwrite(b\"z\" * 4096, 8192, nbd.CMD_FLAG_FUA)' &&
         nbdinfo --map \"\$uri\" > /dev/null" > "$tmpdir/script.out" ||
  fail "server with logscript failed"
cat "$tmpdir/script.out"
grep -qx 'PRINT Ready id= conn= offset= count= fua= return= error= extents0= n=0' \
  "$tmpdir/script.out" || fail "logscript: no Ready event"
grep -qx 'ENTER Write id=1 conn=[0-9]* offset=0x2000 count=0x1000 fua=1 return= error= extents0= n=0' \
  "$tmpdir/script.out" || fail "logscript: no Write ENTER with its fields"
grep -qx 'LEAVE Write id=1 conn=[0-9]* offset= count= fua= return=0 error= extents0= n=0' \
  "$tmpdir/script.out" || fail "logscript: no Write LEAVE"
# Extents of a 1 MiB memory disk after one write at 8 KiB: a hole, the
# data, a hole: 3 triples, 9 elements.
grep -qx 'LEAVE Extents id=1 conn=[0-9]* offset= count= fua= return=0 error= extents0=0x0 n=9' \
  "$tmpdir/script.out" || fail "logscript: Extents list is not a bash array"

# logappend: a second run adds to the file; without it, it starts over.
rm -f "$tmpdir/log"
for i in 1 2; do
  t "$NBDKIT" -U - --filter=log memory 1M logfile="$tmpdir/log" \
    logappend=true --run true || fail "logappend run $i failed"
done
[ "$(grep -c ' Ready ' "$tmpdir/log")" -eq 2 ] ||
  fail "logappend=true did not keep the first run's lines"
t "$NBDKIT" -U - --filter=log memory 1M logfile="$tmpdir/log" --run true ||
  fail "third run failed"
[ "$(grep -c ' Ready ' "$tmpdir/log")" -eq 1 ] ||
  fail "without logappend the log was not emptied"

# Bad parameters: one line naming the parameter, exit 1.
bad ()
{
  refuses "$1" --filter=log memory 1M "${@:2}" ||
    fail "${*:2}: not refused with /$1/"
}
bad '^nbdkit: log: error: logappend: could not decipher boolean \(maybe\)$' \
  logfile="$tmpdir/x" logappend=maybe
bad '^nbdkit: log: error: logfile: open: .*/no/such/dir/log: No such file or directory$' \
  logfile="$tmpdir/no/such/dir/log"
