#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The numeric options refuse what is not a whole number (or, for the
# timeouts, a time) in their range, each with its own message, and take
# their bounds.
source "$(dirname "$0")/functions.sh"

refuse ()
{
  local opt="$1" bad="$2" msg="$3"
  # --run: a value wrongly accepted must not leave a server behind.
  if "$NBDKIT" "$opt" "$bad" memory 1M --run true > "$tmpdir/out" 2>&1; then
    fail "$opt \"$bad\" was accepted"
  fi
  grep -qF -e "$opt: \"$bad\" $msg" "$tmpdir/out" ||
    { cat "$tmpdir/out"; fail "no range message for $opt \"$bad\""; }
}
take ()
{
  "$NBDKIT" -U - "$1" "$2" memory 1M --run true ||
    fail "$1 \"$2\" was refused"
}

for bad in 1025 x -3 "" 4k; do
  refuse -t "$bad" "is not a thread count from 0 to 1024"
done
# -t 0 is the default count, as with nbdkit.
take -t 0; take -t 1; take -t 1024
for bad in 0 1000001 x; do
  refuse --max-connections "$bad" "is not a count from 1 to 1000000"
done
take --max-connections 1; take --max-connections 1000000
# --handshake-timeout and --timeout (nbdkit 1.42) are one option: whole
# seconds or a time with a unit, up to a day.
for opt in --handshake-timeout --timeout; do
  refuse $opt 86401 "is not a time from 0 to 86400 seconds"
  refuse $opt 86400.5s "is not a time from 0 to 86400 seconds"
  for bad in x -1 "" 1h; do
    "$NBDKIT" $opt "$bad" memory 1M --run true > "$tmpdir/out" 2>&1 &&
      fail "$opt \"$bad\" was accepted"
    grep -qF -e "$opt: could not parse delay" "$tmpdir/out" ||
      { cat "$tmpdir/out"; fail "no message for $opt \"$bad\""; }
  done
  take $opt 0; take $opt 86400; take $opt 1s; take $opt 250ms
done
for bad in 65536 x; do
  refuse -p "$bad" "is not a valid port number"
done
take --busy-poll 0; take --busy-poll 10000
