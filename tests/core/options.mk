# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The command line: parsing and its errors, --help, --version,
# --dump-config and --dump-plugin, debug flags, -v, plugin parameters.
TESTS += test-bad-command-line.sh test-dump-config.sh \
	test-dump-plugin.sh test-version.sh test-help.sh test-options-all.sh \
	test-options-completion.sh test-options-network.sh test-options-misc.sh \
	test-debug-server-flags.sh test-debug-flags.sh test-plugin-params.sh \
	test-param-errors.sh test-verbose.sh test-verbose-open.sh
# The options nbdkit 1.36 to 1.46 added: @PATH, --log=FILE, --name,
# -D nbdkit.environ, --keepalive, --timeout, --no-mc, --run's socket.
TESTS += test-options-param-file.sh test-options-log-file.sh \
	test-options-146-net.sh
