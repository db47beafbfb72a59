# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# TLS hardening (issue 22), server policy: versions, purposes, suites: tests included by tests/Makefile.am.
