# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The NBD handshake: oldstyle and newstyle, options and their
# numbers, export lists, block sizes, structured replies, time limits.
TESTS += test-oldstyle.sh test-handshake-timeout.sh \
	test-handshake-many-options.sh test-option-numbers.sh \
	test-export-list.sh test-negotiation-asked-once.sh \
	test-block-size-advertised.sh test-structured-replies.sh \
	test-raw-handshake.sh
