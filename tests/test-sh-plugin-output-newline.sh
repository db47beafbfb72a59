#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# What an sh or eval script prints as a string loses one trailing
# newline, and only one (nbdkit-sh-plugin(3), "open": "If the handle
# ends with a newline character then the newline is removed"): an open
# that echoes the export name "\n" gives the handle "\n", "a\n\n" gives
# "a\n\n"; an export description "desc\n\n" reaches the client as
# "desc\n"; a magic_config_key "key\n\n" is the key "key\n".  The same
# script runs under Debian's nbdkit, which must agree.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh od

cat > "$tmpdir/s.sh" <<'SH'
#!/bin/sh
log="$(dirname "$0")/log"
case "$1" in
  magic_config_key) printf 'key\n\n' ;;
  config) printf 'config %s=%s\n' "$2" "$3" | od -An -c >> "$log" ;;
  open) printf '%s\n' "$3" ;;
  get_size) printf 'handle %s.\n' "$2" | od -An -c >> "$log"; echo 1M ;;
  export_description) printf 'desc\n\n' ;;
  pread) dd if=/dev/zero count=$3 iflag=count_bytes 2>/dev/null ;;
  *) exit 2 ;;
esac
SH
chmod +x "$tmpdir/s.sh"
client='nbdsh -c "
h.set_export_name(\"\\n\")
h.set_full_info(True)
h.connect_unix(\"$unixsocket\")
print(\"description %r\" % h.get_export_description())
" -c "
h2 = nbd.NBD()
h2.set_export_name(\"a\\n\\n\")
h2.connect_unix(\"$unixsocket\")
"'

# What a server makes of the script: the client's description, then
# (od -c) the config key and the handles the script was given.
run ()
{
  rm -f "$tmpdir/log"
  t "$1" -U - sh "$tmpdir/s.sh" value --run "$client" > "$tmpdir/out" ||
    fail "$1: the script's server failed"
  tr -s ' \n' ' ' < "$tmpdir/log" >> "$tmpdir/out"
  cat "$tmpdir/out"
}
run "$NBDKIT"
grep -qx "description 'desc\\\\n'" "$tmpdir/out" ||
  fail "export description: not 'desc\\n'"
grep -qF ' c o n f i g k e y \n = v a l u e \n ' "$tmpdir/out" ||
  fail "magic_config_key: not 'key\\n'"
grep -qF ' h a n d l e \n . \n ' "$tmpdir/out" ||
  fail "open printed '\\n\\n': the handle is not '\\n'"
grep -qF ' h a n d l e a \n \n . \n ' "$tmpdir/out" ||
  fail "open printed 'a\\n\\n\\n': the handle is not 'a\\n\\n'"
cp "$tmpdir/out" "$tmpdir/ours"

if [ -x /usr/bin/nbdkit ]; then
  run /usr/bin/nbdkit
  diff -u "$tmpdir/out" "$tmpdir/ours" ||
    fail "Debian's nbdkit makes something else of the same script"
fi

# eval: the same for open's handle.
rm -f "$tmpdir/evallog"
LOG="$tmpdir/evallog" t "$NBDKIT" -U - eval open='printf "%s\n" "$3"' \
  get_size='printf "%s." "$2" | od -An -c >> "$LOG"; echo 1M' \
  pread='dd if=/dev/zero count=$3 iflag=count_bytes 2>/dev/null' \
  --run 'nbdsh -c "h.set_export_name(\"\\n\"); h.connect_unix(\"$unixsocket\")"' ||
  fail "eval: the server failed"
[ "$(tr -d ' \n' < "$tmpdir/evallog")" = '\n.' ] ||
  fail "eval: open printed '\n\n', the handle is $(cat "$tmpdir/evallog")"
