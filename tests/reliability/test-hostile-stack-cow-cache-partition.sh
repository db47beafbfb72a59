#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The project's hostile client (tests/hostile-client.py: the handshake,
# requests and stream groups of tests/test-hostile-*.sh) against
#   --filter=cow --filter=cache --filter=partition file
# (a throw-away overlay over a cache over the first partition, which
# starts at an odd sector, of a 300 MiB disk; the cache fills on reads
# and is kept to 16 MiB, so it evicts during the run).  Every case must
# pass as it does against the memory plugin, except where the stack
# offers other commands (cow, as nbdkit's, offers no WRITE_ZEROES, so
# those are refused with EINVAL: hostile-client.py checks the export's
# flags); the server must stay up, serve correct bytes afterwards, and
# never write the file under cow.
source "$(dirname "$0")/../functions.sh"
requires test -x /usr/bin/python3
requires /usr/bin/python3 -c 'import nbd'
requires_cmd sfdisk sha256sum
source "$(dirname "$0")/hostile-stacks.sh"

disk="$tmpdir/disk.img"
truncate -s 300M "$disk"
printf 'label: dos\nstart=2049, size=552960, type=83\n' | sfdisk -q "$disk"
before="$(sha256sum < "$disk")"

start_server --filter=cow --filter=cache --filter=partition \
  file "$disk" partition=1 cache-on-read=true cache-max-size=16M
hostile_groups
serves_correctly "$uri" write
kill -0 "$server_pid" || fail "the server died"
stop_server

[ "$(sha256sum < "$disk")" = "$before" ] ||
  fail "the file under the cow filter changed"
