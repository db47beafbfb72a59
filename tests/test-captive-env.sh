#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The --run environment as nbdkit-captive(1) describes it: $nbd is the
# same URI as $uri; $tls is unset without TLS, 1 for --tls=on, 2 for
# --tls=require; --tls=on keeps an nbd:// URI (TLS is optional, so a
# plain client must be able to use it); --tls=on without certificates
# warns and serves without TLS; with -u the command (which runs as
# that user) still reaches the private -U - socket.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo

env_of ()
{
  t "$NBDKIT" "$@" memory 1M --run '
    echo "uri=$uri"; echo "nbd=$nbd"; echo "tls=${tls-UNSET}"
    echo "exportname=$exportname"; echo "port=$port"
    echo "unixsocket=$unixsocket"; nbdinfo --size "$uri"' \
    > "$tmpdir/env" 2> "$tmpdir/err"
  cat "$tmpdir/env"
}
val () { sed -n "s/^$1=//p" "$tmpdir/env"; }

env_of -U -
[ "$(val nbd)" = "$(val uri)" ] || fail "\$nbd is not \$uri"
[ "$(val tls)" = UNSET ] || fail "\$tls is set without TLS"
case "$(val uri)" in nbd+unix:///\?socket=/*) ;; *) fail "odd \$uri" ;; esac
[ "$(val unixsocket)" != "" ] && [ "$(val port)" = "" ] ||
  fail "\$unixsocket/\$port wrong for -U"
grep -qx 1048576 "$tmpdir/env" || fail "\$uri did not reach the server"

port="$(free_port)"
env_of -i 127.0.0.1 -p "$port" -e foo
[ "$(val nbd)" = "$(val uri)" ] || fail "\$nbd is not \$uri (TCP)"
[ "$(val uri)" = "nbd://127.0.0.1:$port/foo" ] || fail "TCP \$uri"
[ "$(val port)" = "$port" ] && [ "$(val exportname)" = foo ] ||
  fail "\$port/\$exportname wrong"

if [ "$("$NBDKIT" --dump-config | grep '^tls=')" = tls=yes ] &&
   command -v certtool >/dev/null; then
  t "$srcdir/make-tls-files.sh" "$tmpdir/tls"
  env_of -U - --tls=on --tls-certificates="$tmpdir/tls/server"
  [ "$(val tls)" = 1 ] || fail "\$tls is not 1 with --tls=on"
  case "$(val uri)" in
    nbd+unix://*) ;;
    *) fail "--tls=on gave an \$uri that is not nbd+unix://" ;;
  esac
  [ "$(val nbd)" = "$(val uri)" ] || fail "\$nbd is not \$uri (TLS on)"
  grep -qx 1048576 "$tmpdir/env" || fail "plain client refused with --tls=on"

  # No certificates: a warning, and the data served in the clear.
  mkdir "$tmpdir/empty"
  env_of -U - --tls=on --tls-certificates="$tmpdir/empty"
  cat "$tmpdir/err"
  grep -q 'warning: --tls=on but no TLS certificates' "$tmpdir/err" ||
    fail "no warning for --tls=on without certificates"
  [ "$(val tls)" = UNSET ] || fail "\$tls set although TLS is off"
  grep -qx 1048576 "$tmpdir/env" || fail "not served without certificates"
  # --tls=require cannot work without them: an error.
  if "$NBDKIT" -U - --tls=require --tls-certificates="$tmpdir/empty" \
       memory 1M --run true 2>/dev/null; then
    fail "--tls=require without certificates was accepted"
  fi
fi

# -u: the command runs as the user and must reach the private socket.
if [ "$(id -u)" -eq 0 ] && id nobody >/dev/null 2>&1; then
  env_of -U - -u nobody
  grep -qx 1048576 "$tmpdir/env" ||
    { cat "$tmpdir/err"; fail "-u nobody: \$uri unreachable"; }
  sock="$(val unixsocket)"
  [ ! -e "$sock" ] || fail "the private socket was left behind"
else
  echo "not root: -u not checked"
fi
exit 0
