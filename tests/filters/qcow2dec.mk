# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the qcow2dec filter, included by tests/Makefile.am.
TESTS += test-qcow2dec-filter.sh test-qcow2dec-filter-probes.sh
