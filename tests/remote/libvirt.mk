# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the libvirt plugin: a private libvirtd (qemu driver) started
# by the test, on a Unix socket in its temporary directory.
TESTS += test-libvirt-plugin.sh
