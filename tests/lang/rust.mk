# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the Rust binding (plugins/rust).
TESTS += test-rust-plugin.sh test-rust-plugin-probe.sh
