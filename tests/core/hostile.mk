# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Hostile clients (tests/hostile-client.py): handshakes, requests,
# byte streams and connection floods the server must survive.
TESTS += test-hostile-handshake.sh test-hostile-requests.sh \
	test-hostile-stream.sh test-hostile-stream-tcp.sh \
	test-hostile-connections.sh
