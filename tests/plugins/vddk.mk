# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the vddk plugin, included by tests/Makefile.am.  VMware's
# library cannot be had here: they run the plugin against a stand-in
# (plugins/vddk/test-stub/), built three times for three library ages
# (all entry points; VDDK 6.5's; one older than 6.5).
TESTS += test-vddk-plugin.sh test-vddk-errors.sh test-vddk-probes.sh
EXTRA_DIST += vddk-stub.sh
check_LTLIBRARIES += vixstub80.la vixstub65.la vixstub60.la
vixstub_sources = ../plugins/vddk/test-stub/vixdisklib-stub.c
vixstub80_la_SOURCES = $(vixstub_sources)
vixstub80_la_CPPFLAGS = $(HELPER_CPPFLAGS) -DSTUB_VERSION=80
vixstub80_la_LDFLAGS = $(HELPER_LDFLAGS)
vixstub65_la_SOURCES = $(vixstub_sources)
vixstub65_la_CPPFLAGS = $(HELPER_CPPFLAGS) -DSTUB_VERSION=65
vixstub65_la_LDFLAGS = $(HELPER_LDFLAGS)
vixstub60_la_SOURCES = $(vixstub_sources)
vixstub60_la_CPPFLAGS = $(HELPER_CPPFLAGS) -DSTUB_VERSION=60
vixstub60_la_LDFLAGS = $(HELPER_LDFLAGS)
