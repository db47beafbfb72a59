# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the linuxdisk plugin, included by tests/Makefile.am.
TESTS += test-linuxdisk-plugin.sh test-linuxdisk-probes.sh
