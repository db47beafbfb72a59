# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The benchmark scripts in bench/, each run quickly so that they
# keep working.
TESTS += test-bench-quick.sh test-bench-compare-quick.sh \
	test-bench-compare-check.sh test-bench-compare-tls.sh \
	test-bench-ceiling-quick.sh test-bench-filters-quick.sh \
	test-bench-plugins-quick.sh test-bench-slow-backend-quick.sh \
	test-bench-async-in-flight-quick.sh
# The CI guard on the untraced request path's instruction count.
TESTS += test-probe-instructions.sh
EXTRA_DIST += probe-instructions.baseline
