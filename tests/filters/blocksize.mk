# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the blocksize filter, included by tests/Makefile.am.
TESTS += test-blocksize-filter.sh test-blocksize-filter-probes.sh
