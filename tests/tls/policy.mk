# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# TLS server policy (versions, purposes, suites): tests included by
# tests/Makefile.am.

TESTS += \
	test-tls-versions.sh \
	test-tls-purpose.sh \
	test-tls-suites.sh \
	test-tls-policy-probes.sh \
	test-tls-large-replies.sh \
	test-tls-tcp-unsent.sh \
	test-tls-tcp-trickle.sh
EXTRA_DIST += tls/policy-lib.sh tls-priority-client.c tls-trickle-client.py \
	nbd_raw.py

# An NBD client that upgrades with a priority string of its choosing
# (test-tls-suites.sh, test-tls-policy-probes.sh).
if HAVE_GNUTLS
check_PROGRAMS += tls-priority-client
tls_priority_client_SOURCES = tls-priority-client.c
tls_priority_client_CPPFLAGS = -I$(top_srcdir)/common -I$(top_builddir)
tls_priority_client_CFLAGS = $(WARN_CFLAGS) $(GNUTLS_CFLAGS)
tls_priority_client_LDADD = $(GNUTLS_LIBS)
endif
