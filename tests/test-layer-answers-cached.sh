#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A layer's answers are asked once per context and cached: however
# often the filters above ask next->get_size, the plugin is asked once
# per connection.  tests/trace-filter.c (trace1 over trace2) asks its
# next layer ten times per get_size; Debian's truncate, cow and
# blocksize filters ask in prepare and get_size.  tests/layer-plugin.c
# counts its get_size calls and reads the count back at offset 0.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh
plugin="$abs_builddir/.libs/layer-plugin.so"
t1="$abs_builddir/.libs/trace1-filter.so"
t2="$abs_builddir/.libs/trace2-filter.so"
[ -f "$plugin" ] && [ -f "$t1" ] && [ -f "$t2" ] ||
  fail "test plugin or filters not built (make check builds them)"

# count FILTER-ARGS...: the plugin's get_size count seen by each of two
# connections, one after the other.
count ()
{
  t "$NBDKIT" -U - "$@" "$plugin" --run '
read_count () {
  nbdsh -u "$uri" -c "print(h.pread(64, 0).rstrip(b\"\\0\").decode())"
}
read_count; read_count' 2> "$tmpdir/err" | sed -n 's/.*get_size=\([0-9]*\) .*/\1/p' |
    tr '\n' ' '
}

got="$(count --filter="$t1" --filter="$t2")"
[ "$got" = "1 2 " ] || {
  cat "$tmpdir/err"
  fail "through trace1 and trace2 the plugin's get_size ran: $got (want 1 2)"
}

fdir=/usr/lib/x86_64-linux-gnu/nbdkit/filters
if [ -f "$fdir/nbdkit-truncate-filter.so" ]; then
  got="$(count --filter="$t1" --filter="$fdir/nbdkit-truncate-filter.so" \
               --filter="$fdir/nbdkit-cow-filter.so" \
               --filter="$fdir/nbdkit-blocksize-filter.so" --filter="$t2")"
  [ "$got" = "1 2 " ] || {
    cat "$tmpdir/err"
    fail "through Debian's filters the plugin's get_size ran: $got (want 1 2)"
  }
fi
