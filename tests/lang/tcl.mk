# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the tcl plugin host (libtcl).
