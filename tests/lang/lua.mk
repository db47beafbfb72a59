# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the lua plugin host (liblua5.4).
