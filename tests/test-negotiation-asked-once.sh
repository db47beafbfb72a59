#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# .default_export and .list_exports are asked at most once per
# connection, as nbdkit-plugin(3) says of the negotiation callbacks:
# nbdinfo (NBD_OPT_INFO then NBD_OPT_GO on the empty name) and a client
# that lists the exports twice (the second NBD_OPT_LIST is refused, as
# nbdkit refuses it) before INFO and GO make one call of each, also
# through a filter that asks the layer below itself (exportname).  A TLS
# client's default export is asked with is_tls set, through that filter
# too; and once TLS has started in the middle of a connection the
# answer may change, so it is asked again.  Every plugin call is
# logged, and the log must equal Debian's nbdkit's.  (The server used to ask default_export on every
# NBD_OPT_INFO and NBD_OPT_GO and list_exports on every NBD_OPT_LIST,
# and the filter's question reached the plugin with is_tls 0.)
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo nbdsh

log="$tmpdir/calls"
cat > "$tmpdir/plugin.sh" <<EOF
#!/bin/sh
case "\$1" in
  default_export) echo "default_export readonly=\$2 tls=\$3" >> "$log"
                  echo "the-default" ;;
  list_exports) echo "list_exports" >> "$log"; echo "the-default" ;;
  open) echo "open export=\$3 tls=\$4" >> "$log" ;;
  get_size) echo 1M ;;
  pread) head -c "\$3" /dev/zero ;;
  *) exit 2 ;;
esac
EOF
chmod +x "$tmpdir/plugin.sh"

# calls SERVER ARGS...: the plugin's calls of a captive run.
calls ()
{
  rm -f "$log"
  t "$@" > /dev/null || fail "$*: the client failed"
  cat "$log"
}

opt_client='nbdsh --opt-mode -u "$uri" -c "
h.opt_list(lambda n, d: 0)
try:
    h.opt_list(lambda n, d: 0)
    raise Exception(\"a second NBD_OPT_LIST was answered\")
except nbd.Error:
    pass
h.opt_info()
h.opt_go()
h.pread(512, 0)
"'
tls_client='nbdinfo "nbds+unix://alice@/?socket=$unixsocket&tls-psk-file=$psk" &&
nbdinfo "nbd+unix:///?socket=$unixsocket"'

compare ()
{
  local what="$1" want="$2" ours ref
  shift 2
  ours="$(calls "$NBDKIT" "$@")"
  echo "== $what"; echo "$ours"
  [ "$(grep -c '^default_export' <<< "$ours")" -eq "$want" ] ||
    fail "$what: default_export asked $(grep -c '^default_export' <<< "$ours") times, want $want"
  [ "$(grep -c '^list_exports' <<< "$ours")" -le 1 ] ||
    fail "$what: list_exports asked more than once"
  if [ -x /usr/bin/nbdkit ]; then
    ref="$(calls /usr/bin/nbdkit "$@")"
    [ "$ours" = "$ref" ] ||
      fail "$what: the calls differ from nbdkit's:"$'\n'"$(diff <(echo "$ref") <(echo "$ours"))"
  fi
}

for filter in "" --filter=exportname; do
  compare "nbdinfo $filter" 1 -U - $filter sh "$tmpdir/plugin.sh" \
    --run 'nbdinfo "$uri"'
  compare "list, list, info, go $filter" 1 -U - $filter sh "$tmpdir/plugin.sh" \
    --run "$opt_client"
done

if command -v psktool > /dev/null; then
  export psk="$tmpdir/keys.psk"
  psktool -u alice -p "$psk" > /dev/null
  for filter in "" --filter=exportname; do
    compare "TLS and plain $filter" 2 -U - --tls=on --tls-psk="$psk" $filter \
      sh "$tmpdir/plugin.sh" --run "$tls_client"
    grep -qx 'default_export readonly=false tls=true' "$log" ||
      fail "TLS $filter: the plugin was not told the client is on TLS"
  done
fi

# Two NBD_OPT_INFO in the clear, STARTTLS, two more: two questions.
if command -v certtool > /dev/null; then
  t "$srcdir/make-tls-files.sh" "$tmpdir/tls" > /dev/null
  cat > "$tmpdir/starttls.py" <<'PY'
import socket, ssl, struct, sys
from nbd_raw import greet, option, reply
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
greet(s)
def info(s):
    option(s, 6, struct.pack(">IH", 0, 0))       # NBD_OPT_INFO ""
    while reply(s)[1] == 3:                      # NBD_REP_INFO
        pass
info(s)
info(s)
option(s, 5)                                    # NBD_OPT_STARTTLS
reply(s)
ctx = ssl.create_default_context(cafile=sys.argv[2] + "/ca-cert.pem")
ctx.load_cert_chain(sys.argv[2] + "/client-cert.pem",
                    sys.argv[2] + "/client-key.pem")
ctx.check_hostname = False
t = ctx.wrap_socket(s)
info(t)
info(t)
t.close()
PY
  starttls ()
  {
    rm -f "$log"
    start_server --tls=on --tls-certificates="$tmpdir/tls/server" \
      sh "$tmpdir/plugin.sh"
    PYTHONPATH="$srcdir" t /usr/bin/python3 "$tmpdir/starttls.py" "$sock" \
      "$tmpdir/tls/client" || fail "the STARTTLS client failed"
    stop_server
    grep default_export "$log"
  }
  ours="$(starttls)"
  echo "== STARTTLS"; echo "$ours"
  [ "$ours" = "default_export readonly=false tls=false
default_export readonly=false tls=true" ] ||
    fail "STARTTLS: default_export not asked once before and once after"
  if [ -x /usr/bin/nbdkit ]; then
    [ "$(NBDKIT=/usr/bin/nbdkit starttls)" = "$ours" ] ||
      fail "STARTTLS: the calls differ from nbdkit's"
  fi
fi
