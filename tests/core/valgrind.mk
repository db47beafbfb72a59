# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The server under valgrind memcheck.
TESTS += test-valgrind.sh
