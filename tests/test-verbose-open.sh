#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# -v's lines for open name the layer, open's arguments (readonly=N
# exportname="NAME" tls=N) and then the handle it returned, as nbdkit
# 1.32's do; the same connection under Debian's nbdkit gives the same
# lines, in the same order, once the prefix (nbdkit names the layer in
# the message, this server in the prefix) and the pointers are set
# aside.  A client's export name is escaped, so it cannot forge lines.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

client='nbdsh -c "h.set_export_name(\"foo\"); h.connect_unix(\"$unixsocket\")"'

# open_lines SERVER ARGS...: "LAYER open ..." lines of one connection.
open_lines ()
{
  local server="$1"
  shift
  t "$server" -v -U - "$@" --run "$client" 2> "$tmpdir/log" ||
    { cat "$tmpdir/log"; fail "$server $*: failed"; }
  # Ours: "nbdkit: LAYER[1]: debug: open ...";
  # nbdkit's: "nbdkit: PLUGIN[1]: debug: LAYER: open ...".
  sed -n -e 's/^nbdkit: \([a-z]*\)\[1\]: debug: \(open .*\)/\1 \2/p' \
         -e 's/^nbdkit: [a-z]*\[1\]: debug: \([a-z]*\): \(open .*\)/\1 \2/p' \
    "$tmpdir/log" | sed 's/handle 0x[0-9a-f]*$/handle PTR/'
}

for args in "--filter=delay null size=1M" \
            "-r --filter=delay --filter=offset null size=1M"; do
  # shellcheck disable=SC2086 # split on purpose
  open_lines "$NBDKIT" $args > "$tmpdir/ours"
  cat "$tmpdir/ours"
  [ -s "$tmpdir/ours" ] || fail "$args: no open lines"
  grep -q '^null open readonly=[01] exportname="foo" tls=0$' "$tmpdir/ours" ||
    fail "$args: the plugin's open line lacks its arguments"
  grep -q '^null open returned handle PTR$' "$tmpdir/ours" ||
    fail "$args: no line with the handle open returned"
  if [ -x /usr/bin/nbdkit ]; then
    # shellcheck disable=SC2086
    open_lines /usr/bin/nbdkit $args > "$tmpdir/debian"
    diff -u "$tmpdir/debian" "$tmpdir/ours" ||
      fail "$args: the open lines differ from Debian's nbdkit"
  fi
done

# An export name with a quote, a newline and a backslash: one line.
t "$NBDKIT" -v -U - null size=1M --run 'nbdsh -c "
h.set_export_name(\"a\" + chr(34) + \"b\" + chr(10) + \"c\" + chr(92))
h.connect_unix(\"$unixsocket\")"' 2> "$tmpdir/log"
grep 'debug: open readonly' "$tmpdir/log"
grep -qF 'debug: open readonly=0 exportname="a\x22b\x0ac\x5c" tls=0' \
  "$tmpdir/log" || fail "the export name is not escaped"
