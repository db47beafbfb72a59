#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The project's hostile client (tests/hostile-client.py: the handshake,
# requests and stream groups of tests/test-hostile-*.sh) against
#   --filter=blocksize memory minblock=4096 maxdata=12288 maxlen=1M
# (every request cut into aligned pieces of at most three blocks, the
# unaligned ends read-modify-written).  Every case must pass as it does
# against the memory plugin alone; the server must stay up and serve
# correct bytes afterwards.
source "$(dirname "$0")/../functions.sh"
requires test -x /usr/bin/python3
requires /usr/bin/python3 -c 'import nbd'
source "$(dirname "$0")/hostile-stacks.sh"

start_server --filter=blocksize memory 256M \
  minblock=4096 maxdata=12288 maxlen=1M
hostile_groups
serves_correctly "$uri" write
kill -0 "$server_pid" || fail "the server died"
