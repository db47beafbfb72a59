#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The curl plugin against a web server that fails
# (http-fault-server.py), with a client reading through it
# (fault-reader.py checks every read):
#  - while the web server answers 500, sends a body shorter than the
#    range asked (with a Content-Length to match), or breaks the body
#    off half-way, every read fails with EIO, and reads succeed again
#    on the same connection as soon as it behaves;
#  - while it is killed (SIGKILL, reads in flight) every read fails
#    with EIO, a client may still connect, and once it is restarted on
#    the same port both clients read the whole export right;
#  - no read hangs (each answers within 10 s), none fails with another
#    error, none that succeeds has a wrong byte; the server stays up.
# (A 206 whose Content-Range is not the range asked is issue 28's item
# 6 and is tested with it.)
# Catches: an error page or a truncated body passed to the client as
# data, a connection pool left broken after the web server died, a
# server that dies or hangs with its web server.
source "$(dirname "$0")/../functions.sh"
requires /usr/bin/python3 -c 'import nbd'
here="$(cd "$(dirname "$0")" && pwd)"

disk="$tmpdir/disk"
head -c 4M /dev/urandom > "$disk"
port="$(free_port)"
web=(/usr/bin/python3 "$here/http-fault-server.py" "$disk" "$tmpdir/port"
     --port "$port" --pidfile "$tmpdir/web.pid" --control "$tmpdir/mode")
"${web[@]}" 2> "$tmpdir/web.log" 9>&- &
web_pid=$!
cleanup_fn _kill_pid "$web_pid"
# Whichever web server runs at the end (the reader restarts it).
cleanup_fn sh -c 'kill -9 $(cat "$1") 2>/dev/null; :' sh "$tmpdir/web.pid"
wait_for 20 -s "$tmpdir/port" || fail "the web server did not start"

start_server curl "http://127.0.0.1:$port/disk" timeout=20
printf -v webcmd '%q ' "${web[@]}"
t /usr/bin/python3 "$here/fault-reader.py" --sock "$sock" --disk "$disk" \
  --pid "$server_pid" --control "$tmpdir/mode" \
  --upstream "$webcmd 2>> $tmpdir/web.log" --upstream-ready "$tmpdir/port" \
  --upstream-pidfile "$tmpdir/web.pid" \
  connect:a read:a:ok:30 \
  mode:500 read:a:eio:20 mode:ok read:a:ok:20 \
  mode:short read:a:eio:20 mode:ok read:a:ok:20 \
  mode:cut read:a:eio:20 mode:ok read:a:ok:20 \
  read-during:a:mode:500 mode:ok alive \
  read-during:a:up-kill read:a:eio:20 connect:b read:b:eio:10 alive \
  up-start read:a:ok:30 whole:a whole:b alive > "$tmpdir/out" \
  2> "$tmpdir/reader.err" ||
  { cat "$tmpdir/out"; tail -20 "$tmpdir/web.log"
    echo "--- the reader said:"; cat "$tmpdir/reader.err"
    fail "curl faults"; }
cat "$tmpdir/out"
echo "web server: $(grep -c '^GET' "$tmpdir/web.log") GETs," \
  "$(grep -c '^GET.* 500$' "$tmpdir/web.log") answered 500," \
  "$(grep -c '^GET.* short$' "$tmpdir/web.log") short," \
  "$(grep -c '^GET.* cut$' "$tmpdir/web.log") cut off"
