# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The resources suite of the reliability tests, included by
# tests/Makefile.am: what the server holds (memory, descriptors,
# threads, CPU) under clients that hold on, pile up or come and go.
TESTS += reliability/test-resources-slow-reader.sh
TESTS += reliability/test-resources-emfile.sh
TESTS += reliability/test-resources-idle-1000.sh
TESTS += reliability/test-resources-churn.sh
EXTRA_DIST += \
	reliability/resources-client.py \
	reliability/resources-libnbd.py
