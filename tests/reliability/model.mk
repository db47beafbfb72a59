# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Reliability suite: the concurrent model checker, writers
# on disjoint stripes over a matrix of filter stacks.  Included by
# tests/Makefile.am.
TESTS += reliability/test-model-stripes.sh \
	reliability/test-model-cache-reclaim.sh
EXTRA_DIST += reliability/model-stripes.py
