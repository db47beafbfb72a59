#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Captive mode: the server exits with the --run command's exit status,
# and the variables the command sees are set.
source "$(dirname "$0")/functions.sh"

set +e
t "$NBDKIT" -U - memory 1M --run 'exit 3'
status=$?
set -e
[ "$status" -eq 3 ] || fail "--run 'exit 3' gave status $status, not 3"

t "$NBDKIT" -U - memory 1M --run 'exit 0' || fail "--run 'exit 0' failed"

t "$NBDKIT" -U - memory 1M --run '
  echo "uri=$uri"; echo "nbd=$nbd"; echo "unixsocket=$unixsocket"
  echo "exportname=$exportname"
  case "$uri" in nbd+unix://*socket=*) ;; *) exit 10 ;; esac
  test -S "$unixsocket" || exit 11
  case "$uri" in *"socket=$unixsocket"*) ;; *) exit 12 ;; esac
'
