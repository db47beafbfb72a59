# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tests/lang/lua.sh: the lua host's part of lang/host-test.sh (liblua5.4;
# Debian's 1.32 host, the reference, has Lua 5.3 and no nbdkit table).
probe_message="no room]"

# memory: it would catch values left on the Lua stack by a call, or a
# handle's reference in the registry not dropped at close (the garbage
# collector frees neither).
# lang_script NAME: the script NAME (probe, flat) on stdout.
lang_script ()
{
  case "$1" in
    probe) cat <<'LUA'
function config (key, value)
   nbdkit.probe ("luaconf", 7, -3, key .. "=" .. value)
end
function open (readonly) return {} end
function get_size (h) return 1048576 end
function pread (h, count, offset)
   if offset == 8192 then
      nbdkit.set_error (nbdkit.ENOSPC)
      error ("no room", 0)
   end
   -- Busy for 0.3 s of the process's CPU time (os.clock, Lua has no
   -- sleep of its own), so at least 0.2 s of wall time, whatever the
   -- server's other threads use meanwhile.
   local t = os.clock () + 0.3
   repeat until os.clock () >= t
   nbdkit.probe ("luaread", count, -offset,
                 "read " .. count .. " at " .. offset)
   return string.rep ("\0", count)
end
LUA
      ;;
    flat) cat <<'LUA'
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
      ;;
    # The server calls of nbdkit 1.34..1.40 (tests/lang/server-calls.sh).
    calls) cat <<'LUA'
local p, sec, nsec = 0, 0, 0
function config (key, value)
   if key == "prob" then p = nbdkit.parse_probability ("prob", value)
   elseif key == "delay" then sec, nsec = nbdkit.parse_delay ("delay", value)
   else error ("unknown parameter " .. key) end
end
function open (readonly) return {} end
function get_size (h) return 65536 end
function pread (h, count, offset)
   if offset == 4096 then nbdkit.disconnect (true) end
   if offset == 8192 then nbdkit.disconnect (false) end
   local line = ""
   if offset == 12288 then
      line = string.format ("%d %d %d", math.floor (p * 1000000 + 0.5),
                            sec, nsec)
   end
   return (line .. string.rep (" ", count)):sub (1, count)
end
LUA
      ;;
    *) fail "no lua script $1" ;;
  esac
}

# Same script, same bytes (after host-test.sh's same_example: Debian's
# host has Lua 5.3, ours 5.4; fast zero is refused as 1.32 does).  The
# example would catch a function called with the wrong arguments
# (offsets, counts, may_trim), a wrong default for can_write/can_trim,
# a broken zero or trim, a script= magic key that does not work
# ("nbdkit lua FILE").
lang_plugin ()
{
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
serial_copy "$tmpdir/serial.lua"

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
flag_bits "$tmpdir/flagbits.lua" 'w0,w4096,f,z8192:true,z8704:false,f' \
  'debug: flagbits flush 6$'

# A script run as a program: "#!.../nbdkit lua" in its first line
# makes the kernel run "nbdkit lua SCRIPT ARGS", the magic key at work
# (Lua skips a first line starting with #).
shebang_serves 'function open () return 1 end
function get_size () return 12345 end
function pread (h, c) return string.rep ("\0", c) end'
}

# The lua plugin's bad input: a function that raises an error (a string
# or any other value) gives the client EIO, as Debian's nbdkit 1.32
# host does, or, beyond 1.32 (whose scripts have no nbdkit table), the
# errno the script chose with nbdkit.set_error; a pread that returns
# nil, a number or too few bytes, and a get_size that returns no
# integer are EIO too, and each is one log line naming the script and
# the function; the server stays up and serves the next request.  A
# script that does not parse, lacks a required function, fails at
# start-up or in config, or is given a parameter it cannot take: one
# line naming it, exit 1.
lang_errors ()
{
script="$tmpdir/err.lua"
cat > "$script" <<'LUA'
function open (readonly) return {} end
function get_size (h) return 1048576 end
function can_write (h) return true end
function pread (h, count, offset)
   if offset == 512 then error ("the disk is on fire") end
   if offset == 1024 then error ({ code = 5 }) end
   if offset == 1536 then return nil end
   if offset == 2048 then return 42 end
   if offset == 2560 then return "short" end
   if offset == 3072 then return string.rep ("\1", count * 2) end
   if offset == 3584 then
      if nbdkit then nbdkit.set_error (nbdkit.ENOSPC) end
      error ("full")
   end
   if offset == 4096 then
      if nbdkit then nbdkit.set_error (1) end
      error ("not allowed")
   end
   return string.rep ("\0", count)
end
function pwrite (h, buf, offset)
   if nbdkit then nbdkit.set_error (nbdkit.EROFS) end
   error ("read-only today")
end
LUA

cat > "$tmpdir/client.py" <<'PY'
def err(fn):
    try:
        fn()
    except nbd.Error as e:
        return e.errno
    return "ok"
for off in (0, 512, 1024, 1536, 2048, 2560, 3072, 0, 3584, 4096):
    print("pread", off, err(lambda: h.pread(512, off)))
print("pread-long", h.pread(512, 3072) == b"\x01" * 512)
print("pwrite", err(lambda: h.pwrite(b"x" * 512, 0)))
PY
run_errors ()
{
  local name="$1" srv="$2"
  t "$srv" -U - lua "$script" --run "nbdsh -u \"\$uri\" -c - < $tmpdir/client.py" \
    > "$tmpdir/out.$name" 2> "$tmpdir/err.$name" || {
    cat "$tmpdir/out.$name" "$tmpdir/err.$name"
    fail "$name: the error script's run failed"
  }
}
run_errors ours "$NBDKIT"
run_errors ref "$ref_nbdkit"
cat "$tmpdir/out.ours" "$tmpdir/err.ours"
# Debian's host has no nbdkit.set_error: there the last three are EIO.
diff -u <(grep -Ev '^(pread (3584|4096)|pwrite) ' "$tmpdir/out.ref") \
        <(grep -Ev '^(pread (3584|4096)|pwrite) ' "$tmpdir/out.ours") ||
  fail "the client saw other errors than with Debian's nbdkit (- Debian's, + ours)"
grep -qx 'pread 3584 EIO' "$tmpdir/out.ref" || fail "Debian's host is not as expected"
grep -qx 'pread 512 EIO' "$tmpdir/out.ours" || fail "an error is not EIO"
grep -qx 'pread 3584 ENOSPC' "$tmpdir/out.ours" || fail "set_error is lost"
grep -qx 'pread 4096 EPERM' "$tmpdir/out.ours" || fail "set_error (1) is lost"
grep -qx 'pwrite EPERM' "$tmpdir/out.ours" || fail "EROFS is not EPERM"
for want in 'pread: .*err.lua:5: the disk is on fire$' \
            'pread: (error object is a table value)$' \
            'pread: returned a value that is not a string' \
            'pread: returned 5 bytes, expected 512' \
            'pread: .*err.lua:13: full$' \
            'pwrite: .*err.lua:23: read-only today$'; do
  grep -q "^nbdkit: lua\[[0-9]*\]: error: $script: $want" "$tmpdir/err.ours" ||
    fail "no log line '$script: $want'"
done
[ "$(grep -c 'pread: returned a value that is not a string' \
     "$tmpdir/err.ours")" -eq 2 ] || fail "nil and 42 are not both refused"

# A get_size that returns no integer (1.5, "lots"): the client cannot
# connect; the next ones can ("1048576" and the float 2^20 are integers).
cat > "$tmpdir/size.lua" <<'LUA'
local sizes = 0
function open (readonly) return 1 end
function get_size (h)
   sizes = sizes + 1
   if sizes == 1 then return 1.5 end
   if sizes == 2 then return "lots" end
   if sizes == 3 then return "1048576" end
   return 2 ^ 20
end
function pread (h, count, offset) return string.rep ("\0", count) end
LUA
t "$NBDKIT" -U - lua "$tmpdir/size.lua" --run '
  ! nbdinfo --size "$uri" || exit 9
  ! nbdinfo --size "$uri" || exit 9
  [ "$(nbdinfo --size "$uri")" = 1048576 ] || exit 9
  [ "$(nbdinfo --size "$uri")" = 1048576 ]' 2> "$tmpdir/err" ||
  fail "get_size: 1.5 or \"lots\" was taken, or \"1048576\" or 2^20 was not"
cat "$tmpdir/err"
[ "$(grep -c "error: $tmpdir/size.lua: get_size: returned a value that is not an integer" \
     "$tmpdir/err")" -eq 2 ] || fail "no two get_size lines"

# Start-up errors: exit 1, and one line that names the script.
printf 'function open (\n' > "$tmpdir/syntax.lua"
start_fails "a syntax error" "error: $tmpdir/syntax.lua: the script does not parse: .*syntax.lua:2:" \
  "$tmpdir/syntax.lua"
printf 'function open () end\nfunction get_size () end\n' > "$tmpdir/nopread.lua"
start_fails "no pread" "$tmpdir/nopread.lua: the script does not define the required function pread" \
  "$tmpdir/nopread.lua"
printf 'error ("cannot start")\n' > "$tmpdir/dies.lua"
start_fails "a script failing at start-up" "$tmpdir/dies.lua: the script failed when run at start-up: .*dies.lua:1: cannot start" \
  "$tmpdir/dies.lua"
start_fails "a parameter without config" \
  "$script: the script takes no parameters (no function config), but was given a=b" \
  "$script" a=b
cat > "$tmpdir/config.lua" <<'LUA'
function config (k, v) if k ~= "size" then error ("bad key " .. k, 0) end end
function open () return 1 end
function get_size () return 1 end
function pread () return "\0" end
LUA
start_fails "config failing" "$tmpdir/config.lua: config: bad key colour$" \
  "$tmpdir/config.lua" colour=blue
start_fails "no script" "the first parameter must be script=" foo=bar
start_fails "a missing script" "lua: error: $tmpdir/nosuch.lua: No such file or directory" \
  "$tmpdir/nosuch.lua"
}
