# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the perl plugin host (libperl).
