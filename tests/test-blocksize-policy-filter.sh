#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=blocksize-policy: nbdinfo shows the constraints it sets
# (over a plugin with none, and over one with its own); with
# blocksize-error-policy=error misaligned, short and (reads and writes)
# oversized requests from nbdsh fail with EINVAL and never reach the
# file, while the same requests pass with allow; Debian's nbdkit
# answers the same; bad parameters are refused.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"

disk="$tmpdir/disk.img"
make_pattern "$disk.orig" $((1024 * 1024))
cp "$disk.orig" "$disk"

# block_sizes ARGS...: "min pref max" as nbdinfo shows them.
block_sizes ()
{
  t "$NBDKIT" -U - "$@" --run 'nbdinfo --json "$uri"' |
    /usr/bin/python3 -c '
import json, sys
e = json.load(sys.stdin)["exports"][0]
print(e.get("block_size_minimum"), e.get("block_size_preferred"),
      e.get("block_size_maximum"))'
}
expect_sizes ()
{
  local want="$1" got
  shift
  got="$(block_sizes "$@")"
  [ "$got" = "$want" ] || fail "$*: block sizes '$got', want '$want'"
}
# Without a maximum the filter says 4294967295, and the server passes
# it on as nbdkit does (it used to cap it at 32M).
expect_sizes "1 32768 4294967295" \
  --filter=blocksize-policy memory 1M blocksize-preferred=32K
expect_sizes "4096 4096 1048576" \
  --filter=blocksize-policy memory 1M blocksize-minimum=4K \
  blocksize-maximum=1M
expect_sizes "512 65536 262144" \
  --filter=blocksize-policy memory 1M blocksize-minimum=512 \
  blocksize-preferred=64K blocksize-maximum=256K
# Over a layer with constraints of its own (a second policy filter):
# the parameters not given keep its values.
expect_sizes "512 8192 65536" \
  --filter=blocksize-policy --filter=blocksize-policy memory 1M \
  blocksize-minimum=512 blocksize-preferred=8K blocksize-maximum=64K
# Constraints that do not fit: the client cannot connect.
if t "$NBDKIT" -U - --filter=blocksize-policy memory 1M \
     blocksize-maximum=1024 --run 'nbdinfo "$uri"' >/dev/null 2>&1; then
  fail "preferred 4096 > maximum 1024 was served"
fi

# The error policy, request by request.
cat > "$tmpdir/requests.py" <<'PY'
h.set_strict_mode(0)
size = h.get_size()
def op(name, n, off, fn):
    try:
        fn()
        print(name, n, off, "ok")
    except nbd.Error as e:
        # Above the maximum the filter refuses a read or write (EINVAL),
        # as under nbdkit: the server passes it down (it used to refuse
        # it itself with EOVERFLOW).
        print(name, n, off, e.errno)
for n, off in [(512, 0), (100, 0), (512, 100), (1000, 0), (8192, 0),
               (1024, 512), (65536, 4096)]:
    op("pread", n, off, lambda: h.pread(n, off))
    op("pwrite", n, off, lambda: h.pwrite(b"P" * n, off))
    op("zero", n, off, lambda: h.zero(n, off))
    op("trim", n, off, lambda: h.trim(n, off))
    op("cache", n, off, lambda: h.cache(n, off))
    op("extents", n, off, lambda: h.block_status(n, off, lambda *a: 0))
op("flush", 0, 0, lambda: h.flush())
PY
cat > "$tmpdir/requests" <<EOF
#!/bin/sh
nbdsh --base-allocation -u "\$1" -c - < $tmpdir/requests.py
EOF
chmod +x "$tmpdir/requests"
start_server --filter=blocksize-policy file "$disk" \
  blocksize-error-policy=error blocksize-minimum=512 blocksize-maximum=4096
# Refused writes never reach the file.
t nbdsh -u "$uri" -c - <<PY || fail "a refused request changed the file"
h.set_strict_mode(0)
for fn in (lambda: h.pwrite(b"X" * 100, 0), lambda: h.pwrite(b"X" * 512, 100),
           lambda: h.zero(1000, 0), lambda: h.zero(512, 1),
           lambda: h.trim(600, 0)):
    try:
        fn()
    except nbd.Error as e:
        assert e.errno == "EINVAL", e
    else:
        raise AssertionError("request not refused")
h.flush()
assert open("$disk", "rb").read() == open("$disk.orig", "rb").read()
PY
t "$tmpdir/requests" "$uri" > "$tmpdir/error.out"
stop_server
cat "$tmpdir/error.out"
for line in "pread 100 0 EINVAL" "pwrite 512 100 EINVAL" \
            "zero 1000 0 EINVAL" "trim 100 0 EINVAL" \
            "cache 512 100 EINVAL" "extents 100 0 EINVAL" \
            "pwrite 8192 0 EINVAL" "zero 8192 0 ok" \
            "pwrite 1024 512 ok" "extents 65536 4096 ok"; do
  grep -qx "$line" "$tmpdir/error.out" || fail "error policy: no '$line'"
done
cp "$disk.orig" "$disk"
start_server --filter=blocksize-policy file "$disk" \
  blocksize-error-policy=allow blocksize-minimum=512 blocksize-maximum=4096
t "$tmpdir/requests" "$uri" > "$tmpdir/allow.out"
stop_server
grep -qx "pwrite 512 100 ok" "$tmpdir/allow.out" &&
  grep -qx "trim 100 0 ok" "$tmpdir/allow.out" ||
  { cat "$tmpdir/allow.out"; fail "allow policy refused a request"; }

# Same answers as Debian's nbdkit.
state_files=("$disk")
compare_own "blocksize-policy error" "$tmpdir/requests" \
  --filter=blocksize-policy file "$disk" blocksize-error-policy=error \
  blocksize-minimum=512 blocksize-maximum=4096
compare_own "blocksize-policy allow" "$tmpdir/requests" \
  --filter=blocksize-policy file "$disk" blocksize-minimum=4K \
  blocksize-preferred=64K blocksize-maximum=256K
compare_own "blocksize-policy read" read --filter=blocksize-policy \
  file "$disk" blocksize-preferred=32K
finish

# Bad parameters: one line naming the parameter, exit 1.
for bad in blocksize-error-policy=foo blocksize-minimum=3 \
           blocksize-minimum=128k blocksize-preferred=256 \
           blocksize-preferred=64M blocksize-preferred=3000 \
           blocksize-maximum=5G blocksize-maximum=x; do
  status=0
  "$NBDKIT" --filter=blocksize-policy null 1M "$bad" --run true \
            > "$tmpdir/msg" 2>&1 || status=$?
  [ "$status" -eq 1 ] && [ "$(wc -l < "$tmpdir/msg")" -eq 1 ] &&
    grep -q "${bad%%=*}" "$tmpdir/msg" ||
    { cat "$tmpdir/msg"; fail "$bad: exit $status, want 1 and one line"; }
done
