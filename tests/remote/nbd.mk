# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the nbd plugin (libnbd): proxy to another NBD server.
