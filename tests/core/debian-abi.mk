# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Plugins and filters built for Debian's nbdkit 1.32, loaded by ours
# (tests/debian-filters.sh finds and runs them); and the same command
# under Debian's nbdkit and ours advertising the same capabilities.
TESTS += test-abi-memory.sh test-abi-file.sh test-abi-pattern.sh \
	test-abi-data.sh test-abi-sparse-random.sh test-debian-filters-load.sh \
	test-debian-filters-layout.sh test-debian-filters-formats.sh \
	test-debian-filters-cow-cache.sh test-debian-filters-modes.sh \
	test-debian-filters-control.sh test-filter-debian-no-extents.sh \
	test-filter-debian-err-null.sh test-filter-debian-tls-fallback.sh \
	test-filter-debian-extents-api.sh test-filter-debian-retry.sh \
	test-debian-plugin-answers.sh test-debian-nbdkit-loads.sh
