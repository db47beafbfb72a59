# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the floppy plugin, included by tests/Makefile.am.
