#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The lua plugin's memory stays flat: after a first batch of 20000
# requests (reads and writes) and 300 connections warms the interpreter
# up, a second batch as big must not grow the server's resident size
# by more than 1 MiB.
# It would catch values left on the Lua stack by a call, or a handle's
# reference in the registry not dropped at close (the garbage collector
# frees neither).
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh
requires test -f "$abs_top_builddir/plugins/lua/.libs/nbdkit-lua-plugin.so"
skip_under_sanitizers "RSS there is ASan's quarantine and shadow memory, not the plugin's"

cat > "$tmpdir/flat.lua" <<'LUA'
local disk = string.rep ("\0", 65536)
-- A handle that costs 8 KiB, so that handles never released show.
function open (readonly) return { pad = string.rep ("x", 8192) } end
function get_size (h) return #disk end
function can_write (h) return true end
function pread (h, count, offset)
   return string.sub (disk, offset + 1, offset + count)
end
function pwrite (h, buf, offset)
   disk = string.sub (disk, 1, offset) .. buf ..
      string.sub (disk, offset + #buf + 1)
end
LUA
start_server lua "$tmpdir/flat.lua"
rss () { awk '$1 == "VmRSS:" { print $2 }' "/proc/$server_pid/status"; }
# Requests, and connections (each an open and a close, whose handle
# must be released).
batch='
for i in range(10000):
    h.pread(512, (i * 512) % 65024)
    h.pwrite(b"x" * 16, (i * 16) % 65520)
for i in range(300):
    c = nbd.NBD()
    c.connect_uri(h.get_uri())
    c.pread(512, 0)
    c.shutdown()
'
t nbdsh -u "$uri" -c "$batch" || fail "the first batch failed"
before=$(rss)
t nbdsh -u "$uri" -c "$batch" || fail "the second batch failed"
after=$(rss)
echo "VmRSS: $before KiB after the first batch, $after KiB after the second"
[ "$after" -le $(( before + 1024 )) ] ||
  fail "the server grew by $(( after - before )) KiB over a batch"
