# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# TLS against a hostile client that works at the record level:
# tests included by tests/Makefile.am.

TESTS += test-tls-hostile-handshake.sh test-tls-hostile-records.sh

if HAVE_GNUTLS
check_PROGRAMS += tls-hostile-client
tls_hostile_client_SOURCES = tls-hostile-client.c
tls_hostile_client_CPPFLAGS = -I$(top_builddir)
tls_hostile_client_CFLAGS = $(WARN_CFLAGS) $(GNUTLS_CFLAGS)
tls_hostile_client_LDADD = $(GNUTLS_LIBS)
endif
EXTRA_DIST += tls-hostile-client.c tls/hostile-lib.sh
