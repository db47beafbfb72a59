# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Included by every Makefile.am that builds man pages from POD.
# Set man_pod to the .pod files (section 1); the .1 pages follow.
if HAVE_POD2MAN
man_MANS = $(man_pod:.pod=.1)
CLEANFILES = $(man_MANS)
%.1: %.pod
	$(AM_V_GEN)$(POD2MAN) --section=1 --center=nbdkit \
	  --release="nbdkit $(VERSION)" --name=$(*F) $< > $@.tmp && mv $@.tmp $@
endif
EXTRA_DIST = $(man_pod)
