#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# -D nbdkit.FLAG=N, the server's own debug flags: the executable
# exports the same data symbols as Debian's nbdkit (virt-v2v passes
# -D nbdkit.backend.datapath=0), and the backend flags really quiet
# the per-call debug lines -v prints: datapath=0 the data calls
# (pread, ...), controlpath=0 the others.  An unknown flag warns.
source "$(dirname "$0")/functions.sh"
requires_cmd nm nbdsh

nm -D --defined-only "$server_binary" | awk '$2 ~ /^[DB]$/ && $3 ~ /^nbdkit_/ {print $3}' |
  sort > "$tmpdir/ours"
nm -D --defined-only /usr/bin/nbdkit | awk '$2 ~ /^[DB]$/ && $3 ~ /^nbdkit_/ {print $3}' |
  sort > "$tmpdir/debian"
cat "$tmpdir/ours"
diff -u "$tmpdir/debian" "$tmpdir/ours" ||
  fail "the exported debug flags differ from Debian's nbdkit"

# run FLAGS...: -v output of a connection that reads 4 KiB twice.
run ()
{
  t "$NBDKIT" -v "$@" -U - memory 1M \
    --run 'nbdsh -u "$uri" -c "h.pread(4096, 0); h.pread(4096, 4096)"' \
    2> "$tmpdir/log"
}
run
grep -Eq 'memory\[1\]: debug: pread count=4096 offset=4096$' "$tmpdir/log" ||
  { cat "$tmpdir/log"; fail "-v prints no per-request line"; }
grep -Eq 'memory\[1\]: debug: get_size$' "$tmpdir/log" ||
  fail "-v prints no control-path line"

run -D nbdkit.backend.datapath=0
grep -q 'debug: pread' "$tmpdir/log" &&
  fail "datapath=0 still prints the data calls"
grep -Eq 'memory\[1\]: debug: get_size$' "$tmpdir/log" ||
  fail "datapath=0 quieted the control path too"

run --debug nbdkit.backend.controlpath=0
grep -Eq 'debug: (get_size|open|can_write)( |$)' "$tmpdir/log" &&
  fail "controlpath=0 still prints the control calls"
grep -q 'debug: pread count=4096' "$tmpdir/log" ||
  fail "controlpath=0 quieted the data path too"

# The TLS flags are accepted; an unknown one warns and goes on.
run -D nbdkit.tls.log=2 -D nbdkit.tls.session=1
run -D nbdkit.no.such=1
grep -q 'warning: .*nbdkit.no.such' "$tmpdir/log" ||
  fail "no warning for an unknown server flag"
