# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the file plugin, included by tests/Makefile.am.
TESTS += test-file-trim.sh test-file-sendfile.sh \
	test-file-write-alignment.sh test-file-cache-fadvise.sh \
	test-file-cache-none-reads.sh test-file-directory-zero.sh \
	test-file-dir-list.sh test-file-permission-errors.sh \
	test-file-io-uring-bytes.sh test-file-io-uring-overlap.sh \
	test-file-io-uring-errors.sh test-file-io-uring-disconnect.sh
EXTRA_DIST += file-io-uring-setup.sh
