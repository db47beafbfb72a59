#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A sh plugin's probe fires under bpftrace: the script runs
# `nbdkit-probe NAME ARG1 ARG2 TEXT' (found on its PATH) in open and in
# pread, and bpftrace attached to the server's generic probe "user"
# sees each with the right name, integers (a negative one too) and
# text (spaces and all), the connection id, and in pread the cookie of
# the server's request_start for that read (0 in open, outside a
# request).  Also: a record written by a process the script started in
# the background while the script still ran arrives; nbdkit-probe
# refuses a bad integer and the script's error reaches the client;
# without a tracer the script runs the same.  It would catch: the
# helper missing from PATH, the pipe not read (or read after the
# script ended only), fields split wrongly, the probe fired from the
# wrong thread (cookie 0).
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh timeout

b="$server_binary"
script="$tmpdir/probe.sh"
cat > "$script" <<'EOF'
#!/bin/sh
case "$1" in
  get_size) echo 1M ;;
  open) nbdkit-probe myscript_open 7 -42 "export '$3'" || exit 1
        echo handle ;;
  pread)
    if [ "$4" -eq 999424 ]; then
      nbdkit-probe myscript_bad 12abc || exit 1
    fi
    nbdkit-probe myscript_read "$3" "$4" "read $3 bytes at $4" || exit 1
    # From a child process, while the script waits for it.
    sh -c 'nbdkit-probe myscript_child "$1"' sh "$4" &
    wait
    dd if=/dev/zero count="$3" iflag=count_bytes 2>/dev/null ;;
  can_write) exit 3 ;;
  *) exit 2 ;;
esac
EOF
chmod +x "$script"

# Untraced first: the helper works, and a bad integer is the script's
# error, reported by the server.
t "$NBDKIT" -U - sh "$script" --run 'nbdsh -u "$uri" -c "
assert h.pread(512, 4096) == bytes(512)
h.set_strict_mode(0)
try:
    h.pread(512, 999424)
    raise Exception(\"the script did not fail\")
except nbd.Error as e:
    assert e.errno == \"EIO\", e.errno
"' 2> "$tmpdir/untraced.err" ||
  { cat "$tmpdir/untraced.err"; fail "the script failed untraced"; }
grep -q "pread: nbdkit-probe: 12abc: not an integer" "$tmpdir/untraced.err" ||
  { cat "$tmpdir/untraced.err"; fail "no error for nbdkit-probe's bad integer"; }

start_server sh "$script"
trace_start "$tmpdir/out" "
usdt:$b:nbdkit:request_start {
  printf(\"%llu start %d %d %d %d\n\", nsecs, arg0, arg1, arg2, arg3);
}
usdt:$b:nbdkit:user {
  printf(\"%llu user %d %d %s %d %d [%s]\n\", nsecs, arg0, arg1, str(arg2),
         (int64) arg3, (int64) arg4, str(arg5));
}"
t nbdsh -u "nbd+unix:///e1?socket=$sock" -c '
h.pread(512, 4096)
h.pread(1000, 8192)
' || fail "nbdsh failed under bpftrace"
sleep 1
trace_stop
trace_in_order "$tmpdir/out" \
  > "$tmpdir/sorted"
cat "$tmpdir/sorted"

set -- $(awk '$1 == "user" && $4 == "myscript_open"' "$tmpdir/sorted")
[ "$#" -eq 8 ] || fail "no user probe myscript_open"
id=$2
[ "$id" -gt 0 ] && [ "$3" -eq 0 ] ||
  fail "myscript_open: id $id, cookie $3 (expected > 0 and 0)"
grep -q "^user $id 0 myscript_open 7 -42 \[export 'e1'\]\$" "$tmpdir/sorted" ||
  fail "myscript_open: integers or text are wrong"
for r in "512 4096" "1000 8192"; do
  set -- $r
  count=$1 off=$2
  cookie="$(awk -v id="$id" -v off="$off" \
              '$1 == "start" && $2 == id && $4 == 0 && $5 == off { print $3 }' \
              "$tmpdir/sorted")"
  [ -n "$cookie" ] || fail "no request_start for the read at $off"
  grep -q "^user $id $cookie myscript_read $count $off \[read $count bytes at $off\]\$" \
    "$tmpdir/sorted" ||
    fail "no user probe myscript_read ($count, $off) with cookie $cookie"
  grep -q "^user $id $cookie myscript_child $off 0 \[\]\$" "$tmpdir/sorted" ||
    fail "no user probe myscript_child from the script's child process"
done
[ "$(grep -c '^user ' "$tmpdir/sorted")" -eq 5 ] ||
  fail "expected exactly 5 user probes"
echo "OK: nbdkit-probe in a sh plugin script fires the user probe"
