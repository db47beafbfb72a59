#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The config, filter_unload, plugin_unload and log probes under
# bpftrace, on servers started after the tracer attached (the first
# two fire at start-up and exit).
#  - config: each layer that receives a parameter fires it, a filter's
#    passed-on key for both layers; a passphrase or password value is
#    "<hidden>", and the secret appears nowhere in the trace.
#  - unload: filter_unload then plugin_unload as the server exits.
#  - log, under --filter=offset file with -v: the server's own messages
#    have origin "nbdkit", the connection's id and "server/FILE.c:LINE";
#    the file plugin's message has origin "file" and the plugin's
#    object and offset; the -v line of each layer call of a read names
#    its layer and carries the read's cookie.
# Would catch: a secret printed in clear, a missing or misordered
# unload, the origin of a server message left at a layer's name after
# that layer's callback returned, a wrong id, cookie or where.
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh

b="$server_binary"
cat > "$tmpdir/trace.bt" <<BT
usdt:$b:nbdkit:config { printf("%llu %d config %s %s %s\n", nsecs, pid, str(arg0), str(arg1), str(arg2)); }
usdt:$b:nbdkit:filter_unload { printf("%llu %d filter_unload %s\n", nsecs, pid, str(arg0)); }
usdt:$b:nbdkit:plugin_unload { printf("%llu %d plugin_unload %s\n", nsecs, pid, str(arg0)); }
usdt:$b:nbdkit:connection_accept { printf("%llu %d accept %d\n", nsecs, pid, arg0); }
usdt:$b:nbdkit:request_start { printf("%llu %d request %d %d %d %d\n", nsecs, pid, arg0, arg1, arg2, arg3); }
usdt:$b:nbdkit:log {
  printf("%llu %d log|%s|%s|%d|%d|%s|%s\n", nsecs, pid, str(arg0), str(arg1),
         arg3, arg4, str(arg5), str(arg2));
}
BT
start_bpftrace 60 "$tmpdir/out" "$tmpdir/err" "$tmpdir/trace.bt"

truncate -s 1M "$tmpdir/disk"
t "$NBDKIT" -v -U - --filter=offset file "$tmpdir/disk" offset=4096 \
  --run 'nbdsh -u "$uri" -c "h.pread(4096, 8192)"' 2> "$tmpdir/stderr1"
t "$NBDKIT" -U - --filter=luks memory 1M passphrase=hunter2 --run true
expect_fail t "$NBDKIT" -U - memory 1M password=hunter2 --run true \
  2> "$tmpdir/stderr3"
sleep 1
interrupt_tracer "$bt"
trace_in_order "$tmpdir/out" \
  > "$tmpdir/got"
cat "$tmpdir/got"

# ---- config ----
for want in "config offset file $tmpdir/disk" "config file file $tmpdir/disk" \
            "config offset offset 4096" "config luks passphrase <hidden>" \
            "config memory password <hidden>"; do
  grep -q "^[0-9]* $want\$" "$tmpdir/got" || fail "no \"$want\""
done
! grep -q hunter2 "$tmpdir/got" || fail "a secret was traced in clear"

# ---- unload: each server's filters, then its plugin ----
for pair in "offset file" "luks memory"; do
  set -- $pair
  awk -v f="$1" -v p="$2" '
    $2 == "filter_unload" && $3 == f { fu = NR }
    $2 == "plugin_unload" && $3 == p { pu = NR }
    END { exit !(fu && pu && fu < pu) }' "$tmpdir/got" ||
    fail "no filter_unload $1 before plugin_unload $2"
done

# ---- log ----
id="$(awk '$2 == "accept" { print $3; exit }' "$tmpdir/got")"
[ -n "$id" ] && [ "$id" -gt 0 ] || fail "no connection_accept"
cookie="$(awk -v id="$id" '$2 == "request" && $3 == id && $5 == 0 && $6 == 8192 { print $4; exit }' "$tmpdir/got")"
[ -n "$cookie" ] || fail "no request_start for the read"
# Fields after "log": level origin id cookie where message.
cut -d' ' -f2- "$tmpdir/got" | grep '^log|' | cut -d'|' -f2- > "$tmpdir/log"
grep -Eq "^debug\|nbdkit\|$id\|0\|server/handshake\.c:[0-9]+\|handshake done" \
  "$tmpdir/log" || fail "no handshake message from server/handshake.c"
grep -Eq "^debug\|file\|$id\|0\|nbdkit-file-plugin\.so\+0x[0-9a-f]+\|file: opened" \
  "$tmpdir/log" || fail "the file plugin's message does not say where"
grep -Eq "^debug\|offset\|$id\|$cookie\|server/log\.c:[0-9]+\|pread count=4096 offset=8192\$" \
  "$tmpdir/log" || fail "no -v line of the offset filter's pread with the cookie"
grep -Eq "^debug\|file\|$id\|$cookie\|server/log\.c:[0-9]+\|pread count=4096 offset=12288\$" \
  "$tmpdir/log" || fail "no -v line of the file plugin's pread with the cookie"
grep -Eq "^error\|memory\|0\|0\|nbdkit-memory-plugin\.so\+0x[0-9a-f]+\|unknown parameter 'password'" \
  "$tmpdir/log" || fail "no error for the memory plugin's unknown parameter"
# The server's own messages outside any layer call are the server's.
awk -F'|' '$5 ~ /^server\// && $5 !~ /^server\/(log|public|backend|plugins|filters)\.c:/ &&
           $2 != "nbdkit" { print "origin " $2 ": " $0; bad = 1 }
           END { exit bad }' "$tmpdir/log" ||
  fail "a server message outside a layer call has a layer's origin"
