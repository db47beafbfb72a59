# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Requests after the handshake: reads, writes, commands, block
# status, limits and bounds, extended headers, malformed requests.
TESTS += test-write-read.sh test-commands.sh test-nbdcopy.sh \
	test-qemu-img.sh test-block-status.sh test-extents-past-request.sh \
	test-extents-whole-blocks.sh test-read-only.sh test-read-past-end.sh \
	test-write-past-end.sh test-request-size-limits.sh \
	test-raw-extended-headers.sh test-raw-protocol-errors.sh \
	test-fuzz-regressions.sh
