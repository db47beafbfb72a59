# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the cdi plugin: podman (storage in the test's directory) and
# a private docker-registry on 127.0.0.1 (tests/cdi-registry.sh).
TESTS += test-cdi-plugin.sh test-cdi-probes.sh test-cdi-bad-layout.sh
EXTRA_DIST += cdi-registry.sh
