# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Stopping: draining requests on a signal, under load, with calls
# asleep in the plugin, and when the client has gone.
TESTS += test-stop-drain.sh test-stop-under-load.sh \
	test-nanosleep-shutdown.sh test-nanosleep-client-gone.sh
