# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tests/debian-filters.sh: sourced (after functions.sh) by the tests
# that load Debian's prebuilt nbdkit 1.32 filters into OUR server and
# compare what a client sees with Debian's own nbdkit running the same
# command (tests/test-debian-filters-*.sh).
#
# What a test gets from here:
#   $debian_filterdir        where Debian's filter .so files live
#   $ref_nbdkit              Debian's nbdkit (the reference)
#   make_pattern FILE SIZE   a file of SIZE bytes: data blocks that name
#                            their own offset, with holes in between
#   pattern_disk SIZE        $disk, a make_pattern file of SIZE bytes in
#                            $tmpdir, and $state_files=($disk): each
#                            compare run starts from the same bytes
#   compare LABEL PROBE ARGS...
#                            run "nbdkit -U - ARGS --run PROBE" under our
#                            server and under Debian's; an argument
#                            --filter=NAME (no slash) becomes Debian's
#                            nbdkit-NAME-filter.so by path, for both, so
#                            both load the same .so.  PROBE is read (size,
#                            flags, map, "copy SHA256  -" of nbdcopy's
#                            copy, "copy-all ..." of nbdcopy
#                            --no-extents'), write (writes, zero, trim,
#                            flush, read back, map, copy) or a
#                            script of the test's own, run as PROBE URI
#                            (Debian's nbdkit sets $uri in the --run
#                            shell, not in the environment).  Files named in
#                            $state_files are restored from FILE.orig
#                            before each run and their sha256 is appended
#                            to the output afterwards (the bytes that
#                            reached the plugin); files in $fresh_files
#                            are only restored.  A difference, or our
#                            server failing where Debian's does not, is
#                            recorded under LABEL; $ours and $ref are the
#                            two outputs, for extra checks.
#   compare_own LABEL PROBE ARGS...
#                            as compare, but our server loads OUR
#                            filter of that name (from the build tree)
#                            while Debian's nbdkit loads its own: "same
#                            command, same bytes, same map" for the
#                            filters we write ourselves
#   expect_in LABEL FILE REGEX  record a failure unless FILE has REGEX
#   note_failure LABEL MSG   record a failure by hand
#   finish                   fail the test naming every recorded failure
#
# Failures are collected, not fatal, so that one run names every filter
# that misbehaves.  Each label starts with the filter's name.

requires_cmd nbdinfo nbdcopy nbdsh sha256sum
debian_filterdir=/usr/lib/x86_64-linux-gnu/nbdkit/filters
ref_nbdkit=/usr/bin/nbdkit
requires test -x "$ref_nbdkit"
requires test -d "$debian_filterdir"

# The client probes, written once into the test's private directory.
probedir="$tmpdir/probes"
mkdir -p "$probedir" "$tmpdir/out"

# Fields of nbdinfo --json compared between the servers.  Block size
# constraints and can_fast_zero are left out on purpose: our server
# advertises block sizes for every export, and our file plugin answers
# can_fast_zero itself; neither is about the filter under test.
cat > "$probedir/flags.py" <<'PY'
import json, sys
e = json.load(sys.stdin)["exports"][0]
keys = ["export-size", "is_read_only", "can_cache", "can_df", "can_flush",
        "can_fua", "can_multi_conn", "can_trim", "can_zero"]
print(" ".join("%s=%s" % (k, e.get(k)) for k in keys))
PY

cat > "$probedir/read" <<EOF
#!/bin/sh
# Size and flags, the map, and the sha256 of what nbdcopy copies: once
# as it does by default, skipping what block status calls holes (so a
# wrong map shows as wrong bytes), once reading everything.
set -e
uri="\$1"
nbdinfo --json "\$uri" | /usr/bin/python3 $probedir/flags.py
nbdinfo --map "\$uri"
echo "copy \$(nbdcopy "\$uri" - | sha256sum)"
echo "copy-all \$(nbdcopy --no-extents "\$uri" - | sha256sum)"
EOF

cat > "$probedir/write.py" <<'PY'
# Writes of every kind through the filter, each one's outcome printed,
# then the whole export read back by pread and hashed.
import hashlib
size = h.get_size()
def op(name, fn):
    try:
        fn()
        print(name, "ok")
    except nbd.Error as e:
        print(name, "error", e.errno)
