# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A plugin that fails, stalls or crashes on demand
# (tests/fault-plugin.c), and clients that vanish mid-request.
TESTS += test-fault-errno.sh test-fault-signal-drain.sh \
	test-fault-sigpipe.sh test-fault-open.sh test-fault-write-disconnect.sh
