# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the tcl plugin host (libtcl).
if HAVE_TCL
TESTS += test-tcl-plugin.sh test-tcl-plugin-errors.sh \
	test-tcl-plugin-probes.sh test-tcl-plugin-fork.sh
endif
EXTRA_DIST += lang/tcl.sh
