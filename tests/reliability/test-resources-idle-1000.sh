#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# 1000 idle connections at once, every one negotiated by libnbd, stay
# served: while all are held, a newcomer is served, then each of the
# 1000 writes a block of its own and its neighbour reads it back.  The
# server's threads, fds and RSS per connection are reported; once the
# connections close, threads and fds come back to their count before.
source "$(dirname "$0")/../functions.sh"
here="$(cd "$(dirname "$0")" && pwd)"
requires test -x /usr/bin/python3
requires /usr/bin/python3 -c 'import nbd'

# The client and the server each need over 1000 descriptors: raise the
# limit (bounded, at 4096) if it is lower.
n=$(ulimit -n)
if [ "$n" != unlimited ] && [ "$n" -lt 4096 ]; then
  ulimit -n 4096 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || :
fi
n=$(ulimit -n)
if [ "$n" != unlimited ] && [ "$n" -lt 2100 ]; then
  echo "$0: SKIP: cannot raise the open files limit to 2100 (hard limit $(ulimit -Hn))"
  exit 77
fi

# --max-connections is 1024 by default: room for the 1000 and one more.
start_server memory 64M
t /usr/bin/python3 "$here/resources-libnbd.py" idle "$sock" "$server_pid" \
  --count 1000 || fail "see above"
kill -0 "$server_pid" || fail "the server died"
