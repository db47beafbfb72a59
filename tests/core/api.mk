# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The plugin API calls of nbdkit 1.34 .. 1.46, from compiled plugins.
TESTS += test-api-disconnect.sh
EXTRA_DIST += test-api-disconnect.sh
