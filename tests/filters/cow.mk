# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the cow filter, included by tests/Makefile.am.
TESTS += test-cow-filter.sh
TESTS += test-cow-filter-parallel.sh
TESTS += test-cow-filter-probes.sh
# Both overlays (cow's and cache's) on disk, past a memory cgroup's
# limit and in a TMPDIR that fills up: tests/reliability/overlay.mk.
