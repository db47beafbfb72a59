# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the blocksize-policy filter, included by tests/Makefile.am.
TESTS += test-blocksize-policy-filter.sh test-blocksize-policy-filter-probes.sh
