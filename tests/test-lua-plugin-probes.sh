#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The lua plugin host, aspect probes (the table in lang/host-test.sh).
source "$(dirname "$0")/lang/host-test.sh" lua probes
