#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# TLS options while TLS is off are accepted, as nbdkit 1.32 accepts
# them: clients probe for TLS support with throwaway command lines
# such as  nbdkit --tls-verify-peer -U - null --run 'nbdinfo "$uri"',
# and a refusal reads as "no TLS".  A warning on stderr is allowed.
# Naming credentials (--tls-psk, --tls-certificates) without --tls
# turns TLS on but not required (nbdkit-tls(1), "Default TLS
# behaviour"), so plain and TLS clients are both served.  Each command
# runs under Debian's nbdkit too and must print the same.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo psktool certtool
assert_tls_build

t "$srcdir/make-tls-files.sh" "$tmpdir/tls"
psk="$tmpdir/tls/keys.psk"
certs="$tmpdir/tls/server"

# same EXPECTED ARGS...: both servers run ARGS with a --run command
# that prints $tls and the size through each kind of client; stdout is
# EXPECTED, and the same for Debian's nbdkit (if installed).
run='echo "tls=${tls-unset}"
  nbdinfo --size "nbd+unix:///?socket=$unixsocket" || echo plain-refused
  nbdinfo --size "nbds+unix://alice@/?socket=$unixsocket&tls-psk-file='$psk'" \
    2>/dev/null || echo psk-refused
  nbdinfo --size "nbds+unix:///?socket=$unixsocket&tls-certificates='$tmpdir/tls/client'" \
    2>/dev/null || echo x509-refused'
same ()
{
  local want="$1" server
  shift
  for server in "$NBDKIT" /usr/bin/nbdkit; do
    [ -x "$server" ] || continue
    "$server" -U - "$@" null size=1M --run "$run" \
      > "$tmpdir/out" 2> "$tmpdir/err" ||
      { st=$?; cat "$tmpdir/err"; fail "$server $*: exit status $st"; }
    cat "$tmpdir/err"
    if [ "$(tr '\n' ' ' < "$tmpdir/out")" != "$want" ]; then
      cat "$tmpdir/out"
      fail "$server $*: printed the above, not: $want"
    fi
  done
}
off="tls=unset 1048576 psk-refused x509-refused "

# TLS off: each option accepted and unused.
same "$off" --tls-verify-peer
same "$off" --tls-certificates="$tmpdir/no-such-dir"
same "$off" --tls-certificates="$tmpdir/no-such-dir" --tls-verify-peer
same "$off" --tls=off --tls-psk="$psk"
same "$off" --tls=off --tls-psk="$tmpdir/no-such-file"
same "$off" --tls=off --tls-certificates="$certs" --tls-verify-peer
# The issue's probe, exactly.
for server in "$NBDKIT" /usr/bin/nbdkit; do
  [ -x "$server" ] || continue
  [ "$(t "$server" --tls-verify-peer -U - null size=1M \
         --run 'nbdinfo --size "$uri"')" = 1048576 ] ||
    fail "$server --tls-verify-peer: the probe failed"
done
# Our own --tls-priority (nbdkit has none) behaves the same way.
t "$NBDKIT" --tls-priority=NORMAL -U - null size=1M \
  --run 'nbdinfo --size "$uri"' > "$tmpdir/prio" ||
  fail "--tls-priority without --tls was refused"
[ "$(cat "$tmpdir/prio")" = 1048576 ] || fail "--tls-priority: not served"

# Credentials without --tls: TLS on, not required.
same "tls=1 1048576 1048576 x509-refused " --tls-psk="$psk"
same "tls=1 1048576 psk-refused 1048576 " --tls-certificates="$certs"
