#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Hostile requests in the transmission phase (tests/hostile-client.py,
# group "requests"), with simple, structured and extended replies: read,
# write, trim, zero, cache and block status past the end, at offsets that
# wrap 2^64, of length 0 and above the 64 MiB limit on reads and writes;
# unknown commands; unknown and inapplicable flags.  Each gets the error
# the NBD protocol asks for (EINVAL for reads and trims, ENOSPC for
# writes and zeroes past the end) or nbdkit gives (ENOMEM for a read
# above 64 MiB), the connection stays usable, and the canaries stay
# intact.
source "$(dirname "$0")/functions.sh"
requires test -x /usr/bin/python3

start_server memory 256M
t /usr/bin/python3 "$srcdir/hostile-client.py" "$sock" "$server_pid" requests
kill -0 "$server_pid" || fail "the server died"
