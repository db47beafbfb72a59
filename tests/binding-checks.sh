# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Checks shared by the tests of the language bindings (Rust, Go):
# each binding ships the same two examples, a RAM disk and a plugin
# whose failures are on purpose, so the same checks prove both.
# Sourced after functions.sh.

# binding_same_bytes SO: the RAM disk example SO (a plugin .so) under
# our server and Debian's nbdkit gives the same bytes, size, flags and
# map after the same writes, zero and trim; the map is the expected one.
binding_same_bytes ()
{
  local so="$1" srv bin
  cat > "$tmpdir/session.py" <<'PY'
import hashlib
h.pwrite(b"bind" * 4096, 70000)
h.pwrite(b"\x01" * 65536, 3 << 20)
h.zero(65536 * 2, 65536 * 4)
h.trim(65536, 3 << 20)
h.flush()
data = h.pread(4 << 20, 0)
print("md5", hashlib.md5(data).hexdigest())
print("size", h.get_size(), "ro", h.is_read_only(), "multi", h.can_multi_conn(),
      "zero", h.can_zero(), "trim", h.can_trim(), "flush", h.can_flush())
PY
  # Each server runs in the foreground with the client apart, not with
  # --run: Debian's nbdkit 1.32 serves a --run command from a child it
  # forks after loading the plugin, and a Go plugin's runtime does not
  # survive that fork (its threads are gone); 11 of 60 such runs of
  # this session hung there.  Ours serves from the process that loaded
  # the plugin, and binding_errors runs it with --run.
  for srv in ours debian; do
    bin="$NBDKIT"
    [ $srv = debian ] && bin=/usr/bin/nbdkit
    NBDKIT="$bin" start_server "$so" 4M
    { t nbdsh -u "$uri" -c "exec(open('$tmpdir/session.py').read())" &&
        t nbdinfo --map "$uri"; } > "$tmpdir/$srv.out" ||
      { cat "$tmpdir/$srv.out"; fail "the RAM disk failed under $srv"; }
    stop_server
    cat "$tmpdir/$srv.out"
  done
  cmp "$tmpdir/ours.out" "$tmpdir/debian.out" ||
    fail "ours and Debian's nbdkit differ on the same plugin"
  grep -q '^size 4194304 ro False multi True zero True trim True flush True$' \
    "$tmpdir/ours.out" || fail "wrong size or flags"
  # The written block is data; the block written at 3 MiB was trimmed,
  # so it is a hole again like everything never written.
  grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ +' "$tmpdir/ours.out" |
    awk '{ print $1, $2, $4 }' > "$tmpdir/map"
  printf '%s\n' "0 65536 hole,zero" "65536 65536 data" \
    "131072 4063232 hole,zero" > "$tmpdir/map.want"
  cmp "$tmpdir/map" "$tmpdir/map.want" || { cat "$tmpdir/map"; fail "wrong map"; }
}

# binding_errors SO [PANIC-LINE]: the failing example SO.  An error's
# errno reaches the client (EIO by default, ENOSPC for writes, err=28
# turns reads into ENOSPC), a panic (an exception in OCaml) is caught
# and becomes EIO with exactly one log line naming the callback (that
# line ends with PANIC-LINE, by default the Rust and Go wording), the
# server serves on after both, and an unknown parameter fails at
# start-up (exit 1) with the plugin's message.
binding_errors ()
{
  local so="$1" status=0
  local panic_line="${2:-pread: panicked: read at 2097152 panics on purpose}"
  cat > "$tmpdir/fail.py" <<'PY'
import errno
def code(e):    # libnbd gives the errno's name
    return e.errno if isinstance(e.errno, int) else getattr(errno, e.errno)
assert h.pread(4, 0) == b"\xab" * 4
for off, want in ((1 << 20, ERR), (2 << 20, errno.EIO)):
    try:
        h.pread(4, off)
        raise SystemExit("read at %d did not fail" % off)
    except nbd.Error as e:
        assert code(e) == want, (off, e.errno, want)
try:
    h.pwrite(b"x", 0)
    raise SystemExit("write did not fail")
except nbd.Error as e:
    assert code(e) == errno.ENOSPC, e.errno
assert h.pread(4, 0) == b"\xab" * 4     # still serving
print("errors ok")
PY
  sed 's/ERR/errno.EIO/' "$tmpdir/fail.py" > "$tmpdir/fail-eio.py"
  sed 's/ERR/errno.ENOSPC/' "$tmpdir/fail.py" > "$tmpdir/fail-enospc.py"
  t timeout 60 "$NBDKIT" -U - "$so" \
    --run "nbdsh -u \"\$uri\" -c 'exec(open(\"$tmpdir/fail-eio.py\").read())'" \
    > "$tmpdir/fail.out" 2> "$tmpdir/fail.err" ||
    { cat "$tmpdir/fail.out" "$tmpdir/fail.err"; fail "the failing plugin did not fail as expected"; }
  cat "$tmpdir/fail.err"
  grep -q 'error: pread: read at 1048576 fails on purpose$' "$tmpdir/fail.err" ||
    fail "no log line for the failing read"
  [ "$(grep -cF -- "$panic_line" "$tmpdir/fail.err")" -eq 1 ] ||
    fail "the panic was not logged exactly once"
  [ "$(grep -c 'panic' "$tmpdir/fail.err")" -eq 1 ] ||
    fail "more than the one panic line reached stderr"
  t timeout 60 "$NBDKIT" -U - "$so" err=28 \
    --run "nbdsh -u \"\$uri\" -c 'exec(open(\"$tmpdir/fail-enospc.py\").read())'" \
    > /dev/null 2>&1 || fail "err=28 did not turn the read error into ENOSPC"
  timeout 30 "$NBDKIT" -U - "$so" colour=blue --run true > /dev/null \
    2> "$tmpdir/cfg.err" || status=$?
  cat "$tmpdir/cfg.err"
  [ "$status" -eq 1 ] || fail "an unknown parameter: exit $status, not 1"
  grep -q 'config: unknown parameter "colour"' "$tmpdir/cfg.err" ||
    fail "no message naming the unknown parameter"
}

# binding_probe SO: the RAM disk example SO fires the server's generic
# probe "user" for each write (ramdisk_write, offset, length), and
# bpftrace sees it with the (id, cookie) of the server's request_start
# for that write.  The caller has checked requires_root, requires_probes
# and bpftrace.
binding_probe ()
{
  local so="$1" bt
  tracing_lock
  user_probe_program > "$tmpdir/trace.bt"
  start_bpftrace 60 "$tmpdir/out" "$tmpdir/out.err" "$tmpdir/trace.bt"
  t timeout 60 "$NBDKIT" -U - "$so" 1M \
    --run 'nbdsh -u "$uri" -c "h.pwrite(b\"z\" * 1000, 8192)"' ||
    fail "the RAM disk under bpftrace failed"
  sleep 1
  interrupt_tracer "$bt"
  trace_in_order "$tmpdir/out" > "$tmpdir/sorted"
  cat "$tmpdir/sorted"
  set -- $(awk '$1 == "start" && $4 == 1 && $5 == 8192' "$tmpdir/sorted")
  [ "$#" -eq 5 ] || fail "no request_start for the write"
  grep -q "^user $2 $3 ramdisk_write 8192 1000 \[\]\$" "$tmpdir/sorted" ||
    fail "no user probe ramdisk_write (8192, 1000) with the write's id $2 and cookie $3"
}
