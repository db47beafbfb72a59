# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the ruby plugin host (libruby).
if HAVE_RUBY
TESTS += test-ruby-plugin.sh test-ruby-plugin-errors.sh \
	test-ruby-plugin-probes.sh test-ruby-plugin-fork.sh
endif
EXTRA_DIST += lang/ruby.sh
