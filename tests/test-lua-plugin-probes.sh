#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The lua plugin's probes under bpftrace: lua_call_start and
# lua_call_done fire around each function the host calls, with the
# request's connection id and cookie (those of the server's
# request_start), the function's name, the time spent in it (a pread that
# spins 0.3 s of CPU takes >= 0.2 s), the errno it failed with (28 after
# nbdkit.set_error (nbdkit.ENOSPC)) and its error text; config fires them
# outside any connection (id and cookie 0).  nbdkit.probe fires the
# server's probe "user" with the script's arguments and the same ids.
# It would catch a probe missing on an error path, ids not passed,
# a wrong duration or errno, and nbdkit.probe not reaching nbdkit_probe.
source "$(dirname "$0")/functions.sh"
requires_cmd bpftrace nbdsh timeout
requires_root
requires_probes
tracing_lock

so="$abs_top_builddir/plugins/lua/.libs/nbdkit-lua-plugin.so"
[ -f "$so" ] || fail "$so not built"
b="$server_binary"
script="$tmpdir/probe.lua"
cat > "$script" <<'LUA'
function config (key, value)
   nbdkit.probe ("luaconf", 7, -3, key .. "=" .. value)
end
function open (readonly) return {} end
function get_size (h) return 1048576 end
function pread (h, count, offset)
   if offset == 512 then
      nbdkit.set_error (nbdkit.ENOSPC)
      error ("no room", 0)
   end
   -- Busy for 0.3 s of the process's CPU time (os.clock, Lua has no
   -- sleep of its own), so at least 0.2 s of wall time, whatever the
   -- server's other threads use meanwhile.
   local t = os.clock () + 0.3
   repeat until os.clock () >= t
   nbdkit.probe ("luaread", count, offset, "lua read")
   return string.rep ("\0", count)
end
LUA

# bpftrace first: config fires while the server starts.
cat > "$tmpdir/trace.bt" <<BT
usdt:$b:nbdkit:request_start {
  printf("%llu start %d %d %d %d\n", nsecs, arg0, arg1, arg2, arg5);
}
usdt:$b:nbdkit:user {
  printf("%llu user %d %d %s %d %d [%s]\n", nsecs, arg0, arg1, str(arg2),
         (int64) arg3, (int64) arg4, str(arg5));
}
usdt:$so:nbdkit:lua_call_start {
  printf("%llu call %d %d %s\n", nsecs, arg0, arg1, str(arg2));
}
usdt:$so:nbdkit:lua_call_done {
  printf("%llu done %d %d %s %d %d [%s]\n", nsecs, arg0, arg1, str(arg2),
         arg3 >= 200000000, arg4, str(arg5));
}
BT
timeout -k 120 60 bpftrace "$tmpdir/trace.bt" > "$tmpdir/out" \
  2> "$tmpdir/out.err" &
bt=$!
cleanup_fn _kill_pid "$bt"
wait_for_bpftrace "$bt" "$tmpdir/out" "$tmpdir/out.err"

t "$NBDKIT" -U - lua "$script" size=1 --run 'nbdsh -u "$uri" -c "
h.pread(2048, 4096)
try:
    h.pread(512, 512)
except nbd.Error:
    pass"' || fail "the lua plugin under bpftrace failed"
sleep 1
interrupt_tracer "$bt"
trace_in_order "$tmpdir/out" > "$tmpdir/sorted"
cat "$tmpdir/sorted"

grep -q '^call 0 0 config$' "$tmpdir/sorted" || fail "no lua_call_start config"
grep -q '^done 0 0 config 0 0 \[\]$' "$tmpdir/sorted" ||
  fail "no lua_call_done config (id 0, cookie 0, errno 0)"
grep -q '^user 0 0 luaconf 7 -3 \[size=1\]$' "$tmpdir/sorted" ||
  fail "no user probe luaconf"
set -- $(awk '$1 == "start" && $4 == 0 && $5 == 4096' "$tmpdir/sorted")
[ "$#" -eq 5 ] || fail "no request_start for the read"
grep -q "^call $2 $3 pread\$" "$tmpdir/sorted" ||
  fail "no lua_call_start pread with the read's id $2 and cookie $3"
grep -q "^done $2 $3 pread 1 0 \\[\\]\$" "$tmpdir/sorted" ||
  fail "no lua_call_done pread (>= 0.2 s, errno 0) with id $2 cookie $3"
grep -q "^user $2 $3 luaread 2048 4096 \\[lua read\\]\$" "$tmpdir/sorted" ||
  fail "no user probe luaread with the read's id $2 and cookie $3"
set -- $(awk '$1 == "start" && $4 == 0 && $5 == 512' "$tmpdir/sorted")
[ "$#" -eq 5 ] || fail "no request_start for the failing read"
grep -q "^done $2 $3 pread 0 28 \\[no room\\]\$" "$tmpdir/sorted" ||
  fail "no lua_call_done pread (errno 28, 'no room') with id $2 cookie $3"
grep -q '^done [1-9][0-9]* 0 open 0 0 \[\]$' "$tmpdir/sorted" ||
  fail "no lua_call_done open in the connection"
echo "OK: the lua plugin's probes"
