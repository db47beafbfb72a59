#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# TLS versions (RFC 8996), with PSK and with X.509: nbdinfo limited to
# TLS 1.0 or TLS 1.1 (a GnuTLS system priority file given to the client
# only) is refused by default, and the server goes on serving intact
# data; TLS 1.2-only and default (TLS 1.3) clients are served, the
# default one with AES-GCM where the CPU has AES-NI;
# --tls-priority=NORMAL:+VERS-TLS1.0:+VERS-TLS1.1 (plus the PSK key
# exchanges) lets the old clients in; a bad --tls-priority is one error
# at start-up.  Would catch: the old default (TLS 1.0 served), an
# override that does not widen, a typo'd string silently ignored.
source "$(dirname "$0")/functions.sh"
source "$srcdir/tls/policy-lib.sh"
requires_cmd nbdinfo nbdsh psktool certtool
assert_tls_build

t "$srcdir/make-tls-files.sh" "$tmpdir/tls"
d="$tmpdir/tls"
for v in tls1.0 tls1.1 tls1.2 tls1.3; do only_version "$tmpdir" "$v"; done
aesni=no
grep -qw aes /proc/cpuinfo && grep -qw pclmulqdq /proc/cpuinfo && aesni=yes
log="$tmpdir/log"

# serve KIND [OPTIONS...]: a -v server whose log is $log; sets $good.
serve ()
{
  local kind="$1"; shift
  if [ "$kind" = psk ]; then
    start_server -v --tls=require --tls-psk="$d/keys.psk" "$@" \
      memory 1M 2>"$log"
    good="nbds+unix://alice@/?socket=$sock&tls-psk-file=$d/keys.psk"
  else
    start_server -v --tls=require --tls-certificates="$d/server" "$@" \
      memory 1M 2>"$log"
    good="nbds+unix:///?socket=$sock&tls-certificates=$d/client"
  fi
}
as_version () { GNUTLS_SYSTEM_PRIORITY_FILE="$tmpdir/$1" nbdinfo --size "$2"; }
secured_lines () { grep -c "secured: ($1)" "$log" || :; }

for kind in psk x509; do
  serve "$kind"
  fill_export "$good"
  for v in tls1.0 tls1.1; do
    if as_version "$v" "$good" 2>"$tmpdir/err"; then
      fail "$kind: a $v-only client was served by default"
    fi
    cat "$tmpdir/err"
    check_export "$good" "$kind $v client"
  done
  [ "$(grep -c 'failed: A packet with illegal or unsupported version' \
       "$log")" = 2 ] || { cat "$log"; fail "$kind: no version refusals"; }
  [ "$(as_version tls1.2 "$good")" = 1048576 ] ||
    fail "$kind: a TLS 1.2-only client was refused"
  [ "$(secured_lines TLS1.2)" = 1 ] || fail "$kind: TLS 1.2 not logged"
  [ "$(nbdinfo --size "$good")" = 1048576 ] ||
    fail "$kind: a default client was refused"
  grep 'secured: ' "$log"
  if [ $aesni = yes ]; then
    # The default client, as the last line: TLS 1.3 and AES-GCM.
    grep 'secured: ' "$log" | tail -n1 |
      grep -Eq 'secured: \(TLS1\.3\)-.*-\(AES-(128|256)-GCM\)' ||
      fail "$kind: a default client did not get TLS 1.3 with AES-GCM"
  fi
  stop_server

  # The operator's way back for old clients.
  if [ "$kind" = psk ]; then
    serve psk --tls-priority=NORMAL:+VERS-TLS1.0:+VERS-TLS1.1:+ECDHE-PSK:+DHE-PSK:+PSK
  else
    serve x509 --tls-priority=NORMAL:+VERS-TLS1.0:+VERS-TLS1.1
  fi
  for v in tls1.0 tls1.1; do
    [ "$(as_version "$v" "$good")" = 1048576 ] ||
      fail "$kind: --tls-priority did not let a $v-only client in"
  done
  [ "$(secured_lines TLS1.0)" = 1 ] && [ "$(secured_lines TLS1.1)" = 1 ] ||
    { cat "$log"; fail "$kind: TLS 1.0/1.1 sessions not logged"; }
  stop_server
done

# A string GnuTLS cannot parse: one error naming the option and where.
if "$NBDKIT" -U - --tls=require --tls-certificates="$d/server" \
     --tls-priority=NORMAL:+VERS-TLS9.9 memory 1M --run true 2>"$tmpdir/err"
then
  fail "a bad --tls-priority was accepted"
fi
cat "$tmpdir/err"
grep -q -- '--tls-priority: invalid GnuTLS priority string at position 7 ("+VERS-TLS9.9")' \
  "$tmpdir/err" || fail "the bad --tls-priority error does not say where"
[ "$(wc -l < "$tmpdir/err")" = 1 ] || fail "more than one line of error"
# Under PSK, a string with no PSK key exchange could serve nobody.
if "$NBDKIT" -U - --tls=require --tls-psk="$d/keys.psk" \
     --tls-priority=NORMAL memory 1M --run true 2>"$tmpdir/err"; then
  fail "--tls-psk with a priority without PSK key exchanges was accepted"
fi
cat "$tmpdir/err"
grep -q -- '--tls-priority: "NORMAL" enables no PSK key exchange' \
  "$tmpdir/err" || fail "no clear error for a PSK-less priority"
# Without TLS the option is unused, and accepted with a warning, as
# nbdkit accepts TLS options while TLS is off (test-tls-options-unused).
"$NBDKIT" -U - --tls-priority=NORMAL memory 1M --run true \
  2> "$tmpdir/err" || fail "--tls-priority without --tls was refused"
grep -q 'warning: .*unused: --tls-priority' "$tmpdir/err" ||
  fail "no warning that --tls-priority is unused without --tls"
:
