# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the cc plugin, included by tests/Makefile.am.
