#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --print-uri prints the URI clients should use, and it works.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo

sock="$tmpdir/sock"
"$NBDKIT" -f -U "$sock" -P "$tmpdir/pid" --print-uri memory 1M > "$tmpdir/uri" &
pid=$!
cleanup_fn _kill_pid "$pid"
wait_for 20 -s "$tmpdir/uri" || fail "no URI printed"
wait_for 5 -S "$sock" || fail "no socket"
cat "$tmpdir/uri"
printed="$(head -1 "$tmpdir/uri")"
[ "$printed" = "nbd+unix:///?socket=$sock" ] ||
  fail "printed '$printed', expected nbd+unix:///?socket=$sock"
t nbdinfo --size "$printed" | grep -qx 1048576 || fail "URI does not work"

# Captive mode prints the same URI as $uri.
t "$NBDKIT" -U - --print-uri memory 1M --run 'echo "run:$uri"' > "$tmpdir/out"
cat "$tmpdir/out"
u1="$(sed -n 1p "$tmpdir/out")"
u2="$(sed -n 's/^run://p' "$tmpdir/out")"
[ -n "$u1" ] && [ "$u1" = "$u2" ] || fail "--print-uri and \$uri differ"
