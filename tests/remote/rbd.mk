# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the rbd plugin (librbd): a Ceph RBD image.
