#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The rotational filter's rotational_answer probe fires once per
# connection with the answer given and what the plugin said.
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh

so="$(filter_so rotational)"
start_server --filter=rotational memory 1M rotational=true
out="$tmpdir/trace"
trace_start "$out" "usdt:$so:nbdkit:rotational_answer {
  printf(\"answer %d %d\\n\", arg0, arg1);
}"
for i in 1 2; do
  t nbdsh -u "$uri" -c 'assert h.is_rotational()'
done
sleep 0.5
trace_stop
cat "$out"
[ "$(grep -c '^answer' "$out")" -eq 2 ] || fail "not once per connection"
[ "$(grep -cx 'answer 1 0' "$out")" -eq 2 ] || fail "wrong arguments"
