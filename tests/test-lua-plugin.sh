#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Same script, same bytes: the lua plugin's RAM disk example, run by
# Debian's nbdkit 1.32 lua host (Lua 5.3) and by ours (Lua 5.4), gives
# the client the same size, flags, write outcomes (fast zero refused
# as 1.32 does), map and bytes read back.  It would catch a function
# called with the wrong arguments (offsets, counts, may_trim), a wrong
# default for can_write/can_trim, a broken zero or trim, a script= magic
# key that does not work ("nbdkit lua FILE").
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/perl-lua-compare.sh"
requires test -f "$abs_top_builddir/plugins/lua/.libs/nbdkit-lua-plugin.so"

ex="$abs_top_srcdir/plugins/lua/examples/ramdisk.lua"
same_script ramdisk lua "$ex" size=3145728
same_script ramdisk-odd lua script="$ex" size=1049088

# A script with only the three required functions: read-only, no
# flush, no trim.
cat > "$tmpdir/minimal.lua" <<'LUA'
function open (readonly) return 1 end
function get_size (h) return 2 * 1024 * 1024 + 512 end
function pread (h, count, offset)
   local t = {}
   for o = offset, offset + count - 1, 8 do
      t[#t + 1] = string.pack (">i8", o)
   end
   return string.sub (table.concat (t), 1, count)
end
LUA
same_script minimal lua "$tmpdir/minimal.lua"

# Flags from the can_* functions; pwrite without can_write is
# writable; no zero function (the server writes zeroes instead).
cat > "$tmpdir/flags.lua" <<'LUA'
local disk = string.rep ("\x55", 1024 * 1024)
function open (readonly) return {} end
function get_size (h) return #disk end
function is_rotational (h) return true end
function can_flush (h) return true end
function can_trim (h) return false end
function pread (h, count, offset)
   return string.sub (disk, offset + 1, offset + count)
end
function pwrite (h, buf, offset)
   disk = string.sub (disk, 1, offset) .. buf ..
      string.sub (disk, offset + #buf + 1)
end
function flush (h) end
function trim (h, count, offset) error ("trim must not be called") end
LUA
same_script flags lua "$tmpdir/flags.lua"

# Where Debian's 1.32 host is wrong: a script with flush but no
# can_flush gets can_flush false from it, although its page says the
# callbacks work as in C, where a plugin with flush can flush.  Ours
# answers true.
cat > "$tmpdir/flush-only.lua" <<'LUA'
function open (readonly) return {} end
function get_size (h) return 65536 end
function pread (h, count, offset) return string.rep ("\0", count) end
function pwrite (h, buf, offset) end
function flush (h) end
LUA
t "$NBDKIT" -U - lua "$tmpdir/flush-only.lua" --run 'nbdsh -u "$uri" -c "
assert h.can_flush()
h.flush()
"' || fail "a script with flush and no can_flush cannot flush"

# --dump-plugin: the thread model of Debian's host, lua_version as a
# number, then the script's dump_plugin lines.
printf 'function dump_plugin () print ("ramdisk_extra=1") end\n' > "$tmpdir/dump.lua"
cat "$ex" >> "$tmpdir/dump.lua"
diff -u <("$ref_nbdkit" lua "$tmpdir/dump.lua" --dump-plugin | grep thread_model) \
        <(t "$NBDKIT" lua "$tmpdir/dump.lua" --dump-plugin | grep thread_model) ||
  fail "the thread model differs from Debian's host's"
t "$NBDKIT" lua "$tmpdir/dump.lua" --dump-plugin | tail -2 | tr '\n' ' ' |
  grep -Eqx 'lua_version=5\.4\.[0-9]+ ramdisk_extra=1 ' ||
  fail "--dump-plugin does not end with lua_version and the script's lines"

# The collector is in generational mode when the script loads (the
# page says so; incremental mode slowed large reads after small ones),
# and a script can switch it back.
cat > "$tmpdir/gc.lua" <<'LUA'
local first = collectgarbage ("incremental")
local second = collectgarbage ("incremental")
function dump_plugin () print ("gc=" .. first .. "," .. second) end
function open (readonly) return 1 end
function get_size (h) return 512 end
function pread (h, count, offset) return string.rep ("\0", count) end
LUA
t "$NBDKIT" lua "$tmpdir/gc.lua" --dump-plugin | grep -qx 'gc=generational,incremental' ||
  fail "the collector is not generational at load, or a script cannot switch it"

# One Lua state, serialize_all_requests: two clients with 16 requests in
# flight each copy the same bytes as from Debian's host (two calls at
# once into one state would corrupt it).
cat > "$tmpdir/serial.lua" <<'LUA'
function open (readonly) return 1 end
function get_size (h) return 4 * 1024 * 1024 end
function pread (h, count, offset)
   return string.rep (string.pack (">i8", offset), count // 8)
end
LUA
copy2='for i in 1 2; do
  nbdcopy --requests=16 "$uri" - | sha256sum > '"$tmpdir"'/copy.$i &
done; wait; cat '"$tmpdir"'/copy.1 '"$tmpdir"'/copy.2'
t "$NBDKIT" -U - lua "$tmpdir/serial.lua" --run "$copy2" > "$tmpdir/serial.ours" ||
  fail "parallel clients failed"
t "$ref_nbdkit" -U - lua "$tmpdir/serial.lua" --run "$copy2" > "$tmpdir/serial.ref" ||
  fail "parallel clients failed with Debian's nbdkit"
cat "$tmpdir/serial.ours"
[ "$(sort -u "$tmpdir/serial.ours" | wc -l)" -eq 1 ] &&
  cmp "$tmpdir/serial.ours" "$tmpdir/serial.ref" ||
  fail "parallel clients copied other bytes than with Debian's nbdkit"

# The arguments nbdkit 1.32 gives: zero's may_trim is true unless the
# client asked for no hole; a FUA write is a write then a flush.  Both
# hosts agree.  nbdkit.debug (ours only) reaches the log under -v.
cat > "$tmpdir/flagbits.lua" <<'LUA'
local seen = {}
function open (readonly) return 1 end
function get_size (h) return 65536 end
function can_write (h) return true end
function can_flush (h) return true end
function pread (h, count, offset)
   local s = table.concat (seen, ",")
   return s .. string.rep (" ", count)
end
function pwrite (h, buf, offset) seen[#seen + 1] = "w" .. offset end
function zero (h, count, offset, may_trim)
   seen[#seen + 1] = "z" .. offset .. ":" .. tostring (may_trim)
end
function flush (h)
   seen[#seen + 1] = "f"
   if nbdkit then nbdkit.debug ("flagbits flush " .. #seen) end
end
LUA
flagclient='nbdsh -u "$uri" -c "
h.pwrite(b\"a\", 0)
h.pwrite(b\"b\", 4096, nbd.CMD_FLAG_FUA)
h.zero(512, 8192)
h.zero(512, 8704, nbd.CMD_FLAG_NO_HOLE)
h.flush()
print(h.pread(64, 0).decode().strip())
"'
t "$NBDKIT" -v -U - lua "$tmpdir/flagbits.lua" --run "$flagclient" \
  > "$tmpdir/flagbits.ours" 2> "$tmpdir/flagbits.err" ||
  fail "the flags script failed"
t "$ref_nbdkit" -U - lua "$tmpdir/flagbits.lua" --run "$flagclient" \
  > "$tmpdir/flagbits.ref" || fail "the flags script failed with Debian's nbdkit"
cat "$tmpdir/flagbits.ours"
cmp "$tmpdir/flagbits.ours" "$tmpdir/flagbits.ref" ||
  fail "the functions saw other arguments than with Debian's host: $(cat "$tmpdir/flagbits.ref")"
grep -qx 'w0,w4096,f,z8192:true,z8704:false,f' "$tmpdir/flagbits.ours" ||
  fail "unexpected arguments"
grep -q 'debug: flagbits flush 6$' "$tmpdir/flagbits.err" ||
  fail "no nbdkit.debug line"

# A script run as a program: "#!.../nbdkit lua" in its first line
# makes the kernel run "nbdkit lua SCRIPT ARGS", the magic key at work
# (Lua skips a first line starting with #).
printf '#!%s lua\nfunction open () return 1 end\nfunction get_size () return 12345 end\nfunction pread (h, c) return string.rep ("\\0", c) end\n' \
  "$NBDKIT" > "$tmpdir/shebang.lua"
chmod +x "$tmpdir/shebang.lua"
[ "$(t "$tmpdir/shebang.lua" -U - --run 'nbdinfo --size "$uri"')" = 12345 ] ||
  fail "a shebang script does not serve"
