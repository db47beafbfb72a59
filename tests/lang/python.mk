# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the python plugin host (libpython3).  Each skips where the
# plugin is not built (no python3-embed at configure).
TESTS += test-python-examples.sh test-python-callbacks.sh \
	test-python-errors.sh test-python-parallel.sh \
	test-python-probes.sh test-python-module.sh test-python-buffers.sh \
	test-python-stdio.sh
EXTRA_DIST += python-client.py python-callbacks.py
EXTRA_DIST += lang/server-calls.sh
