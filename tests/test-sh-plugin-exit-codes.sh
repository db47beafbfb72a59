#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The sh plugin's exit codes 4 to 8 (nbdkit 1.34): the export name a
# client asks for is the code its writes exit with (after printing
# "EPERM" on stderr when the name is negative).  6 cuts the connection
# (the write gets no reply); 7 answers the write and refuses the next
# request with ESHUTDOWN; 8 fails the write with ESHUTDOWN (or the
# errno printed) and refuses the next; the server serves on after
# each.  4 and 5 stop the server (5 failing the write as 8 does).
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

cat > "$tmpdir/codes.sh" <<'SH'
#!/bin/sh
case "$1" in
  open) echo "$3" ;;
  get_size) echo 64k ;;
  can_write|can_flush) exit 0 ;;
  pread) head -c "$3" /dev/zero ;;
  flush) exit 0 ;;
  pwrite)
    cat > /dev/null
    code=$2
    case "$code" in -*) echo EPERM >&2; code=${code#-} ;; esac
    exit "$code" ;;
  *) exit 2 ;;
esac
SH
chmod +x "$tmpdir/codes.sh"

# client EXPORT: write once, flush, and print what each gave.
client ()
{
  t nbdsh -c - <<PY
def try_(f):
    try:
        f()
        return "ok"
    except nbd.Error as e:
        return e.errno
h.connect_uri("nbd+unix:///$1?socket=$sock")
print(try_(lambda: h.pwrite(b"x" * 512, 0)), try_(h.flush))
PY
}

start_server sh "$tmpdir/codes.sh"
for case in "0:ok ok" "7:ok ESHUTDOWN" "-7:ok ESHUTDOWN" \
            "8:ESHUTDOWN ESHUTDOWN" "-8:EPERM ESHUTDOWN" "1:EIO ok" \
            "9:EIO ok"; do
  out="$(client "${case%%:*}")"
  echo "code ${case%%:*}: $out"
  [ "$out" = "${case#*:}" ] || fail "code ${case%%:*}: $out, not ${case#*:}"
done
# 6: no reply, the connection is gone (libnbd: ENOTCONN, then the
# handle is dead).
out="$(client 6)"
echo "code 6: $out"
[ "${out%% *}" = ENOTCONN ] || fail "code 6: $out"
[ "$(client 0)" = "ok ok" ] || fail "the server stopped serving"

# 4 and 5: the server exits by itself.
for code in 4 -5; do
  out="$(client $code)"
  echo "code $code: $out"
  case "$code:$out" in
    4:"ok "* | 4:ENOTCONN* | -5:EPERM* | -5:ENOTCONN*) ;;
    *) fail "code $code: $out" ;;
  esac
  wait_for 10 ! -S "$sock" || fail "code $code: the server did not exit"
  server_pid=
  start_server sh "$tmpdir/codes.sh"
done
echo OK
