# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Reliability suite: upstream faults under the nbd and curl
# plugins (EIO, no wrong bytes, recovery, and complete copies with the
# retry filter).  Included by tests/Makefile.am.
TESTS += reliability/test-fault-nbd-upstream.sh \
	reliability/test-fault-nbd-retry.sh \
	reliability/test-fault-curl.sh \
	reliability/test-fault-curl-retry.sh
EXTRA_DIST += reliability/fault-reader.py reliability/http-fault-server.py
