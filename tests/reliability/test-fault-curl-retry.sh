#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# With --filter=retry in front of the curl plugin, nbdcopy completes
# and its copy is right although the web server (http-fault-server.py)
# answers some GETs with 500, sends some bodies short or breaks them
# off, and is killed (SIGKILL, in the middle of a body) and restarted
# on the same port a second later, during the copy.  The faults fall on
# fixed GETs (--faults), so each run meets the same ones whatever the
# timing; the logs show that each fault was met and that the restarted
# server served the rest.
# Catches: a failed transfer not retried, a retry that returns the
# spoilt bytes, a pool that keeps a dead connection after the restart.
source "$(dirname "$0")/../functions.sh"
requires_cmd nbdcopy cmp
here="$(cd "$(dirname "$0")" && pwd)"

disk="$tmpdir/disk"
head -c 4M /dev/urandom > "$disk"
port="$(free_port)"
web=(/usr/bin/python3 "$here/http-fault-server.py" "$disk" "$tmpdir/port"
     --port "$port" --pidfile "$tmpdir/web.pid")

# The first web server dies of SIGKILL at its 24th GET; a second starts
# on the same port 1 s later, with faults of its own.
(
  "${web[@]}" --faults 3:500,4:500,9:short,14:cut,24:kill \
    2> "$tmpdir/web1.log" || :
  sleep 1
  rm -f "$tmpdir/port"
  exec "${web[@]}" --faults 5:500,10:short,15:cut 2> "$tmpdir/web2.log"
) 9>&- &
sup=$!
cleanup_fn _kill_pid "$sup"
cleanup_fn sh -c 'kill -9 $(cat "$1") 2>/dev/null; :' sh "$tmpdir/web.pid"
wait_for 20 -s "$tmpdir/port" || fail "the web server did not start"

start_server --filter=retry curl "http://127.0.0.1:$port/disk" timeout=20 \
  retries=10 retry-delay=1 retry-exponential=no
start=$SECONDS
t nbdcopy --request-size=65536 "$uri" "$tmpdir/copy" 2> "$tmpdir/copy.err" ||
  { cat "$tmpdir/copy.err"; fail "the copy failed despite the retry filter"; }
cmp "$disk" "$tmpdir/copy" || fail "the copy's bytes are wrong"
kill -0 "$server_pid" || fail "the server died"

for kind in 500 short cut kill; do
  grep -q " $kind\$" "$tmpdir/web1.log" ||
    fail "the first web server never injected '$kind'"
done
for kind in 500 short cut; do
  grep -q " $kind\$" "$tmpdir/web2.log" ||
    fail "the restarted web server never injected '$kind'"
done
echo "nbdcopy of 4 MiB complete and right in $(( SECONDS - start )) s;" \
  "GETs: $(grep -c '^GET' "$tmpdir/web1.log") before the kill," \
  "$(grep -c '^GET' "$tmpdir/web2.log") after;" \
  "faults met: $(cat "$tmpdir/web1.log" "$tmpdir/web2.log" |
                 grep -cv ' ok$')"
