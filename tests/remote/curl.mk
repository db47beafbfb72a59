# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the curl plugin (libcurl): a disk over HTTP(S).  They start
# their own nginx (tests/nginx-start.sh).
TESTS += test-curl-plugin.sh test-curl-errors.sh test-curl-https.sh \
	test-curl-headers.sh test-curl-auth.sh test-curl-unix-socket.sh \
	test-curl-proxy.sh test-curl-timeout.sh test-curl-probes.sh \
	test-curl-write.sh test-curl-restart.sh test-curl-content-range.sh \
	test-curl-head-refused.sh \
	test-curl-async.sh test-curl-async-errors.sh test-curl-async-stall.sh \
	test-curl-resolve.sh test-curl-times.sh
EXTRA_DIST += nginx-start.sh curl-stall-server.py curl-range-server.py
