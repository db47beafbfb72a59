# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# TLS options as nbdkit 1.32 takes them: accepted while TLS
# is off, PSK overriding X.509.  Included by tests/Makefile.am.

TESTS += \
	test-tls-options-unused.sh \
	test-tls-psk-overrides.sh
