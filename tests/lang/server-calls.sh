# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# server_calls_check ARGS...: the calls nbdkit 1.34..1.40 added to the
# server's API (disconnect, parse_probability, parse_delay) as a
# language binding exposes them.  ARGS name a test plugin ("python
# SCRIPT", "perl SCRIPT", a binding's .so ...) that every language
# writes the same way:
#
#   config prob=S    p = parse_probability ("prob", S)
#   config delay=S   (sec, nsec) = parse_delay ("delay", S)
#                    (a parse error is left to fail config)
#   pread at 4096    disconnect (force = true)
#   pread at 8192    disconnect (force = false), then answers
#   pread at 12288   the text "P SEC NSEC", P = round (p * 1000000),
#                    padded with spaces to the count asked
#
# The client sees: the parsed values; a forced disconnect losing the
# read that asked for it (the connection gone, no reply); a soft one
# answering that read and refusing the next request with ESHUTDOWN;
# the server serving new clients after both; and a bad probability or
# delay failing start-up (exit 1) with the server's message naming the
# parameter.  Sourced after functions.sh.
server_calls_check ()
{
  requires_cmd nbdsh
  start_server "$@" prob=1:8 delay=1.000002s
  cat > "$tmpdir/calls-client.py" <<'PY'
got = h.pread(16, 12288)
assert got == b"125000 1 2000   ", got
uri = h.get_uri()

# Forced: the read that asked gets no reply; the connection is gone.
c = nbd.NBD()
c.connect_uri(uri)
try:
    c.pread(512, 4096)
    raise SystemExit("forced disconnect: the read was answered")
except nbd.Error as e:
    print("forced:", e.errno)
try:
    c.pread(512, 0)
    raise SystemExit("forced disconnect: the connection still serves")
except nbd.Error:
    pass
del c

# Soft: the read that asked is answered, the next request is refused.
c = nbd.NBD()
c.connect_uri(uri)
assert len(c.pread(512, 8192)) == 512
try:
    c.pread(512, 0)
    raise SystemExit("soft disconnect: the next request was answered")
except nbd.Error as e:
    assert e.errno == "ESHUTDOWN", e.errno
c.shutdown()

# The server serves on: this connection and a new one.
assert h.pread(16, 12288) == got
c = nbd.NBD()
c.connect_uri(uri)
assert c.pread(16, 12288) == got
print("calls ok")
PY
  local out
  out="$(t nbdsh -u "$uri" -c - < "$tmpdir/calls-client.py")" ||
    { echo "$out"; fail "$*: the server calls failed"; }
  echo "$out"
  [ "$(tail -n1 <<< "$out")" = "calls ok" ] || fail "$*: the server calls"
  kill -0 "$server_pid" || fail "$*: the server died"
  stop_server

  local bad status
  for bad in prob=1:0 prob=often delay=5xs delay=-1; do
    status=0
    t "$NBDKIT" -U - "$@" "$bad" --run true > "$tmpdir/bad.out" \
      2> "$tmpdir/bad.err" || status=$?
    cat "$tmpdir/bad.err"
    [ "$status" -eq 1 ] || fail "$* $bad: exit $status, not 1"
    grep -q "error: ${bad%%=*}: .*\"${bad#*=}\"" "$tmpdir/bad.err" ||
      fail "$* $bad: no message naming the parameter and its value"
  done
}
