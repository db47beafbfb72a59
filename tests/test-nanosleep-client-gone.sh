#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# nbdkit_nanosleep gives up when the client has gone (nbdkit-plugin(3),
# "SLEEPING"): under serialize=connections, a client starts a read that
# the delay filter holds for 60 s and goes away (closes its socket, or
# is killed); the next client must be served at once, well before the
# 60 s are over, as with Debian's nbdkit (0.03 s there).  (The server
# used to sleep the whole delay out.)
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

# The first client: a read in flight, then gone in the way asked for.
cat > "$tmpdir/first.py" <<'PY'
import os, signal, sys, time
h.aio_pread(nbd.Buffer(512), 0)
time.sleep(0.5)
if sys.argv[1] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
del h
PY

# run SERVER HOW: sets $took, the seconds the second client waited for
# its answer.
run ()
{
  NBDKIT="$1" start_server --filter=noparallel --filter=delay memory 1M \
    serialize=connections rdelay=60
  t nbdsh -u "$uri" -c "import sys; sys.argv = ['', '$2']" \
    -c "exec(open('$tmpdir/first.py').read())" || :
  local start=$SECONDS
  [ "$(t nbdsh -u "$uri" -c 'print(h.get_size())')" = 1048576 ] ||
    fail "$2: the second client was not served"
  took=$(( SECONDS - start ))
  stop_server
}

for how in close kill; do
  run "$NBDKIT" "$how"
  echo "$how: the next client waited ${took} s"
  [ "$took" -lt 20 ] ||
    fail "$how: the next client waited ${took} s for a client that had gone"
  if [ -x /usr/bin/nbdkit ]; then
    run /usr/bin/nbdkit "$how"
    echo "$how: Debian's nbdkit: ${took} s"
    [ "$took" -lt 20 ] || fail "Debian's nbdkit waited too (fix the test)"
  fi
done
