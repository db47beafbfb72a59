# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the nozero filter, included by tests/Makefile.am.
