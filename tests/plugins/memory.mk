# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the memory plugin, included by tests/Makefile.am.
TESTS += test-memory-rss.sh test-memory-overwrite-race.sh \
	test-memory-zerocopy.sh test-memory-zerocopy-write.sh \
	test-memory-size.sh test-memory-allocators.sh test-memory-mlock.sh \
	test-memory-zstd.sh test-memory-zstd-probes.sh
