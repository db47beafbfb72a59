#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# NBD_OPT_EXTENDED_HEADERS with a raw client (tests/nbd-raw-client.c):
# 32-byte requests and replies, write then read back, FUA and FLUSH,
# BLOCK_STATUS_EXT (type 6) with 64-bit descriptors after
# SET_META_CONTEXT base:allocation, 64-bit lengths beyond 4G, error
# chunks, and a compact request after negotiation is refused.
source "$(dirname "$0")/functions.sh"
client="${abs_builddir:-$PWD}/nbd-raw-client"
[ -x "$client" ] || fail "$client not built (make check builds it)"

t "$NBDKIT" -U - memory 8G --run "$client \"\$unixsocket\" extended"
