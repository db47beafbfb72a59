#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The info plugin, every mode: for the same export names, our server and
# Debian's nbdkit 1.32 give the same size, flags, map and bytes (export
# name and base64 modes, including names that are not valid base64 and
# fail), and the same flags and layout in the other modes; the address
# of a Unix and a TCP client; time, uptime and conntime hold sensible
# values in the 12 byte layout; a bad mode is refused.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"

# PROBE URI: for each export name, the outcome, size, flags and bytes.
cat > "$tmpdir/names" <<'EOF2'
#!/usr/bin/env bash
exec /usr/bin/python3 -c '
import sys, hashlib, nbd, urllib.parse
# connect_uri would take the export name from the URI: use the socket.
sock = urllib.parse.parse_qs(urllib.parse.urlparse(sys.argv[1]).query)["socket"][0]
names = ["", "hello", "a" * 4096, "caf\u00e9 / ?x=1", "aGVsbG8=", "YQ==",
         "aGVs bG8=", "aGVs\nbG8=", "AAAA", "YR==", "YQ", "aGVs-bG8_", "!!!!",
         "aGVsbG8=aGVs", "/w==", "+/+/"]
for n in names:
    h = nbd.NBD()
    h.set_export_name(n)
    try:
        h.connect_unix(sock)
    except nbd.Error as e:
        print(repr(n), "connect error")
        continue
    size = h.get_size()
    data = h.pread(size, 0) if size else b""
    print(repr(n), size, h.is_read_only(), h.can_multi_conn(),
          h.can_cache(), h.can_trim(), h.can_flush(),
          hashlib.sha256(data).hexdigest(), bytes(data[:16]))
    if size > 2:
        print("  slice", bytes(h.pread(2, size - 3)))
    h.shutdown()
' "$1"
EOF2
# PROBE URI for the clock modes: flags and map (the bytes change).
cat > "$tmpdir/flags" <<EOF2
#!/bin/sh
set -e
nbdinfo --json "\$1" | /usr/bin/python3 $probedir/flags.py
nbdinfo --map "\$1"
EOF2
chmod +x "$tmpdir/names" "$tmpdir/flags"

compare info-exportname "$tmpdir/names" info
expect_in info-exportname-hello "$ours" "^'hello' 5 True True True False False .*b'hello'$"
compare info-exportname-key "$tmpdir/names" info mode=exportname
compare info-base64 "$tmpdir/names" info mode=base64exportname
expect_in info-base64-hello "$ours" "^'aGVsbG8=' 5 .*b'hello'$"
expect_in info-base64-bad "$ours" "^'YR==' connect error$"
compare info-address read info address
for m in time uptime conntime TIME; do
  compare "info-$m" "$tmpdir/flags" info "mode=$m"
done

# The clocks: 12 bytes, big endian seconds then microseconds.
cat > "$tmpdir/clock.py" <<'EOF2'
import struct, sys, time
mode = sys.argv[1]
time.sleep(0.3)
a = h.pread(12, 0)
sec, usec = struct.unpack(">QI", a)
assert h.get_size() == 12 and usec < 1000000, (mode, sec, usec)
t = sec + usec / 1e6
if mode == "time":
    assert abs(t - time.time()) < 5, (t, time.time())
elif mode == "uptime":
    assert 0.3 <= t < 60, t
else:
    assert 0.3 <= t < 60, t
time.sleep(0.2)
sec2, usec2 = struct.unpack(">QI", h.pread(12, 0))
assert sec2 + usec2 / 1e6 >= t + 0.2, (t, sec2, usec2)
assert h.pread(4, 8) != b"" and len(h.pread(5, 7)) == 5
print(mode, "ok", t)
EOF2
for m in time uptime conntime; do
  t "$NBDKIT" -U - info "$m" --run "nbdsh -u \"\$uri\" -c 'import sys; sys.argv = [\"\", \"$m\"]' -c - < $tmpdir/clock.py" ||
    note_failure "info-clock-$m" "bad clock bytes"
done

# Addresses: "unix" on a Unix socket; IP:PORT over TCP (127.0.0.1).
t "$NBDKIT" -U - info address --run 'nbdsh -u "$uri" -c "
assert h.pread(h.get_size(), 0) == b\"unix\", h.pread(h.get_size(), 0)
"' || note_failure info-address-unix "not 'unix'"
port="$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
t "$NBDKIT" -i 127.0.0.1 -p "$port" info address \
  --run "nbdsh -u nbd://127.0.0.1:$port -c 'print(h.pread(h.get_size(), 0).decode())'" \
  > "$tmpdir/addr" || :
grep -Eq '^127\.0\.0\.1:[0-9]+$' "$tmpdir/addr" ||
  note_failure info-address-tcp "got '$(cat "$tmpdir/addr")'"

# --dump-plugin says which optional modes work.
"$NBDKIT" info --dump-plugin > "$tmpdir/dump"
grep -qx info_address=yes "$tmpdir/dump" && grep -qx info_base64=yes "$tmpdir/dump" ||
  note_failure info-dump-plugin "$(cat "$tmpdir/dump")"

for bad in mode=foo mode= nosuch=1; do
  refuses "info.*${bad%%=*}" info "$bad" ||
    note_failure "info-bad-$bad" "not refused with one line naming ${bad%%=*}"
done

finish
