# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The tracing examples of the man pages, and the example plugins'
# probes; every tracer command of the pages on one server.
TESTS += test-tracing-examples.sh test-example-plugin-probes.sh \
	test-docs-one-server.sh