block = bytes(i % 251 for i in range(65536))
op("pwrite", lambda: h.pwrite(block, 0))
op("pwrite-unaligned", lambda: h.pwrite(b"hello, filters", size // 2 + 3))
if h.can_fua():
    op("pwrite-fua", lambda: h.pwrite(block[:4096], 8192, nbd.CMD_FLAG_FUA))
if h.can_zero():
    op("zero", lambda: h.zero(131072, 65536))
    op("zero-unaligned", lambda: h.zero(1000, 100))
if h.can_trim():
    op("trim", lambda: h.trim(65536, 262144))
if h.can_flush():
    op("flush", lambda: h.flush())
if h.can_cache():
    op("cache", lambda: h.cache(65536, 0))
data = bytearray()
for off in range(0, size, 1 << 20):
    data += h.pread(min(1 << 20, size - off), off)
print("pread sha256", hashlib.sha256(data).hexdigest())
PY

cat > "$probedir/write" <<EOF
#!/bin/sh
set -e
uri="\$1"
nbdsh -u "\$uri" -c - < $probedir/write.py
nbdinfo --map "\$uri"
echo "copy \$(nbdcopy "\$uri" - | sha256sum)"
EOF
chmod +x "$probedir/read" "$probedir/write"

# make_pattern FILE SIZE: 64 KiB data blocks at every 256 KiB, each
# 8-byte word holding its own offset (so a misplaced block shows), and
# holes between them (so the map has both kinds of extent).
make_pattern ()
{
  /usr/bin/python3 - "$1" "$2" <<'PY'
import struct, sys
path, size = sys.argv[1], int(sys.argv[2])
with open(path, "wb") as f:
    f.truncate(size)
    for off in range(0, size, 262144):
        n = min(65536, size - off)
        f.seek(off)
        f.write(b"".join(struct.pack(">Q", off + i) for i in range(0, n, 8)))
PY
}

pattern_disk ()
{
  disk="$tmpdir/disk.img"
  make_pattern "$disk.orig" "$1"
  cp "$disk.orig" "$disk"
  state_files=("$disk")
}

state_files=()
fresh_files=()
_failures=()

note_failure ()
{
  local label="$1"
  shift
  echo "$0: $label: $*" >&2
  _failures+=("$label")
}

expect_in ()
{
  local label="$1" file="$2" regex="$3"
  grep -Eq -- "$regex" "$file" ||
    note_failure "$label" "expected /$regex/ in output:" "$(head -20 "$file")"
}

# _run_one SERVER OUT PROBE ARGS...
_run_one ()
{
  local server="$1" out="$2" probe="$3" f status=0
  shift 3
  local args=() a
  for a in "$@"; do
    case "$a" in
      --filter=*/*) args+=("$a") ;;
      --filter=*)
        if [ "$server" = "$NBDKIT" ] && [ -n "${_own_filters:-}" ]; then
          args+=("$a")
        else
          args+=("--filter=$debian_filterdir/nbdkit-${a#--filter=}-filter.so")
        fi ;;
      *) args+=("$a") ;;
    esac
  done
  case "$probe" in
    read|write) probe="$probedir/$probe" ;;
  esac
  for f in "${state_files[@]}" "${fresh_files[@]}"; do
    cp --sparse=always "$f.orig" "$f"
  done
  t "$server" -U - "${args[@]}" --run "$probe \"\$uri\"" > "$out" 2> "$out.err" ||
    status=$?
  echo "exit status $status" >> "$out"
  for f in "${state_files[@]}"; do
    echo "state ${f##*/} $(sha256sum < "$f")" >> "$out"
  done
}

compare ()
{
  local label="$1" name
  shift
  name="$(echo "$label" | tr -c 'A-Za-z0-9_.\n-' _)"
  ours="$tmpdir/out/$name.ours"
  ref="$tmpdir/out/$name.ref"
  _run_one "$NBDKIT" "$ours" "$@"
  _run_one "$ref_nbdkit" "$ref" "$@"
  if ! grep -qx 'exit status 0' "$ref"; then
    # The reference failed: the test must give the right answer itself.
    note_failure "$label" "Debian's nbdkit failed (fix the test):" \
      "$(cat "$ref" "$ref.err" | head -20)"
  elif ! cmp -s "$ours" "$ref"; then
    note_failure "$label" "differs from Debian's nbdkit" \
      "(our stderr: $(grep -v '^$' "$ours.err" | head -5))" \
      $'\n'"$(diff "$ref" "$ours" | head -12)"
  fi
}

compare_own ()
{
  local _own_filters=1
  compare "$@"
}

finish ()
{
  if [ "${#_failures[@]}" -gt 0 ]; then
    fail "${#_failures[@]} failed: ${_failures[*]}"
  fi
}
