# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the ext2 filter, included by tests/Makefile.am.
