# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Included by every Makefile.am that builds man pages from POD.
# Set man_pod to the .pod files of section 1 (commands) and man3_pod to
# those of section 3 (the plugin and filter APIs, and the language
# plugins a program is written for, as upstream files them); the .1
# and .3 pages follow.
if HAVE_POD2MAN
man_MANS = $(man_pod:.pod=.1) $(man3_pod:.pod=.3)
CLEANFILES = $(man_MANS)
%.1: %.pod
	$(AM_V_GEN)$(POD2MAN) --section=1 --center=nbdkit \
	  --release="nbdkit $(VERSION)" --name=$(*F) $< > $@.tmp && mv $@.tmp $@
%.3: %.pod
	$(AM_V_GEN)$(POD2MAN) --section=3 --center=nbdkit \
	  --release="nbdkit $(VERSION)" --name=$(*F) $< > $@.tmp && mv $@.tmp $@
endif
EXTRA_DIST = $(man_pod) $(man3_pod)
