# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the Go binding (plugins/golang).
TESTS += test-golang-plugin.sh test-golang-plugin-probe.sh
EXTRA_DIST += golang-build.sh binding-checks.sh

# The Go build cache the Go tests share (tests/golang-build.sh).
clean-local: clean-go-cache
clean-go-cache:
	rm -rf go-cache
.PHONY: clean-go-cache
