# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The layer boundary between server, filters and plugin: open and
# close order, cached answers, serialised opens, emulated calls,
# private symbols, the filter ABI rule.
TESTS += test-layer-lifecycle.sh test-layer-answers-cached.sh \
	test-layer-serialize-open.sh test-layer-emulate.sh \
	test-layer-private-symbols.sh test-filter-abi-version.sh \
	test-filter-no-size-below.sh
