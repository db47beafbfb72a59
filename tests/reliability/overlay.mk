# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Overlays on disk: the cow and cache filters keep their
# overlay in an unlinked sparse file in $TMPDIR, so an overlay can
# outgrow the memory the server may use, and a full $TMPDIR is an
# ENOSPC, not a crash.  Included by tests/Makefile.am.
TESTS += \
	reliability/test-overlay-larger-than-memory.sh \
	reliability/test-overlay-disk-full.sh
EXTRA_DIST += reliability/README
