#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=exportname with an empty default-export= is the same as
# leaving the parameter out, as nbdkit-exportname-filter(1) of nbdkit
# 1.32 says: a client asking for "" gets the plugin's default export,
# and is told the plugin's name for it (NBD_INFO_NAME, and the list of
# exportname-list=defaultonly).  Debian's nbdkit 1.32 does otherwise:
# it serves the same export but names it "", against its own page;
# that one answer is not compared (see our page for why we keep to the
# page).  Everything else is compared with Debian's nbdkit.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo

# A plugin whose default export is "foo", listing foo and bar; open
# logs the name it was given.
cat > "$tmpdir/plugin.sh" <<EOF
#!/bin/sh
case "\$1" in
  default_export) echo foo ;;
  list_exports) echo foo; echo bar ;;
  open) echo "\$3" >> "$tmpdir/opened"; echo handle ;;
  get_size) echo 1024 ;;
  pread) dd if=/dev/zero count=\$3 iflag=count_bytes 2>/dev/null ;;
  *) exit 2 ;;
esac
EOF
chmod +x "$tmpdir/plugin.sh"

# names SERVER ARGS...: the default export's name as the client is
# told it, the defaultonly list, and the names the plugin opened.
names ()
{
  local server=$1
  shift
  rm -f "$tmpdir/opened"
  t "$server" -U - --filter=exportname sh "$tmpdir/plugin.sh" "$@" \
    --run 'nbdinfo --json "$uri" | sed -n "s/.*\"export-name\": //p"
           nbdinfo --list --json "$uri" | sed -n "s/.*\"export-name\": /list /p"'
  echo "opened $(sort -u "$tmpdir/opened" | tr '\n' ' ')"
}

omitted=$(names "$NBDKIT" exportname-list=defaultonly)
empty=$(names "$NBDKIT" exportname-list=defaultonly default-export=)
expected='"foo",
list "foo",
opened foo '
[ "$omitted" = "$expected" ] || fail "without default-export: $omitted"
[ "$empty" = "$expected" ] || fail "with an empty default-export=: $empty"
# A later empty value undoes an earlier one.
[ "$(names "$NBDKIT" exportname-list=defaultonly default-export=bar \
       default-export=)" = "$expected" ] ||
  fail "default-export=bar default-export= did not fall back to the plugin's"

if [ -x /usr/bin/nbdkit ]; then
  for args in "exportname-list=defaultonly" \
              "exportname-list=defaultonly default-export=bar" \
              "default-export=bar"; do
    # shellcheck disable=SC2086
    [ "$(names "$NBDKIT" $args)" = "$(names /usr/bin/nbdkit $args)" ] ||
      fail "$args: differs from Debian's nbdkit"
  done
  # With default-export= Debian's nbdkit opens the same export ...
  deb=$(names /usr/bin/nbdkit exportname-list=defaultonly default-export=)
  [ "$(echo "$deb" | tail -n1)" = "opened foo " ] ||
    fail "Debian's nbdkit opened something else: $deb"
  # ... but calls it "" (not compared: its page says otherwise).
fi
echo "an empty default-export= is the same as none"
