# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the python plugin host (libpython3).
