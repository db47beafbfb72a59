#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A tracer that attaches to a running server learns every live
# connection from connection_info (docs/nbdkit-probes.pod): clients
# connect first, bpftrace attaches after, and the trace must name, by
# connection id, the export, the peer, the transport and the Unix
# client's pid and uid of
#   A  an nbdsh that negotiated export "foo" and then sits idle, and
#      whose later read request_start joins to "foo" by id;
#   B  an nbdsh still negotiating (option mode): export "";
# and a second bpftrace, attached while the first still is, must get
# the same list.  A client D that connects while a tracer is attached
# gets connection_accept with its pid and uid, and connection_info
# right at the end of its negotiation (export "baz").  Then a TCP
# client on 127.0.0.1 (export "bar", pid and uid -1), and a TLS one
# (transport "unix+tls").
# It would catch: no connection_info (on main the probe does not exist
# and bpftrace cannot attach), a watcher that misses idle or negotiating
# connections, one that answers only the first tracer, wrong fields
# (pid not the client's, export not published, transport, peer, TLS),
# a connection_info missing at the end of negotiation.
source "$(dirname "$0")/functions.sh"
requires_cmd bpftrace nbdsh psktool
requires_root
requires_probes
assert_tls_build
tracing_lock

b="$server_binary"
# "first N" is how many ms after the tracer was in (BEGIN runs once
# every probe is attached) the first connection_info came;
# "negotiated" is a connection_info within 10 ms of the connection's
# handshake_done (the watcher repeats only every 400 ms).
program="
BEGIN { @t0 = nsecs; }
usdt:$b:nbdkit:connection_accept {
  printf(\"accept %d peer=%s transport=%s pid=%d uid=%d\n\",
         arg0, str(arg2), str(arg3), arg4, arg5);
}
usdt:$b:nbdkit:handshake_done { @hs[arg0] = nsecs; }
usdt:$b:nbdkit:connection_info {
  if (@first == 0) {
    @first = 1;
    printf(\"first %d\n\", (nsecs - @t0) / 1000000);
  }
  if (@hs[arg0] != 0 && nsecs - @hs[arg0] < 10000000) {
    printf(\"negotiated %d export=%s\n\", arg0, str(arg1));
  }
  printf(\"info %d export=%s peer=%s transport=%s pid=%d uid=%d\n\",
         arg0, str(arg1), str(arg2), str(arg3), arg4, arg5);
  @export[arg0] = str(arg1);
}
usdt:$b:nbdkit:request_start {
  printf(\"request %d command=%d offset=%d export=%s\n\", arg0, arg2, arg3,
         @export[arg0]);
}
END { clear(@export); clear(@t0); clear(@first); clear(@hs); }
"

# wait_file FILE: wait (at most 20 s) for FILE to exist.
wait_file ()
{
  wait_for 20 -s "$1" || fail "$1 did not appear"
}

# client NAME SETUP THEN: a client script for nbdsh: run SETUP, write
# our pid to $tmpdir/NAME.pid, run THEN, wait for $tmpdir/end.  Every
# wait is bounded (40 s).
client ()
{
  local name="$1" setup="$2" then="$3"
  cat <<PY
import os, time
d = "$tmpdir"
def wait(f):
    for i in range(400):
        if os.path.exists(d + "/" + f):
            return
        time.sleep(0.1)
    raise SystemExit("$name: no " + f)
$setup
with open(d + "/$name.pid.tmp", "w") as f:
    f.write("%d\n" % os.getpid())
os.rename(d + "/$name.pid.tmp", d + "/$name.pid")
$then
wait("end")
PY
}

# info_line OUT ID: the first connection_info line for ID in OUT.
info_line ()
{
  grep -m1 "^info $2 " "$1" || :
}

# --- Unix: one idle, one negotiating, two tracers ---------------------
start_server memory 1M

t nbdsh -u "nbd+unix:///foo?socket=$sock" \
  -c "$(client a '' 'wait("a.go")
h.pread(4096, 8192)')" > "$tmpdir/a.log" 2>&1 &
a_job=$!
cleanup_fn _kill_pid "$a_job"
t nbdsh -c "$(client b "h.set_opt_mode(True)
h.connect_uri('nbd+unix:///?socket=$sock')" '')" > "$tmpdir/b.log" 2>&1 &
b_job=$!
cleanup_fn _kill_pid "$b_job"
cleanup_fn touch "$tmpdir/end"
wait_file "$tmpdir/a.pid"
wait_file "$tmpdir/b.pid"
a_pid=$(cat "$tmpdir/a.pid")
b_pid=$(cat "$tmpdir/b.pid")

# Both clients are connected before any tracer: only the watcher can
# tell the tracer about them.
trace_start "$tmpdir/one" "$program"
one=$tracer
wait_for_output "$tmpdir/one" "pid=$a_pid " "$one" 10 ||
  { cat "$tmpdir/one" "$tmpdir/one.err"; fail "tracer 1: no connection_info for client A"; }
wait_for_output "$tmpdir/one" "pid=$b_pid " "$one" 10 ||
  { cat "$tmpdir/one"; fail "tracer 1: no connection_info for client B"; }

# D connects while tracer 1 is attached.
t nbdsh -u "nbd+unix:///baz?socket=$sock" \
  -c "$(client d '' '')" > "$tmpdir/d.log" 2>&1 &
d_job=$!
cleanup_fn _kill_pid "$d_job"
wait_file "$tmpdir/d.pid"
d_pid=$(cat "$tmpdir/d.pid")
wait_for_output "$tmpdir/one" "^accept [0-9]+ .* pid=$d_pid " "$one" 10 ||
  { cat "$tmpdir/one"; fail "tracer 1: no connection_accept for client D"; }
d_id=$(awk -v p="pid=$d_pid" '$1 == "accept" && $5 == p { print $2; exit }' \
         "$tmpdir/one")
wait_for_output "$tmpdir/one" "^negotiated $d_id export=baz\$" "$one" 10 ||
  { cat "$tmpdir/one"; fail "tracer 1: no connection_info as D's negotiation ended"; }
grep -q "^accept $d_id peer=unix transport=unix pid=$d_pid uid=0\$" \
  "$tmpdir/one" || fail "tracer 1: wrong connection_accept for D"

# A second tracer while the first is attached.
trace_start "$tmpdir/two" "$program"
two=$tracer
wait_for_output "$tmpdir/two" "pid=$a_pid " "$two" 10 ||
  { cat "$tmpdir/two" "$tmpdir/two.err"; fail "tracer 2: no connection_info for client A"; }
wait_for_output "$tmpdir/two" "pid=$b_pid " "$two" 10 ||
  { cat "$tmpdir/two"; fail "tracer 2: no connection_info for client B"; }

# Now A reads: both tracers must name its export on the request.
touch "$tmpdir/a.go"
for out in one two; do
  wait_for_output "$tmpdir/$out" '^request [0-9]+ command=0 offset=8192 ' \
    "${!out}" 10 ||
    { cat "$tmpdir/$out"; fail "tracer $out: no request_start for A's read"; }
done
touch "$tmpdir/end"
wait "$a_job" || { cat "$tmpdir/a.log"; fail "client A failed"; }
wait "$b_job" || { cat "$tmpdir/b.log"; fail "client B failed"; }
wait "$d_job" || { cat "$tmpdir/d.log"; fail "client D failed"; }
tracer=$one; trace_stop
tracer=$two; trace_stop

for out in one two; do
  echo "--- tracer $out"
  cat "$tmpdir/$out"
  a_id=$(awk -v p="pid=$a_pid" '$1 == "info" && $6 == p { print $2; exit }' \
           "$tmpdir/$out")
  b_id=$(awk -v p="pid=$b_pid" '$1 == "info" && $6 == p { print $2; exit }' \
           "$tmpdir/$out")
  [ -n "$a_id" ] && [ -n "$b_id" ] && [ "$a_id" != "$b_id" ] ||
    fail "tracer $out: A and B are not two connections"
  [ "$(info_line "$tmpdir/$out" "$a_id")" = \
    "info $a_id export=foo peer=unix transport=unix pid=$a_pid uid=0" ] ||
    fail "tracer $out: wrong connection_info for A"
  [ "$(info_line "$tmpdir/$out" "$b_id")" = \
    "info $b_id export= peer=unix transport=unix pid=$b_pid uid=0" ] ||
    fail "tracer $out: wrong connection_info for B (still negotiating)"
  grep -q "^request $a_id command=0 offset=8192 export=foo\$" "$tmpdir/$out" ||
    fail "tracer $out: A's read does not join to export foo"
  # The promise is 0.5 s (a tick of 0.2 s for the first tracer, a
  # repeat every 0.4 s for the next); 1 s leaves room for a loaded
  # machine, and still catches a watcher that looks only every second
  # or more.
  first=$(awk '$1 == "first" { print $2; exit }' "$tmpdir/$out")
  [ -n "$first" ] && [ "$first" -lt 1000 ] ||
    fail "tracer $out: the list came ${first:-never} ms after attaching"
done
stop_server

# --- TCP on 127.0.0.1: no pid or uid ----------------------------------
rm -f "$tmpdir"/*.pid "$tmpdir"/*.go "$tmpdir/end"
start_tcp_server memory 1M
t nbdsh -u "nbd://127.0.0.1:$port/bar" \
  -c "$(client c '' '')" > "$tmpdir/c.log" 2>&1 &
c_job=$!
cleanup_fn _kill_pid "$c_job"
wait_file "$tmpdir/c.pid"
trace_start "$tmpdir/tcp" "$program"
wait_for_output "$tmpdir/tcp" '^info [0-9]+ export=bar ' "$tracer" 10 ||
  { cat "$tmpdir/tcp" "$tmpdir/tcp.err"; fail "TCP: no connection_info"; }
touch "$tmpdir/end"
wait "$c_job" || { cat "$tmpdir/c.log"; fail "client C failed"; }
trace_stop
echo "--- tcp"
cat "$tmpdir/tcp"
grep -Eq '^info [0-9]+ export=bar peer=127\.0\.0\.1:[0-9]+ transport=tcp pid=-1 uid=-1$' \
  "$tmpdir/tcp" || fail "TCP: wrong connection_info"
stop_server

# --- TLS: the transport says so ---------------------------------------
rm -f "$tmpdir"/*.pid "$tmpdir/end"
psktool -u alice -p "$tmpdir/keys.psk" >/dev/null
start_server --tls=require --tls-psk="$tmpdir/keys.psk" memory 1M
t nbdsh -c "$(client e "h.set_uri_allow_local_file(True)
h.connect_uri('nbds+unix://alice@/sec?socket=$sock&tls-psk-file=$tmpdir/keys.psk')" '')" \
  > "$tmpdir/e.log" 2>&1 &
e_job=$!
cleanup_fn _kill_pid "$e_job"
wait_file "$tmpdir/e.pid"
e_pid=$(cat "$tmpdir/e.pid")
trace_start "$tmpdir/tls" "$program"
wait_for_output "$tmpdir/tls" "^info [0-9]+ export=sec " "$tracer" 10 ||
  { cat "$tmpdir/tls" "$tmpdir/tls.err"; fail "TLS: no connection_info"; }
touch "$tmpdir/end"
wait "$e_job" || { cat "$tmpdir/e.log"; fail "client E failed"; }
trace_stop
echo "--- tls"
cat "$tmpdir/tls"
grep -Eq "^info [0-9]+ export=sec peer=unix transport=unix\+tls pid=$e_pid uid=0\$" \
  "$tmpdir/tls" || fail "TLS: wrong connection_info"
