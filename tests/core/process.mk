# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# How the server runs as a process: listening (-U, -p, socket
# activation), -f/daemon, -P, readiness, --print-uri, -u/-g, -s.
TESTS += test-unix-socket-path.sh test-tcp.sh test-unix-sndbuf.sh \
	test-socket-activation.sh test-daemon.sh test-pidfile.sh \
	test-readiness.sh test-print-uri.sh test-user-group.sh test-single.sh
