#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The perl plugin host, aspect memory (the table in lang/host-test.sh).
source "$(dirname "$0")/lang/host-test.sh" perl memory
