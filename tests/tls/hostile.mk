# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# TLS hardening (issue 22), a client that works at the record level: tests included by tests/Makefile.am.
