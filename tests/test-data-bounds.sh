#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The data plugin's start-up work is bounded (nbdkit-data-plugin(1),
# LIMITS): an expression that would set more data than the plugin may
# keep fails at once with one line (it used to fill memory at the
# allocator's speed: 0x55*9223372036854775807 grew RSS by 650 MB/s),
# an endless <(SCRIPT) is read only as far as size= or a slice needs
# (<(yes) size=1M used to spin forever), or fails with one line when
# nothing bounds it, and zeroes cost nothing however many
# (0*9223372036854775807 serves an 8 EiB disk at once).
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo nbdsh

# refused EXPR...: exit status 1 within 60 s, one line naming the limit.
refused ()
{
  local status=0
  timeout 60 "$NBDKIT" -U - data "$@" --run 'nbdinfo --size "$uri"' \
    > "$tmpdir/out" 2>&1 || status=$?
  cat "$tmpdir/out"
  [ "$status" -eq 1 ] || fail "data $*: exit status $status, expected 1"
  [ "$(wc -l < "$tmpdir/out")" -eq 1 ] || fail "data $*: expected one line"
  grep -Eq 'more than|the most' "$tmpdir/out" ||
    fail "data $*: the line does not say which limit"
}
refused '(0x55)*9223372036854775807'
refused '(0x41)*1000000000[:]*1000000000'
refused '(0 @+1)*1000000000000'
refused '<(yes)'

# Bounded by size= or a slice: served, with the script's bytes.
t "$NBDKIT" -U - data '<(yes)' size=1M \
  --run 'nbdsh -u "$uri" -c "
assert h.get_size() == 1048576
assert h.pread(6, 1048570) == b\"y\ny\ny\n\"
"'
t "$NBDKIT" -U - data '<(yes)[:4096] 0x41' \
  --run 'nbdsh -u "$uri" -c "
assert h.get_size() == 4097
assert h.pread(3, 4094) == b\"y\nA\"
"'

# Zeroes, even 8 EiB of them, cost nothing, and a later byte is kept.
t "$NBDKIT" -U - data '0*9223372036854775807' \
  --run 'nbdsh -u "$uri" -c "
assert h.get_size() == 9223372036854775807
assert h.pread(4, 9223372036854775803) == bytes(4)
"'
t "$NBDKIT" -U - data '(0 0 0 0)*1000000000000 @8 0x42' \
  --run 'nbdsh -u "$uri" -c "
assert h.get_size() == 4000000000000
assert h.pread(10, 0) == bytes(8) + b\"B\\0\"
"'
