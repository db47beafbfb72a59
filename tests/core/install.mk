# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# What is installed and how: the symbols each .so exports, make
# install, the systemd service, the man pages and their examples,
# licence notices.
TESTS += test-so-symbols.sh test-install.sh test-service.sh \
	test-podchecker.sh test-docs-examples.sh test-licence-notices.sh
