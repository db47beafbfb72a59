#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# -s: the server serves one connection on stdin/stdout
# (libnbd's connect_command runs it as a subprocess).
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

t nbdsh -c - <<'PY'
import os
h.connect_command([os.environ["NBDKIT"], "-s", "--exit-with-parent",
                   "memory", "1M"])
assert h.get_size() == 1048576
h.pwrite(b"single", 4096)
assert h.pread(6, 4096) == b"single"
h.shutdown()
PY
