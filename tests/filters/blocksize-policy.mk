# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the blocksize-policy filter, included by tests/Makefile.am.
