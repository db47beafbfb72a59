#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --run sets $uri, $nbd, $unixsocket, $port, $exportname and $tls as
# shell variables of the command (nbdkit-captive(1): "shell variables
# ... available in the --run argument"), not in its environment: a
# program the command starts does not see them unless the command
# exports them.  A variable the server inherited exported keeps being
# exported, with the new value.  Values with quotes and $ survive.
# Each check runs under Debian's nbdkit too, which must print the same.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo

servers=("$NBDKIT")
[ -x /usr/bin/nbdkit ] && servers+=(/usr/bin/nbdkit)

# same WANT ARGS...: every server prints WANT (lines joined by spaces).
same ()
{
  local want="$1" server out
  shift
  for server in "${servers[@]}"; do
    out="$(t "$server" "$@" | tr '\n' ' ')" ||
      fail "$server $*: failed"
    [ "$out" = "$want" ] ||
      fail "$server $*: printed '$out', not '$want'"
  done
}

# Nothing in the environment; everything in the shell.
same "uri=yes nbd=yes unixsocket=yes exportname=yes port=yes " \
  -U - null --run '
    env | grep -E "^(uri|nbd|unixsocket|port|exportname|tls)=" || :
    for v in uri nbd unixsocket exportname port; do
      eval "echo $v=\${$v+yes}"
    done'

# A program started by the command does not see them ...
same "child=unset child=unset child=unset " -U - null --run '
  sh -c "echo child=\${uri-unset}"
  /usr/bin/env sh -c "echo child=\${unixsocket-unset}"
  sh -c "echo child=\${nbd-unset}"'
# ... unless the command passes them on; and the URI works there.
same "1048576 " -U - null size=1M --run 'export uri; sh -c "nbdinfo --size \"\$uri\""'

# An inherited, exported variable of the same name is overwritten and
# stays exported.
export uri=inherited
same "shell=ok child=ok " -U - null --run '
  [ "$uri" != inherited ] && echo shell=ok
  sh -c "[ \"\$uri\" != inherited ] && [ -n \"\$uri\" ] && echo child=ok"'
unset uri

# Quotes, $ and backslashes in values reach the command unchanged.
name="it's \"x\" \$HOME \\ \`id\`"
same "exportname=[$name] " -U - -e "$name" null \
  --run 'echo "exportname=[$exportname]"'
mkdir "$tmpdir/a'b \$c"
sock="$tmpdir/a'b \$c/sock"
same "unixsocket=[$sock] port=[] 1048576 " -U "$sock" null size=1M --run '
  echo "unixsocket=[$unixsocket]"; echo "port=[$port]"
  nbdinfo --size "$uri"'
