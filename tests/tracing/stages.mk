# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the tracing second pass, part C (stages), included by
# tests/Makefile.am.
TESTS += \
	test-probes-stages-requests.sh \
	test-probes-stages-workers.sh \
	test-probes-stages-config.sh \
	test-probes-stages-origin.sh \
	test-probes-stages-tls.sh \
	test-probes-stages-bigreads.sh

# A filter that logs after passing calls on, for
# test-probes-stages-origin.sh.
check_LTLIBRARIES += origin-filter.la
origin_filter_la_SOURCES = origin-filter.c
origin_filter_la_CPPFLAGS = -I$(top_srcdir)/include \
	-I$(top_builddir)/include -I$(top_builddir)
origin_filter_la_CFLAGS = $(WARN_CFLAGS)
origin_filter_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere
EXTRA_DIST += origin-filter.c
