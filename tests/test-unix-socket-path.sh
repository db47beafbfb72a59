#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# -U PATH never removes what it should not (nbdkit(1) -U):
#  - a regular file at PATH is refused with one line naming PATH and
#    "Address already in use", exit status 1, and the file is intact;
#  - the socket of a live server is refused the same way, and the live
#    server still serves (starting a second server used to orphan it);
#  - a stale socket (its server gone: it refuses connections) is
#    replaced and served;
#  - at exit the server removes its own socket, but not a file that
#    took its place meanwhile.
# The first two behave the same under Debian's nbdkit.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo

refused ()
{
  local bin="$1" path="$2" status=0
  "$bin" -U "$path" memory 1M --run 'echo served' > "$tmpdir/out" 2>&1 ||
    status=$?
  cat "$tmpdir/out"
  [ "$status" -eq 1 ] || fail "$bin -U $path: exit status $status, expected 1"
  [ "$(wc -l < "$tmpdir/out")" -eq 1 ] ||
    fail "$bin -U $path: expected one line"
  grep -q "$path: Address already in use" "$tmpdir/out" ||
    fail "$bin -U $path: the line does not say why"
}

bins=("$NBDKIT")
[ -x /usr/bin/nbdkit ] && bins+=(/usr/bin/nbdkit)

# A regular file: refused, untouched.
printf 'precious disk image\n' > "$tmpdir/v.img"
sum=$(sha256sum < "$tmpdir/v.img")
for bin in "${bins[@]}"; do
  refused "$bin" "$tmpdir/v.img"
  [ -f "$tmpdir/v.img" ] && [ "$(sha256sum < "$tmpdir/v.img")" = "$sum" ] ||
    fail "$bin: -U on a file changed or removed it"
done

# A live server's socket: refused, and the live one keeps serving.
start_server memory 2M
live="$sock"
for bin in "${bins[@]}"; do
  refused "$bin" "$live"
  [ "$(nbdinfo --size "$uri")" = 2097152 ] ||
    fail "$bin: the live server stopped serving on its socket"
done
stop_server

# A stale socket: replaced and served.
/usr/bin/python3 -c 'import socket, sys
socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$tmpdir/stale.sock"
[ -S "$tmpdir/stale.sock" ] || fail "could not make a stale socket"
t "$NBDKIT" -U "$tmpdir/stale.sock" memory 3M \
  --run 'nbdinfo --size "$uri"' > "$tmpdir/size"
[ "$(cat "$tmpdir/size")" = 3145728 ] ||
  fail "a stale socket was not replaced: $(cat "$tmpdir/size")"
[ ! -e "$tmpdir/stale.sock" ] || fail "our socket was left behind at exit"

# At exit only our own socket goes: a file put in its place stays.
t "$NBDKIT" -U "$tmpdir/own.sock" memory 1M \
  --run 'rm "$unixsocket"; echo mine > "$unixsocket"'
[ "$(cat "$tmpdir/own.sock")" = mine ] ||
  fail "the server removed a file that replaced its socket"
