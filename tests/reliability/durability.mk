# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Reliability suite: what was acknowledged as durable
# survives SIGKILL and SIGTERM.  Included by tests/Makefile.am.
TESTS += reliability/test-durability-kill.sh \
	reliability/test-durability-multiconn.sh \
	reliability/test-durability-term.sh
EXTRA_DIST += reliability/durability.py reliability/durability-lib.sh
