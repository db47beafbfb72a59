#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# bench/async-in-flight.sh --quick still works: one short round of one
# connection keeping 256 reads in flight against a 10 ms backend, for
# each of our asynchronous and synchronous paths and Debian's nbdkit,
# printing a row with numbers (reads/s, share of the ceiling, threads)
# for each, and the nbdcopy figures for the asynchronous ones.
source "$(dirname "$0")/functions.sh"
requires_cmd fio
requires test -x /usr/bin/nbdkit

tracing_lock
run_bench async-in-flight
grep -qx '## Requests in flight against a slow backend' "$tmpdir/out" ||
  bench_fail "no section"
for name in 'completes from its own thread' 'loop=server' 'async=0' \
            'ours, delay filter' 'nbdkit 1.32'; do
  grep -Eq "^\| [^|]*$name[^|]* \| [0-9]+ \| [0-9]+\.[0-9]{2} \| ([0-9]+ \| [0-9]+\.[0-9]{2}|- \| -) \| [0-9]+ \|$" \
    "$tmpdir/out" || bench_fail "no row with numbers for $name"
done
leftover="$(ls "$tmpdir" | grep '^async-in-flight\.' || :)"
[ -z "$leftover" ] || bench_fail "left behind: $leftover"
