#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=ip with rules on the client's TLS certificate (nbdkit 1.40):
# dn:DN matches the verified client certificate's DN, issuer-dn:DN the
# DN of the CA that signed it.  Real certificates from certtool: two
# clients of one CA (client.test, other.test) and one of a second CA
# (rogue) that the server also trusts.  nbdinfo connects with each:
# the rules admit or refuse it as they say, a refused client gets the
# rule in its error and the server goes on serving the next one.  A DN
# holds commas, so it takes the rest of its list; a rule before it in
# the same list still counts.  Rules the server can decide before TLS
# (anyunix) decide at once, mixed with certificate rules.  Without a
# certificate (plain client, no --tls-verify-peer) no DN rule matches.
# (test-ip-filter-probes.sh checks that a client decided after TLS
# gets one decision.)
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo certtool
assert_tls_build

t "$srcdir/make-tls-files.sh" "$tmpdir/tls"
d="$tmpdir/tls"
# The server trusts both CAs, so that issuer-dn: has two to tell apart.
mkdir "$d/srv2"
cp "$d/server/server-cert.pem" "$d/server/server-key.pem" "$d/srv2/"
cat "$d/ca-cert.pem" "$d/rogue-cert.pem" > "$d/srv2/ca-cert.pem"
dn1="CN=client.test,O=nbdkit tests"
dn2="CN=other.test,O=nbdkit tests"

# The server's stderr, where a refusal names its rule (the client
# only hears that the export cannot be opened).
srv_err="$tmpdir/server.err"
: > "$srv_err"

# try CLIENTDIR: "ok" or "refused(RULE)" from the line the server
# logged for this client.
try ()
{
  local out="$tmpdir/try.out" u before
  if [ "$1" = plain ]; then
    u="nbd+unix:///?socket=$sock"
  else
    u="nbds+unix:///?socket=$sock&tls-certificates=$d/$1"
  fi
  before="$(wc -l < "$srv_err")"
  if t nbdinfo --size "$u" > "$out" 2>&1; then
    grep -qx 1048576 "$out" || { cat "$out"; fail "$1: no size"; }
    echo ok
    return
  fi
  sleep 0.1                     # the server logs as the client reads
  tail -n +$(( before + 1 )) "$srv_err" > "$tmpdir/new.err"
  if grep -q 'refused by ' "$tmpdir/new.err"; then
    echo "refused($(sed -n 's/.*refused by \(.*\)/\1/p' "$tmpdir/new.err" |
                    head -1))"
  else
    cat "$out" "$tmpdir/new.err" >&2
    echo "failed"
  fi
}

# expect RULES -- CLIENT=WANT...: one server with RULES (an array
# given by name), each client's outcome.
expect ()
{
  local -n rules="$1"
  shift
  start_server --tls=require --tls-certificates="$d/srv2" --tls-verify-peer \
    --filter=ip memory 1M "${rules[@]}" 2>> "$srv_err"
  for cw in "$@"; do
    local client="${cw%%=*}" want="${cw#*=}" got
    got="$(try "$client")"
    [ "$got" = "$want" ] ||
      fail "${rules[*]}: $client: expected $want, got $got"
    echo "${rules[*]}: $client: $got"
  done
  kill -0 "$server_pid" || fail "server died"
  stop_server
}

r=("allow=dn:$dn1" deny=all)
expect r client=ok client-other="refused(deny=all)" client-rogue="refused(deny=all)"
r=("deny=dn:$dn2")
expect r client=ok client-other="refused(deny=dn:$dn2)" client-rogue=ok
r=(allow=issuer-dn:CN=rogue deny=all)
expect r client-rogue=ok client="refused(deny=all)" client-other="refused(deny=all)"
r=(deny=issuer-dn:CN=ca)
expect r client="refused(deny=issuer-dn:CN=ca)" client-rogue=ok
# A rule before the DN in the same list; the DN keeps its comma.
r=("allow=uid:$(( $(id -u) + 4242 )),dn:$dn2" deny=all)
expect r client-other=ok client="refused(deny=all)"
# Known before TLS: anyunix admits everyone at once, whatever the DN.
r=("allow=anyunix,dn:$dn2" deny=all)
expect r client=ok client-other=ok
# The certificate decides first, then anyunix refuses the rest.
r=("allow=dn:$dn1" deny=anyunix)
expect r client=ok client-other="refused(deny=anyunix)"
# A DN that is almost the client's (no O=) does not match.
r=(allow=dn:CN=client.test deny=all)
expect r client="refused(deny=all)"

# Without a certificate nothing has a DN: plain clients under
# --tls=on, and TLS clients without --tls-verify-peer.
start_server --tls=on --tls-certificates="$d/srv2" --filter=ip memory 1M \
  "allow=dn:$dn1" deny=all 2>> "$srv_err"
[ "$(try plain)" = "refused(deny=all)" ] || fail "plain client admitted"
[ "$(try client)" = "refused(deny=all)" ] ||
  fail "a DN was seen without --tls-verify-peer"
stop_server
start_server --tls=on --tls-certificates="$d/srv2" --filter=ip memory 1M \
  "deny=dn:$dn1" 2>> "$srv_err"
[ "$(try plain)" = ok ] || fail "plain client refused by a DN rule"
stop_server

# Bad rules: one line naming the parameter.
refuses "ip: error: allow: dn: needs a DN" --filter=ip null allow=dn: ||
  fail "empty dn: accepted"
refuses "ip: error: deny: issuer-dn: needs a DN" --filter=ip null \
  deny=issuer-dn: || fail "empty issuer-dn: accepted"
