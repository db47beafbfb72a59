# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the OCaml binding (plugins/ocaml).
TESTS += test-ocaml-plugin.sh test-ocaml-plugin-probe.sh
EXTRA_DIST += ocaml-build.sh
