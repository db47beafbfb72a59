#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Hostile clients during option negotiation (tests/hostile-client.py,
# group "handshake"): unknown client flags, garbage instead of the
# handshake, unknown options, option lengths of 2^32-1, of zero and
# shorter than their data, export names over 4096 bytes, GO/INFO with
# lying name lengths and info counts, STARTTLS without TLS, structured
# replies asked twice, meta contexts before structured replies, requests
# before the handshake ends, an option flood.  One connection per case;
# after each the server must be up and canaries written at the start must
# read back intact.
source "$(dirname "$0")/functions.sh"
requires test -x /usr/bin/python3

start_server memory 256M
t /usr/bin/python3 "$srcdir/hostile-client.py" "$sock" "$server_pid" handshake
kill -0 "$server_pid" || fail "the server died"
