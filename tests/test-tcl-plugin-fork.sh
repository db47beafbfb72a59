#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The tcl plugin in the background: nbdkit without -f forks after the
# script is evaluated; the interpreter, made by the main thread, goes
# with the main thread into the child and serves from the worker
# threads there.  Writes read back, the script's state from start-up
# (size=) is there, and the server stops on SIGTERM.  It would catch:
# an interpreter tied to a thread that the fork left behind, a lock
# held across the fork.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

sock="$tmpdir/sock"
pidfile="$tmpdir/pid"
t "$NBDKIT" --log=stderr -U "$sock" -P "$pidfile" \
  tcl "$abs_top_srcdir/plugins/tcl/examples/ramdisk.tcl" size=2097152 \
  2> "$tmpdir/log" || { cat "$tmpdir/log"; fail "the server did not start"; }
wait_for 20 -s "$pidfile" || { cat "$tmpdir/log"; fail "no pid file"; }
pid="$(cat "$pidfile")"
cleanup_fn _kill_pid "$pid"
t nbdsh -u "nbd+unix:///?socket=$sock" -c '
assert h.get_size() == 2097152
h.pwrite(b"background" * 100, 65536)
assert h.pread(1000, 65536) == b"background" * 100
' || { cat "$tmpdir/log"; fail "the background server did not serve"; }
kill -TERM "$pid"
wait_for 10 ! -e "/proc/$pid" ||
  fail "the background server did not stop on SIGTERM"
! grep -q error "$tmpdir/log" || { cat "$tmpdir/log"; fail "errors in the log"; }
echo "OK: the tcl plugin runs in the background"
