#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The server's answers to bad requests, with a raw client
# (tests/nbd-raw-client.c): past-the-end reads (EINVAL) and writes
# (ENOSPC) with the connection still usable, wrapping offsets, unknown
# commands and flags (EINVAL), BLOCK_STATUS without a context, DF without
# structured replies, zero lengths, structured error chunks, and a bad
# request magic ending the connection.
source "$(dirname "$0")/functions.sh"
client="${abs_builddir:-$PWD}/nbd-raw-client"
[ -x "$client" ] || fail "$client not built (make check builds it)"

t "$NBDKIT" -U - memory 1M --run "$client \"\$unixsocket\" errors"
