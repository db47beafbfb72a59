# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Captive mode (--run): the environment and shell variables the
# command sees, and the server's exit status.
TESTS += test-captive-exit.sh test-captive-env.sh \
	test-captive-shell-vars.sh test-exportname.sh
