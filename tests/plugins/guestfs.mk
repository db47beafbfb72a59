# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the guestfs plugin, included by tests/Makefile.am.  Each
# launches one libguestfs appliance (TCG: about 15 s).
TESTS += test-guestfs-plugin.sh test-guestfs-debian.sh
EXTRA_DIST += guestfs-image.sh
