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
