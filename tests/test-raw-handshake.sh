#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Handshake corner cases with a raw client (tests/nbd-raw-client.c):
# unknown client flags close the connection, STARTTLS and unknown options
# are refused without ending negotiation, NBD_OPT_LIST/INFO/GO/ABORT and
# EXPORT_NAME behave, and INFO_BLOCK_SIZE is not sent for a plugin that
# gives no block sizes (as nbdkit).
source "$(dirname "$0")/functions.sh"
client="${abs_builddir:-$PWD}/nbd-raw-client"
[ -x "$client" ] || fail "$client not built (make check builds it)"

t "$NBDKIT" -U - memory 1M --run "$client \"\$unixsocket\" handshake"
