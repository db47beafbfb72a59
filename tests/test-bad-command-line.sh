#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Bad command lines: the server exits with status 1 and prints one line on
# stderr that names what is wrong.
source "$(dirname "$0")/functions.sh"

failures=0
# check REGEX ARGS...: run nbdkit ARGS, expect status 1 and one stderr line
# matching REGEX (case-insensitive).
check ()
{
  local re="$1" status lines
  shift
  set +e
  t "$NBDKIT" "$@" >"$tmpdir/out" 2>"$tmpdir/err" </dev/null
  status=$?
  set -e
  lines="$(grep -c . "$tmpdir/err" || :)"
  echo "nbdkit $* -> status $status, stderr:"
  sed 's/^/    /' "$tmpdir/err"
  if [ "$status" -ne 1 ]; then
    echo "  FAIL: expected exit status 1, got $status"; failures=$((failures+1))
  elif [ "$lines" -ne 1 ]; then
    echo "  FAIL: expected 1 line on stderr, got $lines"; failures=$((failures+1))
  elif ! grep -Eiq -- "$re" "$tmpdir/err"; then
    echo "  FAIL: stderr does not match /$re/"; failures=$((failures+1))
  fi
}

# --run 'exit 0' so a server that wrongly accepts the line exits 0 at once.
check 'no-such-option'    -U - --no-such-option memory 1M --run 'exit 0'
check 'nosuchplugin'      -U - nosuchplugin --run 'exit 0'
check 'xyz'               -U - memory size=xyz --run 'exit 0'
check 'nokey'             -U - memory 1M nokey=1 --run 'exit 0'
check 'plugin'            -U - --run 'exit 0'
check 'plugin'            -f
check 'nosuchfilter'      -U - --filter=nosuchfilter memory 1M --run 'exit 0'
check 'abc|thread'        -U - -t abc memory 1M --run 'exit 0'
# TLS options that cannot work.
check 'maybe'             -U - --tls=maybe memory 1M --run 'exit 0'
# --tls-psk alone turns TLS on (as nbdkit), so its file must be there.
check 'no-such-file'      -U - --tls-psk="$tmpdir/no-such-file" memory 1M --run 'exit 0'
check 'oldstyle|-o'       -U - -o --tls=on --tls-psk=/etc/hostname memory 1M --run 'exit 0'
check 'no-such-file'      -U - --tls=on --tls-psk="$tmpdir/no-such-file" memory 1M --run 'exit 0'
check 'server-cert'       -U - --tls=require --tls-certificates="$tmpdir" memory 1M --run 'exit 0'
printf 'alice:zz\n' > "$tmpdir/bad.psk"
check 'hexadecimal'       -U - --tls=on --tls-psk="$tmpdir/bad.psk" memory 1M --run 'exit 0'
check 'no such group'     -U - -g no-such-group-here memory 1M --run 'exit 0'

[ "$failures" -eq 0 ] || fail "$failures bad command line(s) not reported properly"
