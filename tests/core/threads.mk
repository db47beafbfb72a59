# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Worker threads: the pool, busy polling, overlapping slow calls,
# parallel writes, thread-local state at thread exit.
TESTS += test-worker-pool.sh test-slow-backend-overlap.sh \
	test-thread-exit.sh test-busy-poll.sh test-parallel-writes.sh
