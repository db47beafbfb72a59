#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Bad input to the python plugin: scripts that cannot load stop the
# server at start-up with one clear line naming the script (and what is
# wrong); at run time a callback that raises, or answers with the wrong
# type or length, fails only its request, with one log line naming the
# script and the callback, and the client gets the script's errno
# (nbdkit.set_error, then an OSError's errno) or EIO.  The traceback of
# an exception is logged once per place it is raised from, not per
# request.  The server stays up and serves the next request.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh
[ -f "$abs_top_builddir/plugins/python/.libs/nbdkit-python-plugin.so" ] ||
  { echo "$0: SKIP: the python plugin is not built"; exit 77; }

# --- start-up failures: exit 1, one line naming the script -------------

# refuse NAME PATTERN [ARGS...]: $tmpdir/NAME.py must not start; its
# stderr has exactly one line matching PATTERN.
refuse ()
{
  local name="$1" pattern="$2"
  shift 2
  local st=0
  t "$NBDKIT" -U - python "$tmpdir/$name.py" "$@" --run true \
    2> "$tmpdir/$name.err" || st=$?
  cat "$tmpdir/$name.err"
  [ "$st" -eq 1 ] || fail "$name: exit status $st, expected 1"
  [ "$(grep -cE "$pattern" "$tmpdir/$name.err")" -eq 1 ] ||
    fail "$name: no single line matching: $pattern"
}

printf 'def open(readonly)\n    return 1\n' > "$tmpdir/syntax.py"
refuse syntax "python: error: .*/syntax.py: the script does not parse: SyntaxError"

printf 'raise RuntimeError("no disk today")\n' > "$tmpdir/raises.py"
refuse raises "python: error: .*/raises.py: the script failed while loading: RuntimeError: no disk today"

printf 'def open(r): return 1\ndef get_size(h): return 512\n' \
  > "$tmpdir/nopread.py"
refuse nopread "python: error: .*/nopread.py: the script does not define pread\(\)"

printf 'API_VERSION = 3\ndef open(r): return 1\ndef get_size(h): return 512\ndef pread(h, b, o, f): pass\n' \
  > "$tmpdir/api3.py"
refuse api3 "python: error: .*/api3.py: API_VERSION = 3"

cp "$tmpdir/api3.py" "$tmpdir/noconfig.py"
sed -i 's/^API_VERSION = 3/API_VERSION = 2/' "$tmpdir/noconfig.py"
refuse noconfig "python: error: .*/noconfig.py: config: the script takes no parameters .*size=1M" size=1M

expect_fail t "$NBDKIT" -U - python --run true 2> "$tmpdir/none.err"
grep -q "python: error: no script" "$tmpdir/none.err" || fail "no script: no error"

[ ! -e "$tmpdir/missing.py" ]
refuse missing "python: error: .*/missing.py: No such file"

# --- run-time failures --------------------------------------------------

cat > "$tmpdir/bad.py" <<'PY'
import errno
import nbdkit

API_VERSION = 2

def thread_model():
    return nbdkit.THREAD_MODEL_PARALLEL

def open(readonly):
    return nbdkit.export_name()

def get_size(h):
    if h == "badsize":
        return "large"
    if h == "negative":
        return -1
    return 1024 * 1024

def boom(offset):
    raise RuntimeError("boom at %d" % offset)

def pread(h, buf, offset, flags):
    if offset == 0:
        boom(offset)
    elif offset == 512:
        nbdkit.set_error(errno.ENOSPC)
        raise ValueError("full")
    elif offset == 1024:
        raise OSError(errno.ENOMEM, "no memory for this")
    elif offset == 1536:
        nbdkit.set_error(errno.EINVAL)
        raise OSError(errno.ENOMEM, "set_error wins")
    buf[:] = bytes(len(buf))

def extents(h, count, offset, flags):
    if offset == 0:
        return 42
    if offset == 4096:
        return [(offset, "long", 0)]
    if offset == 8192:
        return []
    return [(offset, count, 0)]
PY

cat > "$tmpdir/bad1.py" <<'PY'
def open(readonly):
    return 1

def get_size(h):
    return 1024 * 1024

def pread(h, count, offset):
    if offset == 0:
        return "not bytes"
    if offset == 512:
        return bytes(count - 1)
    if offset == 1024:
        return bytes(count + 1)
    return bytearray(count)
PY

