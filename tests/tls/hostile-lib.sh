# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Helpers of the tests that point tls-hostile-client at a --tls=require
# server (test-tls-hostile-handshake.sh, test-tls-hostile-records.sh),
# sourced after functions.sh.  Sourcing it checks the preconditions
# (bpftrace, root, probes, a TLS build, the client built), takes the
# tracing lock and makes the credentials in $d (make-tls-files.sh).
#
#   hostile_trace < PROGRAM  start bpftrace on tls_handshake_done
#                            ("PID done CONN OK TEXT"), connection_close
#                            ("PID close CONN REASON") and the probes of
#                            PROGRAM (stdin), a bpftrace text of the
#                            test's own; $b is the server binary
#   hostile_server KIND ARGS...
#                            start_server --tls=require with KIND's
#                            credentials (psk, or x509 with
#                            --tls-verify-peer) and ARGS; sets $creds for
#                            the client and $good_uri for nbdsh
#   good [PYTHON]            a good nbdsh client over TLS runs PYTHON,
#                            then reads back $canary at offset 0
#   hostile KIND CASE SAID [ARGS...]
#                            run the client's CASE (then ARGS); what it
#                            printed, left in $out, must match SAID and
#                            the server must still run
#   want_probes KIND CASE RE...  once the tracer stops, the trace must
#                            hold, for the current server, a line
#                            matching each RE
#   check_probes             stop the tracer, show its output, check
#                            every want_probes

requires_cmd bpftrace nbdsh certtool psktool
requires_root
requires_probes
assert_tls_build
client="$abs_builddir/tls-hostile-client"
[ -x "$client" ] || fail "$client was not built"
tracing_lock

t "$srcdir/make-tls-files.sh" "$tmpdir/tls"
d="$tmpdir/tls"

# The canary: 64 KiB written by the first good client, read back by
# every other.
canary="bytes(range(256)) * 256"

b="$server_binary"
hostile_trace ()
{
  {
    cat <<BT
usdt:$b:nbdkit:tls_handshake_done {
  printf("%d done %d %d %s\n", pid, arg0, arg1, str(arg2));
}
usdt:$b:nbdkit:connection_close {
  printf("%d close %d %s\n", pid, arg0, str(arg1));
}
BT
    cat
  } > "$tmpdir/trace.bt"
  start_bpftrace 100 "$tmpdir/out" "$tmpdir/err" "$tmpdir/trace.bt" \
    < /dev/null
}

hostile_server ()
{
  local kind="$1"
  shift
  if [ "$kind" = psk ]; then
    start_server --tls=require --tls-psk="$d/keys.psk" "$@"
    creds="psk:$d/keys.psk:alice"
    good_uri="nbds+unix://alice@/?socket=$sock&tls-psk-file=$d/keys.psk"
  else
    start_server --tls=require --tls-certificates="$d/server" \
      --tls-verify-peer "$@"
    creds="x509:$d/client"
    good_uri="nbds+unix:///?socket=$sock&tls-certificates=$d/client"
  fi
}

good ()
{
  t nbdsh -c "
h.set_uri_allow_local_file(True)
h.connect_uri('$good_uri')
assert h.get_tls_negotiated()
${1:-}
assert h.pread(65536, 0) == $canary
"
}

hostile ()
{
  local kind="$1" case="$2" said="$3"
  shift 3
  out="$(t "$client" "$sock" "$creds" "$case" "$@")" ||
    fail "$kind $case: $out"
  echo "$kind $out"
  [[ $out =~ $said ]] || fail "$kind $case: wanted /$said/"
  kill -0 "$server_pid" || fail "$kind $case: the server died"
}

_probe_checks=()
want_probes ()
{
  local what="$1 $2" re
  shift 2
  for re in "$@"; do _probe_checks+=("$what	$server_pid	$re"); done
}

check_probes ()
{
  local c what pid re
  sleep 0.5
  interrupt_tracer "$bt"
  cat "$tmpdir/out"
  for c in "${_probe_checks[@]}"; do
    IFS=$'\t' read -r what pid re <<<"$c"
    grep -Eq "^$pid $re" "$tmpdir/out" || fail "$what: no probe line /$re/"
  done
}
