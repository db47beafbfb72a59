#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The filters that pass asynchronous requests on after adjusting them
# (truncate, blocksize, cow, cache), over a slow backend: 48 reads of
# 200 ms each, sent together on one connection to a server with two
# threads (-t 2), finish within 2.5 s through each filter (one at a
# time they take 9.6 s; two threads alone, 4.8 s), so the filter did
# not make them wait for each other; and with -D nbdkit.async=0, the
# synchronous path, the same burst takes at least 4.8 s, which shows
# the bound above can fail.
source "$(dirname "$0")/functions.sh"
requires_cmd python3
# Timing against a 200 ms backend: a busy machine should not decide it.
tracing_lock

burst ()
{
  local what="$1" el
  shift
  start_server -t 2 "$@"
  out=$(t python3 "$srcdir/read-burst.py" "$sock" "$server_pid" 48) ||
    fail "$what: the reads failed: $out"
  echo "$what: $out" >&2
  stop_server
  read -r _ el _ <<< "$out"
  echo "$el"
}

backend=(example-async size=4M delay=200)
for f in "truncate round-up=1M" "blocksize minblock=4096" "cow" \
         "cache cache-on-read=true"; do
  set -- $f
  name="$1"
  shift
  el="$(burst "$name" --filter="$name" "${backend[@]}" "$@" | tail -1)"
  awk -v e="$el" 'BEGIN { exit !(e >= 0.2 && e < 2.5) }' ||
    fail "$name: 48 reads of 200 ms took $el s: they did not overlap"
done

el="$(burst "cow, synchronous" -D nbdkit.async=0 --filter=cow \
      "${backend[@]}" | tail -1)"
awk -v e="$el" 'BEGIN { exit !(e >= 4.7) }' ||
  fail "cow, -D nbdkit.async=0: 48 reads took only $el s on two threads"
