# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# shellcheck shell=bash
# Sourced by tests/reliability/test-hostile-stack-*.sh, after
# functions.sh and once start_server has started the stack: the
# project's hostile client (tests/hostile-client.py, the groups that
# tests/test-hostile-*.sh run against the memory plugin) against a
# filter stack, then a check that the stack still serves correct
# bytes.
#
#   hostile_groups           run the handshake, requests and stream
#                            groups against $sock and $server_pid; the
#                            server must be up after each, and its open
#                            descriptors back to where they were (its
#                            threads and memory are shown)
#   serves_correctly URI write|verify
#                            the canaries the client wrote (its head and
#                            tail MiB) read back intact; "write" then
#                            writes 1 MiB + 4097 bytes at an odd offset
#                            and reads them back, "verify" only reads
#                            them (through another way to the same disk)

hostile="$(cd "$(dirname "$0")/.." && pwd)/hostile-client.py"

# The server's open descriptors, threads, resident and peak memory.
server_counts ()
{
  local fds
  fds=$(find "/proc/$server_pid/fd" -mindepth 1 -maxdepth 1 | wc -l)
  awk -v fds="$fds" '
    /^Threads:/ { th = $2 } /^VmRSS:/ { rss = $2 } /^VmHWM:/ { hwm = $2 }
    END { printf "%d fds, %d threads, RSS %d MiB (peak %d MiB)\n",
                 fds, th, rss / 1024, hwm / 1024 }' "/proc/$server_pid/status"
}

hostile_groups ()
{
  local g failed=0 before after i
  before="$(server_counts)"
  for g in handshake requests stream; do
    if ! t /usr/bin/python3 "$hostile" "$sock" "$server_pid" "$g"; then
      echo "FAIL: hostile group $g"
      failed=1
    fi
    kill -0 "$server_pid" || fail "the server died in hostile group $g"
  done
  # Every connection is closed by now; the server may take a moment
  # to notice the last ones.
  for (( i = 0; i < 100; i++ )); do
    after="$(server_counts)"
    [ "${after%% fds*}" -le "${before%% fds*}" ] && break
    sleep 0.1
  done
  echo "server before: $before"
  echo "server after:  $after"
  [ "$failed" -eq 0 ] || fail "some hostile cases failed (see above)"
  [ "${after%% fds*}" -le "${before%% fds*}" ] ||
    fail "the server's descriptors did not go back down"
}

serves_correctly ()
{
  t /usr/bin/python3 - "$1" "$2" <<'PY'
import random
import sys

import nbd

MiB = 1 << 20
h = nbd.NBD()
h.connect_uri(sys.argv[1])
size = h.get_size()
# The canaries as hostile-client.py writes them (Ctx: head and tail).
assert h.pread(MiB, 0) == random.Random(1).randbytes(MiB), "head canary"
assert h.pread(MiB, size - MiB) == random.Random(2).randbytes(MiB), \
    "tail canary"
data = random.Random(99).randbytes(MiB + 4097)
off = 100 * MiB + 12345
if sys.argv[2] == "write":
    h.pwrite(data, off)
    h.flush()
assert h.pread(len(data), off) == data, "data written afterwards"
h.shutdown()
print("%s: canaries intact, %d bytes at %d read back right"
      % (sys.argv[1], len(data), off))
PY
}
