# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tests/reliability/durability-lib.sh: sourced (after functions.sh) by
# the test-durability-*.sh tests, which differ only in how durability.py
# drives the server and in their stacks.  Before sourcing, a test sets
#   dur_opts   durability.py's options of that test (an array)
#   dur_stop   how the run ends, for messages ("kill", "SIGTERM")
# and then calls
#   run_case LABEL SEED SECONDS SERVER-ARGS...   one run of durability.py
#                            over $disk, stopped after SECONDS; its
#                            figures are appended to $tmpdir/figures
requires /usr/bin/python3 -c 'import nbd'
dur="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/durability.py"
disk="$tmpdir/disk"

run_case ()
{
  local label="$1" seed="$2" after="$3"
  shift 3
  t /usr/bin/python3 "$dur" --label "$label" --seed "$seed" \
    --after "$after" "${dur_opts[@]}" "$disk" -- "$NBDKIT" "$@" \
    > "$tmpdir/out" ||
    { cat "$tmpdir/out"; fail "$label (seed $seed, $dur_stop after $after s)"; }
  cat "$tmpdir/out"
  cat "$tmpdir/out" >> "$tmpdir/figures"
}
