# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tests/compress-filters.sh: helpers for the tests of the read-only
# decompression filters (bzip2, lzip, indexed-gzip), sourced after
# functions.sh.
#
#   make_sample FILE SIZE SEED   SIZE bytes that compress somewhat:
#                                seeded random runs, text and zeroes
#   reads_match URI ORIGINAL [N] nbdsh: the export's size is ORIGINAL's,
#                                N (default 200) seeded random-offset
#                                reads and the last bytes match it, and
#                                the server fails write, trim and zero
#                                with EPERM or EROFS (read-only export)
#   bad_input REGEX ARGS...      a captive server on ARGS refuses the
#                                client's connection, and the log has
#                                REGEX; a second client, on a server
#                                that stays up, is refused the same way

make_sample ()
{
  /usr/bin/python3 - "$@" <<'PY'
import random, sys
path, size, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
r = random.Random(seed)
out = bytearray()
while len(out) < size:
    kind = r.randrange(3)
    n = r.randrange(1, 20000)
    if kind == 0:
        out += r.randbytes(n)
    elif kind == 1:
        out += (b"line %d of the sample\n" % r.randrange(1 << 30)) * (n // 30 + 1)
    else:
        out += bytes(n)
open(path, "wb").write(out[:size])
PY
}

reads_match ()
{
  local uri="$1" orig="$2" n="${3:-200}"
  t nbdsh -c - <<PY
import errno, random
# No client-side checks: the write, trim and zero below reach the
# server, and its answer is what is checked.
h.set_strict_mode(0)
h.connect_uri("$uri")
data = open("$orig", "rb").read()
size = len(data)
assert h.get_size() == size, (h.get_size(), size)
assert h.is_read_only()
r = random.Random(7)
for i in range($n):
    off = r.randrange(size)
    cnt = min(r.randrange(1, 70000), size - off)
    got = h.pread(cnt, off)
    assert got == data[off:off + cnt], (off, cnt)
tail = min(size, 4096)
assert h.pread(tail, size - tail) == data[size - tail:]
for name, call in (("pwrite", lambda: h.pwrite(b"x" * 512, 0)),
                   ("trim", lambda: h.trim(512, 0)),
                   ("zero", lambda: h.zero(512, 0))):
    try:
        call()
    except nbd.Error as e:
        assert e.errnum in (errno.EPERM, errno.EROFS), (name, e)
    else:
        raise AssertionError("%s on the read-only export succeeded" % name)
PY
}

bad_input ()
{
  local regex="$1" status=0 i
  shift
  t "$NBDKIT" -U - "$@" --run 'nbdinfo --size "$uri"' \
    > "$tmpdir/bad.out" 2> "$tmpdir/bad.err" || status=$?
  [ "$status" -ne 0 ] ||
    fail "$*: a client connected: $(cat "$tmpdir/bad.out")"
  grep -Eq -- "$regex" "$tmpdir/bad.err" ||
    { cat "$tmpdir/bad.err"; fail "$*: no /$regex/ in the server's log"; }
  # The server lives on and refuses the next client too.
  start_server "$@"
  for i in 1 2; do
    expect_fail t nbdinfo --size "$uri" > /dev/null 2>&1 ||
      fail "$*: client $i connected"
  done
  kill -0 "$server_pid" || fail "$*: the server died"
  stop_server
}
