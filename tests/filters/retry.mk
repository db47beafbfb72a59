# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the retry filter, included by tests/Makefile.am.
TESTS += test-retry-filter.sh test-retry-filter-probes.sh

# A plugin that fails its first N calls, loaded by path by the retry
# and retry-request tests.
check_LTLIBRARIES += flaky-plugin.la
flaky_plugin_la_SOURCES = ../filters/retry/flaky-plugin.c
flaky_plugin_la_CPPFLAGS = -I$(top_srcdir)/include -I$(top_builddir)/include \
	-I$(top_builddir)
flaky_plugin_la_CFLAGS = $(WARN_CFLAGS) -pthread
flaky_plugin_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere
