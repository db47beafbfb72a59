#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
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
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/perl-lua-compare.sh"
requires test -f "$abs_top_builddir/plugins/lua/.libs/nbdkit-lua-plugin.so"

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
start_fails ()
{
  local what="$1" want="$2"
  shift 2
  if t "$NBDKIT" -U - lua "$@" --run true > "$tmpdir/out" 2> "$tmpdir/err"
  then
    fail "$what: the server started"
  fi
  cat "$tmpdir/err"
  grep -q -- "$want" "$tmpdir/err" || fail "$what: no line '$want'"
}
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
