#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# bench/compare.sh --tls psk|x509 --quick: the TLS rows run against ours
# and each installed TLS peer (nbdkit, qemu-nbd; never nbd-server), every
# server started with TLS required and every client on an nbds:// URI,
# so a row with numbers proves fio and nbdcopy really spoke TLS (a
# plain connection is refused by --tls=require and by qemu-nbd's
# --tls-creds).  Catches: the libnbd shim fio needs not being built or
# preloaded (fio then fails on the key file in its URI), a server
# started without TLS, a TLS peer left out, the wrong section title.
source "$(dirname "$0")/functions.sh"
requires_cmd fio certtool psktool cc
[ -f /usr/include/libnbd.h ] || { echo "$0: SKIP: no libnbd.h (libnbd-dev)"; exit 77; }

bench="$abs_top_srcdir/bench/compare.sh"
tracing_lock        # it loads both cores: run it alone
for mode in psk x509; do
  status=0
  TMPDIR="$tmpdir" timeout -k 5 120 "$bench" --tls "$mode" --quick \
    --build "$abs_top_builddir" >"$tmpdir/$mode.out" 2>"$tmpdir/$mode.err" ||
    status=$?
  cat "$tmpdir/$mode.out" | sed -n '1,/^CPU/p'
  [ "$status" -eq 0 ] || { tail -5 "$tmpdir/$mode.err"; fail "--tls $mode: exit $status"; }
  case $mode in
    psk) title="Peers over TLS (PSK)" ;;
    x509) title="Peers over TLS (X.509)" ;;
  esac
  head -1 "$tmpdir/$mode.out" | grep -qxF "## $title" || fail "--tls $mode: title is not '$title'"
  want=(ours nbdkit)
  command -v qemu-nbd >/dev/null && want+=(qemu-nbd)
  for s in "${want[@]}"; do
    n="$(grep -Ec "^\| $s \| 4K randread QD32 \| [0-9.]+ IOPS \|" "$tmpdir/$mode.out" || :)"
    [ "$n" -eq 2 ] || fail "--tls $mode: expected 2 rows (unix, tcp) for $s, got $n"
  done
  ! grep -q '^| nbd-server |' "$tmpdir/$mode.out" || fail "--tls $mode: nbd-server was run"
  servers="$(grep -c '# \[[0-9]* s\] server .* on ' "$tmpdir/$mode.err")"
  tls_servers="$(grep -c '# \[[0-9]* s\] server .* on nbds\(+unix\)\?://' "$tmpdir/$mode.err")"
  [ "$servers" -gt 0 ] && [ "$servers" -eq "$tls_servers" ] ||
    fail "--tls $mode: $tls_servers of $servers servers on an nbds:// URI"
done