# Two servers, their stderr kept to count the log lines.
sock2="$tmpdir/sock2"
uri2="nbd+unix:///?socket=$sock2"
err2="$tmpdir/bad.err"
"$NBDKIT" -f -U "$sock2" python "$tmpdir/bad.py" 2> "$err2" 9>&- &
pid2=$!
cleanup_fn _kill_pid "$pid2"
wait_for 20 -S "$sock2" || fail "bad.py: server did not start"

"$NBDKIT" -f -U "$tmpdir/sock1" python "$tmpdir/bad1.py" \
  2> "$tmpdir/bad1.err" 9>&- &
pid1=$!
cleanup_fn _kill_pid "$pid1"
wait_for 20 -S "$tmpdir/sock1" || fail "bad1.py: server did not start"

t nbdsh --base-allocation -u "$uri2" -c '
def expect(fn, errno):
    try:
        fn()
    except nbd.Error as e:
        assert e.errno == errno, "%s: got %s, expected %s" % (fn, e.errno, errno)
        return
    raise Exception("%s: did not fail" % fn)

expect(lambda: h.pread(512, 0), "EIO")
expect(lambda: h.pread(512, 0), "EIO")
expect(lambda: h.pread(512, 0), "EIO")
expect(lambda: h.pread(512, 512), "ENOSPC")
expect(lambda: h.pread(512, 1024), "ENOMEM")
expect(lambda: h.pread(512, 1536), "EINVAL")
assert h.pread(512, 2048) == bytes(512)
noop = lambda *args: 0
expect(lambda: h.block_status(4096, 0, noop), "EIO")
expect(lambda: h.block_status(4096, 4096, noop), "EIO")
expect(lambda: h.block_status(4096, 8192, noop), "EIO")
h.block_status(4096, 12288, noop)
assert h.pread(512, 4096) == bytes(512)
'
for e in badsize negative; do
  expect_fail t nbdsh -u "nbd+unix:///$e?socket=$sock2" -c 'h.get_size()' \
    2>/dev/null || fail "export $e: the connection did not fail"
done
t nbdsh -u "$uri2" -c 'assert h.get_size() == 1024 * 1024'

t nbdsh -u "nbd+unix:///?socket=$tmpdir/sock1" -c '
for off in (0, 512, 1024):
    try:
        h.pread(512, off)
        raise Exception("offset %d: no error" % off)
    except nbd.Error as e:
        assert e.errno == "EIO", e.errno
assert h.pread(512, 2048) == bytes(512)
'
kill -0 "$pid2" && kill -0 "$pid1" || fail "a server died"
_kill_pid "$pid2"
_kill_pid "$pid1"
cat "$err2" "$tmpdir/bad1.err"

# count FILE PATTERN N: exactly N lines of FILE match PATTERN.
count ()
{
  local n
  n="$(grep -cE "$2" "$1" || :)"
  [ "$n" -eq "$3" ] || fail "$1: $n lines match '$2', expected $3"
}
s="$tmpdir/bad.py"
count "$err2" "error: $s: pread: RuntimeError: boom at 0\$" 3
count "$err2" "error: $s: pread: traceback: Traceback" 4
count "$err2" "error: $s: pread: traceback: .*in boom\$" 1
count "$err2" "error: $s: pread: ValueError: full\$" 1
count "$err2" "error: $s: pread: OSError: \[Errno 12\] no memory for this\$" 1
count "$err2" "error: $s: extents: the value returned is not iterable" 1
count "$err2" "error: $s: extents: item 0 is not an \(offset, length, type\)" 1
count "$err2" "error: $s: extents: returned no extents" 1
count "$err2" "error: $s: get_size: returned str, not an integer" 1
count "$err2" "error: $s: get_size: returned a value out of range" 1
s="$tmpdir/bad1.py"
count "$tmpdir/bad1.err" "error: $s: pread: returned str, which is not a bytes-like object" 1
count "$tmpdir/bad1.err" "error: $s: pread: returned 511 bytes instead of 512" 1
count "$tmpdir/bad1.err" "error: $s: pread: returned 513 bytes instead of 512" 1

# -D python.tracebacks=1: the traceback of every exception.
t "$NBDKIT" -D python.tracebacks=1 -U - python "$tmpdir/bad.py" \
  --run 'nbdsh -u "$uri" -c "
for i in range(3):
    try:
        h.pread(512, 0)
    except nbd.Error:
        pass
"' 2> "$tmpdir/all.err"
count "$tmpdir/all.err" "pread: traceback: Traceback" 3
