# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# What is installed and how: the symbols each .so exports, make
# install, the systemd service, the man pages and their examples, the
# design doc's names against the tree, licence notices.
TESTS += test-so-symbols.sh test-install.sh test-service.sh \
	test-podchecker.sh test-docs-examples.sh test-licence-notices.sh \
	test-hacking-doc.sh test-bash-completion.sh test-readme-examples.sh
