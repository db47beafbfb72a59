#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=rotational: the client sees is_rotational as the filter says
# (true by default, or rotational=false), whatever the plugin says, and
# the bytes pass through unchanged.  A value that is not a boolean is
# refused.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo

rotational () # ARGS...: what a client sees as is_rotational
{
  t "$NBDKIT" -U - "$@" --run 'nbdsh -u "$uri" -c "print(h.is_rotational())"'
}

# PLUGIN_SAYS PLUGIN ARGS...: the plugin alone, then under the filter.
answers ()
{
  local says="$1" opt got
  shift
  got=$(rotational "$@")
  [ "$got" = "$says" ] || fail "$1 alone: is_rotational $got"
  for opt in "|True" "rotational=true|True" "rotational=false|False" \
             "rotational=on|True" "rotational=0|False"; do
    got=$(rotational --filter=rotational "$@" ${opt%|*})
    [ "$got" = "${opt#*|}" ] ||
      fail "$1 ${opt%|*}: is_rotational $got, wanted ${opt#*|}"
  done
}

# The memory plugin is not rotational; this eval plugin is.
answers False memory 1M
answers True eval get_size='echo 1048576' is_rotational='exit 0' \
  pread='dd if=/dev/zero count=$3 iflag=count_bytes status=none'

t "$NBDKIT" -U - --filter=rotational data '"abc" @1000 "xyz"' size=4096 \
  --run 'nbdinfo --json "$uri"' > "$tmpdir/info"
grep -q '"is_rotational": true' "$tmpdir/info" ||
  fail "nbdinfo: $(cat "$tmpdir/info")"
t "$NBDKIT" -U - --filter=rotational data '"abc" @1000 "xyz"' size=4096 \
  rotational=false --run 'nbdsh -u "$uri" -c -' <<'PY'
assert h.pread(3, 0) == b"abc"
assert h.pread(3, 1000) == b"xyz"
h.pwrite(b"q", 2000)
assert h.pread(1, 2000) == b"q"
PY

refuses 'rotational' --filter=rotational memory 1M rotational=maybe ||
  fail "rotational=maybe was accepted"
