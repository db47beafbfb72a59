# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Probes for plugin and filter authors: the examples' own providers,
# nbdkit_probe from C, sh and eval, one built out of the tree, and
# nbdkit-user that shows them.
TESTS += test-example-probes-join.sh
TESTS += test-example-filter-probes.sh
TESTS += test-example-out-of-tree.sh
TESTS += test-example-provider.sh
TESTS += test-sh-plugin-user-probe.sh
TESTS += test-eval-plugin-user-probe.sh
TESTS += test-tool-user.sh
