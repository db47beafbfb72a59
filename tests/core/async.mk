# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Asynchronous requests (nbdkit-async(1)), through the example-async
# plugin: bytes, requests in flight on few threads, errors.
TESTS += test-async-write-read.sh test-async-in-flight.sh \
	test-async-errors.sh
