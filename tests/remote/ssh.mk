# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the ssh plugin (libssh): a file over SFTP.  Each test starts
# its own sshd with tests/sshd-start.sh.
EXTRA_DIST += sshd-start.sh
if HAVE_SSH
TESTS += test-ssh-plugin.sh test-ssh-create.sh test-ssh-hostkey.sh \
	test-ssh-password.sh test-ssh-sshd-killed.sh test-ssh-timeout.sh \
	test-ssh-probes.sh test-ssh-config.sh test-ssh-shrunk-file.sh
endif
