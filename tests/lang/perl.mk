# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the perl plugin host (libperl).
TESTS += test-perl-plugin.sh test-perl-plugin-errors.sh \
	test-perl-plugin-probes.sh test-perl-plugin-memory.sh
EXTRA_DIST += perl-lua-compare.sh
EXTRA_DIST += lang/perl.sh
